"""Digital filters designed at build time and run at the block's rate (held blocks).

Design-time maths (``scipy.signal``, imported only then) runs in
:meth:`Block.pack`, once the block knows its sample time; the kernels only
multiply and add.
"""
from __future__ import annotations

import math

import numpy as np

from hapflow import designs
from hapflow.block import Block, ParamError
from hapflow.jit import njit
from hapflow.names import Derived
from hapflow.errors import GraphError
from hapflow.params import Live, Structural, at_least, between, nonnegative, one_of, positive
from hapflow.ports import In, Out

BTYPES = ("lowpass", "highpass", "bandpass", "bandstop")


@njit
def sos_df2t(p, p0, nsec, d, d0, u, advance):
    """Run ``u`` through ``nsec`` second-order sections; return the output.

    ``p[p0 + 5 s : p0 + 5 s + 5]`` holds ``[b0, b1, b2, a1, a2]`` of section
    ``s`` (``a0 = 1``), ``d[d0 + 2 s : d0 + 2 s + 2]`` its direct-form-II-
    transposed states ``(z1, z2)``, as in ``scipy.signal.sosfilt``::

        y  = b0 u + z1
        z1 = b1 u - a1 y + z2
        z2 = b2 u - a2 y

    The states are advanced only when ``advance`` is true.
    """
    v = u
    for s in range(nsec):
        k = p0 + 5 * s
        j = d0 + 2 * s
        y = p[k] * v + d[j]
        if advance:
            d[j] = p[k + 1] * v - p[k + 3] * y + d[j + 1]
            d[j + 1] = p[k + 2] * v - p[k + 4] * y
        v = y
    return v


def butter_sos(order: int, cutoff, btype: str, fs: float, what: str = "cutoff") -> np.ndarray:
    """``scipy.signal.butter(order, cutoff, btype, output='sos', fs=fs)`` with a clear error.

    Raises
    ------
    ParamError
        If a cut-off is not below the Nyquist frequency ``fs / 2``.
    """
    edges = np.atleast_1d(np.asarray(cutoff, dtype=np.float64))
    if np.any(edges >= 0.5 * fs):
        raise ParamError(what, f"parameter {what!r} "
                               f"({', '.join(f'{c:g}' for c in edges)} Hz) must be "
                               f"below the Nyquist frequency {0.5 * fs:g} Hz of the block's rate "
                               f"{fs:g} Hz: lower it or run the block faster")
    wn = edges[0] if edges.size == 1 else edges

    def design() -> np.ndarray:
        import scipy.signal                  # design time only: keep the library import light
        return scipy.signal.butter(order, wn, btype=btype, output="sos", fs=fs)
    return designs.cached("butter_sos", (order, edges.tolist(), btype, fs), design)


def sample_time(block: Block) -> float:
    """The block's sample time (s), for its design.

    Raises
    ------
    GraphError
        Before the block is added to a graph, when it is not known.
    """
    if block.sample_time is None:
        raise GraphError(f"{type(block).__name__}: the sample time is not known until the "
                         "block is added to a graph")
    return block.sample_time


MAX_ORDER = 32
"""Highest Butterworth order: beyond it the design loses precision and sections multiply
(an order of a million took minutes to design and generate)."""


def sections(order: int, btype: str) -> int:
    """Number of second-order sections of a Butterworth design."""
    return (order + 1) // 2 if btype in ("lowpass", "highpass") else order


