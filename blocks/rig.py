"""Simulated twins of the test-rig hardware (seed 000): linear motor, encoder, impedance head."""
from __future__ import annotations

import math

import numpy as np

from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.params import Live, Structural, between, nonnegative, one_of, positive
from hapflow.ports import In, Out
from hapflow.rng import normal

from .filters import butter_sos, sample_time, sos_df2t


class LinearMotor(Block):
    """Force-controlled linear motor: force limit, first-order force lag, optional end stops.

    The LinMot P01-23x160 of the testbed of seed 000 (Table 1: 60 N peak
    force, ~29 Hz closed-loop force bandwidth, 210 mm maximum stroke).  The
    motor's current loop is modelled by its closed-loop force bandwidth ``f``
    and peak force ``F_max``::

        dF/dt = 2 pi f (clip(force_cmd, -F_max, F_max) - F),   F(0) = 0

    so a step of ``u`` (within the limit) gives ``F(t) = u (1 - exp(-2 pi f t))``.

    **End stops** (``end_stops: true``).  The motor does not own the carriage
    position, so it then takes the carriage position ``pos`` and velocity
    ``vel`` (wire the load's state outputs to them) and adds to its force the
    reaction of stiff, damped, unilateral end stops beyond the stroke
    ``[pos_min, pos_max]`` (default +-105 mm: the 210 mm maximum stroke)::

        F_stop = min(0, -(k_s (pos - pos_max) + c_s vel))   for pos > pos_max
               = max(0, -(k_s (pos - pos_min) + c_s vel))   for pos < pos_min
               = 0                                           otherwise
        force  = F + F_stop

    (a stop only pushes, never pulls the carriage back).  The default
    ``k_s = 2e5 N/m``, ``c_s = 200 N s/m`` stop the full 60 N within 0.3 mm;
    with a 0.58 kg load the contact rings at ~93 Hz with damping ratio ~0.3
    and ``omega h ~ 0.15`` at 4 kHz, well inside RK4's stable range.
    ``at_limit`` is true while the carriage is beyond the stroke.  Then
    ``force`` feeds through from ``pos`` and ``vel`` (state outputs of the
    load, so no algebraic loop) but not from ``force_cmd``.  Without end
    stops (the default, which keeps older graphs valid) the block has only
    ``force_cmd`` and ``force``, and ``force`` depends on the state only:
    the motor breaks algebraic loops.

    Ports
    -----
    force_cmd : in, (1,), N        commanded force
    pos       : in, (1,), m        carriage position (only with end_stops)
    vel       : in, (1,), m/s      carriage velocity (only with end_stops)
    force     : out, (1,), N       force applied to the load (lag state + end-stop reaction)
    at_limit  : out, (1,), b1      carriage beyond the stroke (only with end_stops)
    """

    inputs = {"force_cmd": In(1, unit="N", doc="commanded force")}
    outputs = {"force": Out(1, unit="N", depends="state", doc="force applied to the load")}
    params = {"bandwidth": Live(29.0, unit="Hz", check=positive,
                                doc="closed-loop force bandwidth (first-order lag corner)"),
              "peak_force": Live(60.0, unit="N", check=positive,
                                 doc="force command saturation"),
              "end_stops": Structural(False, kind="bool",
                                      doc="model the stroke end stops (adds inputs pos, vel "
                                          "and output at_limit)"),
              "pos_min": Live(-0.105, unit="m", doc="lower end of the stroke"),
              "pos_max": Live(0.105, unit="m", doc="upper end of the stroke"),
              "stop_stiffness": Live(2e5, unit="N/m", check=nonnegative,
                                     doc="end-stop spring rate"),
              "stop_damping": Live(200.0, unit="N s/m", check=nonnegative,
                                   doc="end-stop damping (only while in contact)")}
    derived = {"omega": Derived(lambda b: 2.0 * math.pi * b.bandwidth, unit="rad/s",
                                doc="corner of the force lag")}
    cstate = 1

    def validate(self, changed: str | None) -> None:
        if not self.pos_min < self.pos_max:
            raise ParamError(changed or "pos_min", f"parameter 'pos_min' ({self.pos_min}) must "
                                                   f"be < 'pos_max' ({self.pos_max})")

    def configure(self) -> None:
        if self.end_stops:
            self.inputs = {"force_cmd": In(1, unit="N", doc="commanded force"),
                           "pos": In(1, unit="m", doc="carriage position"),
                           "vel": In(1, unit="m/s", doc="carriage velocity")}
            self.outputs = {
                "force": Out(1, unit="N", depends=("pos", "vel"),
                             doc="force applied to the load, end-stop reaction included"),
                "at_limit": Out(1, dtype="b1", depends=("pos", "vel"),
                                doc="carriage beyond the stroke")}

    def kernels(self):
        k = {"deriv": LinearMotor.deriv, "output": LinearMotor.output}
        if self.end_stops:
            k = {"deriv": LinearMotor.deriv_stops, "output": LinearMotor.output_stops}
        return k

    @staticmethod
    @njit
    def deriv(t, x, d, m, p, force_cmd, dx):
        u = min(max(force_cmd[0], -p[MOTOR.peak_force]), p[MOTOR.peak_force])
        dx[0] = p[MOTOR.omega] * (u - x[0])

    @staticmethod
    @njit
    def output(t, x, d, m, p, force_cmd, force):
        force[0] = x[0]

    @staticmethod
    @njit
    def deriv_stops(t, x, d, m, p, force_cmd, pos, vel, dx):
        u = min(max(force_cmd[0], -p[MOTOR.peak_force]), p[MOTOR.peak_force])
        dx[0] = p[MOTOR.omega] * (u - x[0])

    @staticmethod
    @njit
    def output_stops(t, x, d, m, p, force_cmd, pos, vel, force, at_limit):
        lo, hi = p[MOTOR.pos_min], p[MOTOR.pos_max]
        f = _end_stop(pos[0], vel[0], lo, hi, p[MOTOR.stop_stiffness], p[MOTOR.stop_damping])
        force[0] = x[0] + f
        at_limit[0] = pos[0] > hi or pos[0] < lo