class ButterworthFilter(Block):
    """Butterworth filter (low/high/band-pass, band-stop) as cascaded biquads.

    Designed at build time with ``scipy.signal.butter(order, cutoff, btype,
    output='sos', fs=1/Ts)`` (bilinear transform with pre-warping, so the
    discrete response is exactly -3 dB at each cut-off), ``Ts`` the block's
    sample time, and run in direct form II transposed, section by section
    (the arithmetic of ``scipy.signal.sosfilt``), independently on each of
    the ``size`` elements.  As in the testbed of seed 000, the designer gives
    only order and cut-off(s).  Band filters of order ``N`` have ``2 N``
    poles (``N`` sections); low/high-pass have ``ceil(N / 2)`` sections.

    A held block: the output at a sample hit is computed from the current
    input and the state (direct feedthrough, no extra delay); ``update`` then
    advances the state.  The state starts at zero.

    Ports
    -----
    u : in, (n,), any unit     input
    y : out, (n,), unit of u   filtered input
    """

    params = {"btype": Structural("lowpass", kind="str", check=one_of(*BTYPES),
                                  doc="lowpass, highpass, bandpass or bandstop"),
              "order": Structural(2, kind="int", check=between(1, MAX_ORDER),
                                  doc=f"filter order (at most {MAX_ORDER})"),
              "cutoff": Structural((10.0,), kind="floats", unit="Hz", check=positive,
                                   doc="-3 dB frequency (two, low then high, for band filters)"),
              "size": Structural(1, kind="int", check=at_least(1), doc="number of elements")}

    def configure(self) -> None:
        band = self.btype in ("bandpass", "bandstop")
        need = 2 if band else 1
        if len(self.cutoff) != need:
            raise ParamError("cutoff", f"parameter 'cutoff' needs {need} frequency(ies) for a "
                                       f"{self.btype} filter, got {len(self.cutoff)}")
        if band and not self.cutoff[0] < self.cutoff[1]:
            raise ParamError("cutoff", "parameter 'cutoff' must be [low, high] with low < high, "
                                       f"got {list(self.cutoff)}")
        self.nsec = sections(self.order, self.btype)
        self.dstate = 2 * self.nsec * self.size
        self.inputs = {"u": In(self.size, doc="input")}
        self.outputs = {"y": Out(self.size, unit="=u", doc="filtered input")}

    derived = {"sections": Derived(lambda b: b.sos()[:, [0, 1, 2, 4, 5]].ravel(), size=None,
                                   doc="[b0, b1, b2, a1, a2] of each second-order section")}

    def sos(self) -> np.ndarray:
        """The second-order sections (``scipy.signal`` layout) at the block's sample time."""
        return butter_sos(self.order, self.cutoff, self.btype, 1.0 / sample_time(self))

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        ns = (p.size - BUTTER.sections) // 5
        for j in range(y.size):
            y[j] = sos_df2t(p, BUTTER.sections, ns, d, 2 * ns * j, u[j], False)

    @staticmethod
    @njit
    def update(t, x, d, m, p, u):
        ns = (p.size - BUTTER.sections) // 5
        for j in range(u.size):
            sos_df2t(p, BUTTER.sections, ns, d, 2 * ns * j, u[j], True)


class Differentiator(Block):
    """Backward-difference derivative, optionally low-pass filtered (first order).

    At sample ``k`` (``Ts`` the block's sample time)::

        g[k] = (u[k] - u[k-1]) / Ts                      (g[0] = 0: no start-up kick)
        y[k] = a y[k-1] + (1 - a) g[k],   a = exp(-2 pi cutoff Ts)

    with ``a = 0`` (no filter, ``y = g``) when ``cutoff = 0``; the filter's
    pole is matched and its DC gain is 1, so a ramp of slope ``s`` gives
    ``y -> s``.  In z-transform terms
    ``Y/U = (1 - a)/Ts (1 - z^-1)/(1 - a z^-1)``.

    **Delay.**  The backward difference is exact for a ramp but measures the
    slope half a sample back: at low frequency it delays the derivative by
    ``Ts / 2``.  The low-pass adds ``a / (1 - a)`` samples
    (``~ 1 / (2 pi cutoff)`` s when ``cutoff << 1/Ts``), so the total
    low-frequency group delay is ``Ts (1/2 + a / (1 - a))``; e.g. 4 kHz and
    50 Hz: 0.125 ms + 3.06 ms.  A held block with direct feedthrough.

    Ports
    -----
    u : in, (n,), any unit        signal to differentiate
    y : out, (n,), ``unit``       derivative estimate (unit of u per second)
    """

    params = {"cutoff": Live(0.0, unit="Hz", check=nonnegative,
                             doc="first-order low-pass cut-off (0 = no filter)"),
              "size": Structural(1, kind="int", check=at_least(1), doc="number of elements"),
              "unit": Structural(None, kind="str",
                                 doc="unit of y, e.g. m/s for a position input (default: any)")}
    istate = 1

    def configure(self) -> None:
        self.dstate = 2 * self.size
        self.inputs = {"u": In(self.size, doc="signal to differentiate")}
        self.outputs = {"y": Out(self.size, unit=self.unit, doc="filtered derivative")}

    derived = {"sample_rate": Derived(lambda b: 1.0 / sample_time(b), unit="Hz", doc="1 / Ts"),
               "pole": Derived(lambda b: b.pole(), doc="a = exp(-2 pi cutoff Ts); 0 unfiltered")}

    def pole(self) -> float:
        """The low-pass pole ``a`` at the block's sample time (0 without the filter).

        Raises
        ------
        ParamError
            If the cut-off is not below the Nyquist frequency.
        """
        ts = sample_time(self)
        if self.cutoff > 0.0 and self.cutoff >= 0.5 / ts:
            raise ParamError("cutoff", f"parameter 'cutoff' ({self.cutoff:g} Hz) must be "
                             f"below the Nyquist frequency {0.5 / ts:g} Hz (or 0 for no filter)")
        return math.exp(-2.0 * math.pi * self.cutoff * ts) if self.cutoff > 0.0 else 0.0

    def delay(self) -> float:
        """Low-frequency group delay (s) of the derivative estimate."""
        a = self.pole()
        return self.sample_time * (0.5 + a / (1.0 - a))

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        n = y.size
        a = p[DIFF.pole]
        for j in range(n):
            g = (u[j] - d[j]) * p[DIFF.sample_rate] if m[0] != 0 else 0.0
            y[j] = a * d[n + j] + (1.0 - a) * g

    @staticmethod
    @njit
    def update(t, x, d, m, p, u):
        n = u.size
        a = p[DIFF.pole]
        for j in range(n):
            g = (u[j] - d[j]) * p[DIFF.sample_rate] if m[0] != 0 else 0.0
            d[n + j] = a * d[n + j] + (1.0 - a) * g
            d[j] = u[j]
        m[0] = 1


class LeadLag(Block):
    """First-order lead or lag ``(1 + s / (2 pi f_zero)) / (1 + s / (2 pi f_pole))``, unity DC gain.

    Discretised at the block's sample time by the bilinear (Tustin)
    transform (``scipy.signal.bilinear``) and run in direct form II
    transposed.  With ``f_pole > f_zero`` it is a lead; with ``f_zero`` at
    an actuator's lag corner it cancels that lag and puts a faster pole in
    its place - e.g. ``f_zero = 29 Hz`` (the LinMot's closed-loop force
    bandwidth, seed 000 Table 1) and ``f_pole = 250 Hz`` in front of
    :class:`LinearMotor` make the force follow a command with a 250 Hz
    instead of a 29 Hz lag, which lets a position loop run several times
    faster with the same stability margins.  The high-frequency gain is
    ``f_pole / f_zero``.  A held block with direct feedthrough.

    Ports
    -----
    u : in, (n,), any unit     input
    y : out, (n,), unit of u   filtered input
    """

    params = {"f_zero": Live(29.0, unit="Hz", check=positive, doc="zero (corner) frequency"),
              "f_pole": Live(250.0, unit="Hz", check=positive, doc="pole (corner) frequency"),
              "size": Structural(1, kind="int", check=at_least(1), doc="number of elements")}

    def configure(self) -> None:
        self.dstate = self.size
        self.inputs = {"u": In(self.size, doc="input")}
        self.outputs = {"y": Out(self.size, unit="=u", doc="filtered input")}

    derived = {"b0": Derived(lambda b: b.coefficients()[0][0], doc="numerator b0 (a0 = 1)"),
               "b1": Derived(lambda b: b.coefficients()[0][1], doc="numerator b1"),
               "a1": Derived(lambda b: b.coefficients()[1][1], doc="denominator a1")}

    def coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """``(b, a)`` of the discrete filter (``a[0] = 1``) at the block's sample time."""
        fs = 1.0 / sample_time(self)
        for name in ("f_zero", "f_pole"):
            if self.values[name] >= 0.5 * fs:
                raise ParamError(name, f"parameter {name!r} ({self.values[name]:g} Hz) must be "
                                       f"below the Nyquist frequency {0.5 * fs:g} Hz")

        def design() -> np.ndarray:
            import scipy.signal
            return np.array(scipy.signal.bilinear([1.0 / (2.0 * math.pi * self.f_zero), 1.0],
                                                  [1.0 / (2.0 * math.pi * self.f_pole), 1.0], fs))
        b, a = designs.cached("bilinear_lead_lag", (self.f_zero, self.f_pole, fs), design)
        return b / a[0], a / a[0]

    @staticmethod
    @njit
    def output(t, x, d, m, p, u, y):
        for j in range(y.size):
            y[j] = p[LEADLAG.b0] * u[j] + d[j]

    @staticmethod
    @njit
    def update(t, x, d, m, p, u):
        for j in range(u.size):
            yj = p[LEADLAG.b0] * u[j] + d[j]
            d[j] = p[LEADLAG.b1] * u[j] - p[LEADLAG.a1] * yj


BUTTER, DIFF, LEADLAG = ButterworthFilter.P, Differentiator.P, LeadLag.P    # offsets by name