@njit
def _end_stop(x, v, lo, hi, k, c):
    """Unilateral spring-damper end-stop force (N) on a carriage at x (m), v (m/s)."""
    if x > hi:
        return min(0.0, -(k * (x - hi) + c * v))
    if x < lo:
        return max(0.0, -(k * (x - lo) + c * v))
    return 0.0


ROUNDING = {"floor": 0.0, "nearest": 0.5}
"""Encoder rounding modes: the offset added to the count quotient before floor."""


class Encoder(Block):
    """Incremental linear encoder: quantise a position to the count resolution.

    ``counts = floor(true_pos / resolution + o)`` with ``o = 0`` for
    ``rounding: floor`` (the default: the double-precision quotient rounded
    towards minus infinity, so a position just below a count edge reads the
    lower count, also for negative positions) and ``o = 1/2`` for
    ``rounding: nearest`` (the nearest count, halves rounded up, as
    Simulink's Quantizer and "Nearest" rounding), and
    ``pos = counts * resolution``.  Memoryless; both outputs feed through
    from ``true_pos``.  The count origin is the position 0.

    Ports
    -----
    true_pos : in, (1,), m              position of the scale
    pos      : out, (1,), m             quantised position, counts * resolution
    counts   : out, (1,), i8, count     encoder counts
    """

    inputs = {"true_pos": In(1, unit="m", doc="position of the scale")}
    outputs = {"pos": Out(1, unit="m", doc="quantised position"),
               "counts": Out(1, dtype="i8", unit="count", doc="encoder counts")}
    params = {"resolution": Live(5e-6, unit="m", check=positive, doc="length of one count"),
              "rounding": Structural("floor", kind="str", check=one_of(*ROUNDING),
                                     doc="floor (towards minus infinity) or nearest")}
    derived = {"round_offset": Derived(lambda b: ROUNDING[b.rounding], unit="count",
                                       doc="added to the quotient before floor")}

    @staticmethod
    @njit
    def output(t, x, d, m, p, true_pos, pos, counts):
        c = math.floor(true_pos[0] / p[ENCODER.resolution] + p[ENCODER.round_offset])
        counts[0] = c
        pos[0] = c * p[ENCODER.resolution]


MOTOR, ENCODER = LinearMotor.P, Encoder.P       # the offsets their kernels name


@njit
def _adc(v, q, half_levels):
    """Round ``v`` to the nearest of the codes ``-half_levels .. half_levels - 1`` times ``q``."""
    if q <= 0.0:
        return v
    code = math.floor(v / q + 0.5)
    code = min(max(code, -half_levels), half_levels - 1.0)
    return code * q


class ImpedanceHead(Block):
    """Impedance head with charge amplifiers and ADC: measured force and acceleration.

    The B&K 8001 impedance head of the testbed of seed 000 behind B&K 2635
    charge amplifiers (a "light" 1 kHz low-pass) and a 16-bit ADC.  Each
    channel (force, acceleration) is measured as::

        measured[k] = ADC( LPF(true)[k] + offset + drift[k] + n[k] )

    - ``LPF``: the charge amplifier's low-pass, a Butterworth filter of order
      ``order`` (default 2) and -3 dB frequency ``cutoff`` (default 1 kHz,
      seed 000 section 2.3), discretised at the block's rate by
      ``scipy.signal.butter(..., output='sos', fs=rate)`` (bilinear with
      pre-warping: exactly -3 dB at ``cutoff``; unity DC gain) and run as
      biquads in direct form II transposed, like :class:`ButterworthFilter`.
      It feeds through (the ADC samples the amplifier output at the tick).
      The 2635's filter order is not in the seed; 2 is a plausible choice,
      ``order: 1`` gives a first-order amplifier.  Its low-frequency delay
      is ``sqrt(2)/(2 pi cutoff)`` (order 2) or ``1/(2 pi cutoff)`` (order 1).
    - ``n[k]``: white Gaussian noise at the ADC input with one-sided density
      ``force_noise`` (N/sqrt(Hz)) / ``accel_noise`` ((m/s^2)/sqrt(Hz)) up to
      the Nyquist frequency, i.e. a discrete standard deviation
      ``density * sqrt(rate / 2)``.  Defaults 2e-4 N/sqrt(Hz) (8.9 mN rms at
      4 kHz, ~3 LSB) and 1e-3 (m/s^2)/sqrt(Hz) (0.045 m/s^2 rms at 4 kHz,
      ~5 LSB) - plausible for a piezoelectric head and charge amplifier
      (the seed gives no noise figures).
    - ``drift[k]``: optional offset drift, a random walk
      ``drift[k+1] = drift[k] + force_drift sqrt(Ts) w[k]`` (intensity in
      N/sqrt(s), (m/s^2)/sqrt(s); default 0 = off), starting at 0;
      ``offset``: a constant offset (default 0).
    - ``ADC``: ``adc_bits`` (default 16, seed 000 section 2.4) over
      ``+-range``: step ``q = 2 range / 2^bits``, round to nearest,
      codes ``-2^(bits-1) .. 2^(bits-1) - 1`` so the reading clips at
      ``-range`` and ``range - q``.  ``adc_bits: 0`` = ideal (no
      quantisation or clipping).  Ranges: 100 N (covers the motor's 60 N;
      the head itself takes 300 N tension / 2000 N compression, seed 000
      Table 2) and 300 m/s^2 (covers the motor's 272 m/s^2, seed 000
      Table 1), i.e. LSBs of 3.05 mN and 9.16 mm/s^2.

    The accelerometer's 0.2 Hz high-pass corner (Table 2: 0.2-10000 Hz) and
    its transverse sensitivity are not modelled.  Noise comes from four
    independent streams (force noise, accel noise, force drift, accel
    drift) seeded from the graph seed and block name, so the same seed gives
    the same noise, and switching drift on does not change the white noise.
    A held block (it runs at its own rate; ``Ts`` = its sample time).

    Ports
    -----
    force : in, (1,), N          true force transmitted to the device
    accel : in, (1,), m/s^2      true acceleration of the device
    force : out, (1,), N         measured force
    accel : out, (1,), m/s^2     measured acceleration
    """

    inputs = {"force": In(1, unit="N", doc="true force transmitted to the device"),
              "accel": In(1, unit="m/s^2", doc="true acceleration")}
    outputs = {"force": Out(1, unit="N", doc="measured force"),
               "accel": Out(1, unit="m/s^2", doc="measured acceleration")}
    params = {"cutoff": Live(1000.0, unit="Hz", check=positive,
                             doc="charge-amplifier low-pass -3 dB frequency (seed 000: 1 kHz)"),
              "order": Structural(2, kind="int", check=between(1, 4),
                                  doc="charge-amplifier low-pass order (Butterworth)"),
              "force_noise": Live(2e-4, unit="N/sqrt(Hz)", check=nonnegative,
                                  doc="white noise density on the force channel"),
              "accel_noise": Live(1e-3, unit="(m/s^2)/sqrt(Hz)", check=nonnegative,
                                  doc="white noise density on the acceleration channel"),
              "force_drift": Live(0.0, unit="N/sqrt(s)", check=nonnegative,
                                  doc="random-walk intensity of the force offset drift"),
              "accel_drift": Live(0.0, unit="(m/s^2)/sqrt(s)", check=nonnegative,
                                  doc="random-walk intensity of the acceleration offset drift"),
              "force_offset": Live(0.0, unit="N", doc="constant force offset"),
              "accel_offset": Live(0.0, unit="m/s^2", doc="constant acceleration offset"),
              "force_range": Live(100.0, unit="N", check=positive,
                                  doc="ADC full scale of the force channel (+-range)"),
              "accel_range": Live(300.0, unit="m/s^2", check=positive,
                                  doc="ADC full scale of the acceleration channel (+-range)"),
              "adc_bits": Live(16, kind="int", check=between(0, 48),
                               doc="ADC resolution in bits (0 = ideal, no quantisation)")}
    derived = {"force_std": Derived(lambda b: b.noise_std()[0], unit="N",
                                    doc="discrete standard deviation of the force noise"),
               "accel_std": Derived(lambda b: b.noise_std()[1], unit="m/s^2",
                                    doc="discrete standard deviation of the acceleration noise"),
               "force_step": Derived(lambda b: b.force_drift * math.sqrt(b.sample_time),
                                     unit="N", doc="force drift step per sample (per unit normal)"),
               "accel_step": Derived(lambda b: b.accel_drift * math.sqrt(b.sample_time),
                                     unit="m/s^2", doc="acceleration drift step per sample"),
               "force_lsb": Derived(lambda b: b.lsb()[0], unit="N", doc="force ADC step"),
               "accel_lsb": Derived(lambda b: b.lsb()[1], unit="m/s^2",
                                    doc="acceleration ADC step"),
               "half_levels": Derived(lambda b: 2.0 ** (b.adc_bits - 1) if b.adc_bits else 0.0,
                                      doc="ADC codes each side of 0"),
               "sections": Derived(lambda b: b.sos()[:, [0, 1, 2, 4, 5]].ravel(), size=None,
                                   doc="[b0, b1, b2, a1, a2] of each low-pass section")}
    random_streams = 4

    def configure(self) -> None:
        self.nsec = (self.order + 1) // 2
        self.dstate = 4 * self.nsec + 4

    def noise_std(self) -> tuple[float, float]:
        """Discrete standard deviations (force N, accel m/s^2) of the white noise."""
        rate = 1.0 / self.sample_time
        return (self.force_noise * math.sqrt(0.5 * rate), self.accel_noise * math.sqrt(0.5 * rate))

    def lsb(self) -> tuple[float, float]:
        """ADC steps (force N, accel m/s^2); 0 when ``adc_bits`` is 0."""
        if self.adc_bits == 0:
            return 0.0, 0.0
        return (2.0 * self.force_range / 2.0 ** self.adc_bits,
                2.0 * self.accel_range / 2.0 ** self.adc_bits)

    def sos(self) -> np.ndarray:
        """The charge-amplifier low-pass sections (``scipy.signal`` layout)."""
        return butter_sos(self.order, self.cutoff, "lowpass", 1.0 / sample_time(self))

    @staticmethod
    @njit
    def init(x, d, m, p):
        n4 = 4 * ((p.size - HEAD.sections) // 5)
        d[n4] = p[HEAD.force_std] * normal(m, 0)
        d[n4 + 1] = p[HEAD.accel_std] * normal(m, 1)

    @staticmethod
    @njit
    def output(t, x, d, m, p, force_in, accel_in, force, accel):
        ns = (p.size - HEAD.sections) // 5
        n4 = 4 * ns
        yf = sos_df2t(p, HEAD.sections, ns, d, 0, force_in[0], False)
        ya = sos_df2t(p, HEAD.sections, ns, d, 2 * ns, accel_in[0], False)
        force[0] = _adc(yf + p[HEAD.force_offset] + d[n4 + 2] + d[n4], p[HEAD.force_lsb],
                        p[HEAD.half_levels])
        accel[0] = _adc(ya + p[HEAD.accel_offset] + d[n4 + 3] + d[n4 + 1], p[HEAD.accel_lsb],
                        p[HEAD.half_levels])

    @staticmethod
    @njit
    def update(t, x, d, m, p, force_in, accel_in):
        ns = (p.size - HEAD.sections) // 5
        n4 = 4 * ns
        sos_df2t(p, HEAD.sections, ns, d, 0, force_in[0], True)
        sos_df2t(p, HEAD.sections, ns, d, 2 * ns, accel_in[0], True)
        d[n4] = p[HEAD.force_std] * normal(m, 0)
        d[n4 + 1] = p[HEAD.accel_std] * normal(m, 1)
        if p[HEAD.force_step] != 0.0:      # drift streams advance only while drift is on
            d[n4 + 2] += p[HEAD.force_step] * normal(m, 2)
        if p[HEAD.accel_step] != 0.0:
            d[n4 + 3] += p[HEAD.accel_step] * normal(m, 3)


HEAD = ImpedanceHead.P      # offsets by name
