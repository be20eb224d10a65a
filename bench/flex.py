"""Flexible links (seed 004 chapters 4-6): every figure of hapflow.flex beside the thesis's.

Prints, for the reconstructions documented in hapflow/flex/manipulator.py and horn.py:

* the manipulator's first seven elastic frequencies at q* (horizontal plane)
  against tables 5.5 and 4.8;
* the bar horn's modes 8 and 14, the IMR truncation error against table 5.1,
  the 15-20 dof models against table 5.2, and how many interior modes EBR and
  SBE need for MAC >= 0.999 and eps_g <= 1 % (table 5.3's thresholds);
* model updating on synthetic modes (section 4.4);
* the 13-dof configuration-dependent reduction over q* +- 0.5 rad (figs. 5.11-5.16);
* the reduced model (eq. 6.3) driven by eq. 6.7's torques for 3 s (RK4,
  0.2 ms: the reduced model's highest mode is 1.3 kHz): the spectral peaks
  of the six elastic master displacements under 100 Hz (thesis fig. 6.13:
  8, 10, 11 Hz and the 14.2 and 67.0 Hz modes), and its CPU time;
* the chapter-6 operation counts (eq. 6.9) and the measured CPU time of one
  state-prediction matrix set (M^-1 K, M^-1 C, M^-1 L at a configuration),
  full (30 dofs) against reduced (13 dofs, Guyan part solved at that q);
* the CPU time of one derivative of the reduced model: the numpy reference
  (hapflow.flex.state_space) and the FlexibleLink block's compiled kernel;
* the EKF of chapter 6 (FlexibleLinkEKF, 26 states): CPU per step and per part
  (median of 5 runs, beside one model derivative measured in the same run;
  the issue's goal is 20 us), the multiply-adds per step counted from the
  kernels' loop bounds and the model's sparsity, and graphs/flexible_link_ekf.yaml's 3 s: estimation
  error and the spectral peaks of the estimated elastic displacements beside
  the truth's (thesis fig. 6.13).

Usage: ``python bench/flex.py [--ekf]`` (``--ekf``: the EKF section only).  A benchmark, not
a test: exits 0.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from hapflow.flex import craig_bampton as cbm
from hapflow.flex import updating as up
from hapflow.flex.erls_reduction import reduce_erls
from hapflow.flex.horn import MODE_8_HZ, MODE_14_HZ, horn
from hapflow.flex.manipulator import (E_ALUMINIUM, LINKS, MASTERS, Q_STAR, TABLE_4_8, TABLE_5_5,
                                      gauge_rows, manipulator)
from hapflow.flex.modal import frequency_error, mac, modes, nco, pair_modes
from hapflow.flex.state_space import expand


def row(*cells: object) -> None:
    print(" | ".join(f"{c:>10}" if not isinstance(c, float) else f"{c:>10.4g}" for c in cells))


def manipulator_table() -> None:
    print("\n## Manipulator at q* (horizontal plane), Hz")
    M, K, _ = manipulator().matrices(Q_STAR)
    f, _ = modes(M, K, 10)
    row("mode", "hapflow", "table 5.5", "dev %", "table 4.8", "dev %")
    for k in range(7):
        row(k + 1, f[3 + k], TABLE_5_5[k], 100 * (f[3 + k] / TABLE_5_5[k] - 1),
            TABLE_4_8[k], 100 * (f[3 + k] / TABLE_4_8[k] - 1))


def reduced_mode(M, K, H, shape):
    fr, Ur = modes(*cbm.project(M, K, H))
    shapes = H @ Ur
    j = pair_modes(shape[:, None], shapes, M)[0]
    return fr[j], shapes[:, j]


def horn_tables() -> None:
    h = horn()
    f, U = modes(h.M, h.K, 14)
    print(f"\n## Bar horn ({h.M.shape[0]} dofs, plane strain)")
    row("mode", "hapflow Hz", "thesis Hz", "dev %")
    row(8, f[7], MODE_8_HZ, 100 * (f[7] / MODE_8_HZ - 1))
    row(14, f[13], MODE_14_HZ, 100 * (f[13] / MODE_14_HZ - 1))
    cb = cbm.craig_bampton(h.M, h.K, h.masters)
    targets = [7, 13]
    r = cbm.imr(h.M, h.K, cb, targets)
    eps = cbm.truncation_error(h.M, h.K, cb, targets, r) * 100
    table51 = [70.8666, 47.9001, 35.4221, 25.5901, 17.0620, 8.5531, 3.3567, 1.5902, 0.7700]
    print("\nIMR, Lambda = {8, 14}: table 5.1 and 5.2")
    row("N_red", "eps_q %", "table 5.1", "N_s", "ef8 %", "NCO8", "ef14 %", "NCO14")
    for tau in range(1, 15):
        H = cb.basis(r.order[:tau])
        f8, u8 = reduced_mode(h.M, h.K, H, U[:, 7])
        f14, u14 = reduced_mode(h.M, h.K, H, U[:, 13])
        row(6 + tau, float(eps[tau]), table51[tau - 1] if tau <= 9 else "-", int(r.order[tau - 1] + 1),
            float(frequency_error(f[7], f8)), nco(U[:, 7], u8, h.M),
            float(frequency_error(f[13], f14)), nco(U[:, 13], u14, h.M))
    force = np.zeros(h.M.shape[0])
    force[h.axial] = 1.0
    w = 2 * np.pi * f[7] * 1.01
    x = np.linalg.solve(h.K - w ** 2 * h.M, force)
    print("\nEBR vs SBE: uniform axial force on the input face at 1.01 f8")
    row("ranking", "modes for MAC>=0.999 and eps_g<=1 %")
    for name, ranking in (("EBR", cbm.ebr(h.M, h.K, cb, force[None], [w])), ("IMR", r),
                          ("SBE", cbm.sbe(cb))):
        need = "> 60"
        for tau in range(61):
            H = cb.basis(ranking.order[:tau])
            Mr, Kr = cbm.project(h.M, h.K, H)
            xr = H @ np.linalg.solve(Kr - w ** 2 * Mr, H.T @ force)
            i = h.axial[1]
            if mac(x, xr) >= 0.999 and abs(x[i] - xr[i]) <= 0.01 * abs(x[i]):
                need = tau
                break
        row(name, need)


def updating_table() -> None:
    def mats(p):
        return manipulator(E=dict(zip(LINKS, p[1:])), mass_scale=p[0]).matrices(Q_STAR)[:2]

    nominal = np.array([1.0] + [E_ALUMINIUM] * 5)
    MN, KN = mats(nominal)
    A = up.parameter_parts(lambda p: mats(p)[0], nominal)[:1]
    B = up.parameter_parts(lambda p: mats(p)[1], nominal)[1:]
    truth = np.array([0.06, -0.12, 0.08, -0.15, 0.10, -0.05])
    f, U = modes(*up.corrected(MN, KN, A, B, truth))
    rng = np.random.default_rng(1)
    f_meas = f[3:10] * (1 + 0.005 * rng.standard_normal(7))
    U_meas = U[:, 3:10] + 0.01 * U[:, 3:10] @ rng.standard_normal((7, 7))
    chi = up.update(MN, KN, A, B, (2 * np.pi * f_meas) ** 2, U_meas, -0.2 * np.ones(6),
                    0.2 * np.ones(6))
    print("\n## Model updating, synthetic (0.5 % frequency noise, 1 % in-band shape mixing)")
    row("param", "true", "updated")
    for name, t, c in zip(["rho"] + [f"E_{k}" for k in LINKS], truth, chi):
        row(name, float(t), float(c))
    row("model", "mean ef %", "mean MAC")
    for name, (M, K) in (("nominal", (MN, KN)), ("updated", up.corrected(MN, KN, A, B, chi))):
        fm, Um = modes(M, K, 10)
        row(name, float(frequency_error(f_meas, fm[3:10]).mean()),
            float(np.mean([mac(U_meas[:, i], Um[:, 3 + i]) for i in range(7)])))
    print("thesis (measured modes): 7.46 -> 3.97 %, MAC 0.89 -> 0.91")


def reduction_table() -> tuple:
    mech = manipulator()
    red = reduce_erls(mech, MASTERS, Q_STAR, list(range(3, 9)), 4)
    worst_nco, worst_ef = 1.0, 0.0
    for d1 in np.linspace(-0.5, 0.5, 5):
        for d2 in np.linspace(-0.5, 0.5, 5):
            q = Q_STAR + [d1, d2, 0.0]
            M, K, _ = mech.matrices(q)
            f, U = modes(M, K, 9)
            H = red.basis(q, K)
            fr, Ur = modes(*cbm.project(M, K, H))
            shapes = H @ Ur
            j = pair_modes(U[:, 3:9], shapes, M)
            worst_nco = min(worst_nco, min(nco(U[:, 3 + k], shapes[:, j[k]], M) for k in range(6)))
            worst_ef = max(worst_ef, float(frequency_error(f[3:9], fr[j]).max()))
    print("\n## Configuration-dependent CB, 30 -> 13 dofs, modes 1-6 over q1, q2 = q* +- 0.5 rad")
    row("worst NCO", "worst ef %")
    row(worst_nco, worst_ef)
    return mech, red


def cpu_us(fn, runs: int = 200) -> float:
    fn()
    t0 = time.process_time()
    for _ in range(runs):
        fn()
    return (time.process_time() - t0) / runs * 1e6


def complexity_table(mech, red) -> None:
    n, mu, tau = 30, 9, 4
    full_ops, reduced_ops = 3 * n ** 3, 4 * (mu + tau) ** 3 + 2 * n * mu ** 2 - 3 * mu ** 3
    print("\n## Chapter 6 operation counts (eq. 6.9, n^3 cancelled on both sides)")
    row("full", "reduced", "thesis")
    row(full_ops, reduced_ops, "81,000 vs 11,461")
    print(f"with the n^3 kept (tables 6.1, 6.2): {4 * n ** 3} vs {n ** 3 + reduced_ops}")
    M, K, L = mech.matrices(Q_STAR)

    def full():
        return np.linalg.solve(M, np.hstack([K, L]))

    def reduced():
        Mr, Kr, Lr, _ = red.matrices(Q_STAR)
        return np.linalg.solve(Mr, np.hstack([Kr, Lr]))

    def reduced_given_full():
        H = red.basis(Q_STAR, K)
        Mr, Kr = cbm.project(M, K, H)
        return np.linalg.solve(Mr, np.hstack([Kr, H.T @ L]))

    print("\nCPU per prediction-matrix set (numpy, this machine), us")
    row("full solve", "reduced*", "assembly")
    row(cpu_us(full), cpu_us(reduced_given_full), cpu_us(lambda: mech.matrices(Q_STAR)))
    print("* reduced: Guyan solve, rotated modes, projections and the 13-dof solve, "
          "given the full matrices at q")
    from hapflow.blocks.flexible import D_SIZE, FlexibleLink, flex_rate
    model = expand(manipulator(alpha=1.0, beta=2e-6), [0, 2, 12], gauge_rows, red)
    w = np.concatenate([Q_STAR, np.zeros(2 * red.size - 3)])
    torque = np.array([1.0, 2.0, 0.1])
    p, d, dx = FlexibleLink().pack(), np.zeros(D_SIZE), np.zeros(2 * red.size)
    print("\nCPU per derivative of the 13-dof model (eq. 6.3), us")
    row("numpy", "block kernel")
    row(cpu_us(lambda: model.rate(w, torque)), cpu_us(lambda: flex_rate(p, w, torque, d, dx), 2000))


def spectra_table() -> None:
    # Rayleigh damping is not in the thesis: alpha = 1/s, beta = 2e-6 s (tests/test_flex_state_space)
    mech = manipulator(alpha=1.0, beta=2e-6)
    red = reduce_erls(mech, MASTERS, Q_STAR, list(range(3, 9)), 4)
    model = expand(mech, [0, 2, 12], gauge_rows, red)
    dt = 2e-4
    t = np.arange(int(round(3.0 / dt))) * dt
    torques = np.stack([1.4 * np.sin(2 * np.pi * 8 * t), 7 * np.sin(2 * np.pi * 10 * t),
                        0.1 * np.sin(2 * np.pi * 11 * t)], axis=1)
    t0 = time.process_time()
    w = model.simulate(np.concatenate([Q_STAR, np.zeros(2 * red.size - 3)]), torques, dt)
    cpu = time.process_time() - t0
    print("\n## Reduced model (13 dofs) under eq. 6.7's torques, 3 s: largest spectral peaks < 100 Hz")
    print(f"(modes of this reconstruction: 12.9, 45.3, 61.8 Hz; thesis 14.2, 43.5, 67.0; "
          f"CPU {cpu:.1f} s, q drift {np.round(w[-1, :3] - Q_STAR, 3)} rad)")
    row("dof", "peaks, Hz")
    freqs = np.fft.rfftfreq(len(w), dt)
    for k, name in enumerate(("x4", "y5", "x14", "y15", "x25", "x26"), start=3):
        spec = np.abs(np.fft.rfft((w[:, k] - w[:, k].mean()) * np.hanning(len(w))))
        peaks = [i for i in range(1, len(spec) - 1)
                 if spec[i] > spec[i - 1] and spec[i] >= spec[i + 1] and freqs[i] < 100]
        top = sorted(sorted(peaks, key=lambda i: -spec[i])[:6])
        row(name, " ".join(f"{freqs[i]:.1f}" for i in top))


def median_us(fn, steps: int = 200, runs: int = 5) -> float:
    """Median over ``runs`` of the CPU per call of ``fn`` over ``steps`` calls, us."""
    fn()
    times = []
    for _ in range(runs):
        t0 = time.process_time()
        for _ in range(steps):
            fn()
        times.append((time.process_time() - t0) / steps * 1e6)
    return float(np.median(times))


def ekf_operations(p: np.ndarray) -> dict[str, int]:
    """Multiply-adds of one EKF step, from the loop bounds of the kernels it runs and the
    sparsity of the packed model ``p`` (the Guyan factor counted as dense, its substitutions
    over the envelope of ``Kss``'s pattern)."""
    from hapflow.blocks.flexible import (NG, NIN, NM, NQ, NS, NU, PG, PK, PKG, PKSS, PM, PMKR,
                                         PP, PS, R)
    from hapflow.blocks.flexible_ekf import NTQ, NX, NY, W
    tm, tk, ts, tg, tp, tkss, tkg = (int(p[o]) for o in (PM, PK, PS, PG, PP, PKSS, PKG))
    mk = int(p[PMKR + NU])                       # entries of M and K's pattern
    h = NM + NS * (R - NQ)                       # entries of H that can be nonzero
    h_lower = NM * (NM + 1) // 2 + NS * sum(r + 1 for r in range(NQ, R))   # H' B, lower half
    entries = p[PKSS + 1:PKSS + 1 + tkss].astype(int)    # Kss's pattern: its envelope
    first = [min(e % NS for e in entries if e // NS == i) for i in range(NS)]
    envelope = sum(i - f for i, f in enumerate(first))
    guyan = NS * (NS * NS - 1) // 6 + 2 * (NS + envelope) * (NM - NQ)
    basis = tkss + tkg + tp + guyan
    matrices = basis + tk + tm + 2 * ts + mk * R + NQ * NU * R + h_lower + R * (R * R - 1) // 6
    return {"model matrices M K S H M~ at w": matrices,
            "state matrix M~^-1 [K~ C~ L~]": mk * R + NQ * NU * R + h * R + R * R * NX
                                             + R * (R - NQ) * (NQ + 1) + R * NTQ * NQ,
            "transition Phi (RK4 polynomial)": R * W + R * R * W + 2 * R * W * W,
            "Phi w + Gamma u": W * W + 3 * R * W + R * NTQ,
            "covariance Phi P Phi' + Q": W ** 3 + W * (W + 1) // 2 * (W + 3 * NTQ),
            "correction (gauges, gain, P)": basis + tg + NG * NIN * R + NG * (R - NQ) * (W + NY)
                                            + NY ** 3 // 6 + NY * NY * W + W * NY
                                            + W * (W + 1) // 2 * NY}


def ekf_table() -> None:
    from numba import njit

    import hapflow
    from hapflow.blocks.flexible import D_SIZE, flex_rate, packed_model
    from hapflow.blocks.flexible_ekf import (O_AB, O_PHI, O_P, O_TMP, O_VAR, FlexibleLinkEKF,
                                             correct, ekf_step, predict, propagate, state_matrix,
                                             transition)
    block = FlexibleLinkEKF()
    block.sample_time = 1e-4
    p, d = block.pack(), block.initial_state()[1]
    D, model = block.D, packed_model(block.alpha, block.beta)
    d[D.torque:D.torque + 3] = [1.0, 2.0, 0.1]
    d[D.y:D.y + 3] = d[D.w:D.w + 3]
    w, dx = d[D.w:D.w + 26].copy(), np.zeros(26)
    scratch = np.zeros(D_SIZE)

    @njit
    def steps(p, d, n):
        for _ in range(n):
            ekf_step(p, d)

    @njit
    def derivatives(model, w, tq, scratch, dx, n):
        for _ in range(n):
            flex_rate(model, w, tq, scratch, dx)

    @njit
    def parts(p, model, d, n, which):
        for _ in range(n):
            if which == 0:
                correct(p, model, d)
            elif which == 1:
                predict(p, model, d)
            elif which == 2:
                state_matrix(model, d)
            else:
                transition(d, O_AB, O_PHI, O_TMP, 1e-4)
                propagate(d, O_AB, O_PHI, O_P, O_TMP, 1e-4, d[O_VAR:O_VAR + 3])

    tq = np.array([1.0, 2.0, 0.1])
    n = 50
    step = median_us(lambda: steps(p, d, n), 1) / n
    rate = median_us(lambda: derivatives(model, w, tq, scratch, dx, n), 1) / n
    part = [median_us(lambda k=k: parts(p, model, d, n, k), 1) / n for k in range(4)]
    print("\n## EKF on the 13-dof model (26 states), CPU per step on this machine, us")
    row("EKF step", "derivative", "ratio", "goal")
    row(step, rate, step / rate, "<= 20")
    row("correction", "prediction", "of which A", "Phi and P")
    row(*part)
    ops = ekf_operations(model)
    print("\nMultiply-adds per EKF step (loop bounds of the kernels)")
    for name, count in ops.items():
        print(f"{name:>34} {count:>9,}")
    print(f"{'total':>34} {sum(ops.values()):>9,}")
    prediction = ops["model matrices M K S H M~ at w"] + ops["state matrix M~^-1 [K~ C~ L~]"]
    print(f"prediction matrices (model matrices and state matrix): {prediction:,} multiply-adds; "
          f"thesis eq. 6.9: 81,000 full vs 11,461 reduced (n^3 cancelled), table 6.1 with n^3: "
          f"108,000 vs 38,461")

    graph = hapflow.load(Path(__file__).resolve().parents[1] / "graphs" / "flexible_link_ekf.yaml")
    run = hapflow.Simulation(graph).run(progress=False)
    truth, est = run["arm.elastic"], run["observer.elastic"]
    q_err = np.abs(run["arm.q"] - run["observer.q_hat"]).max(axis=0)
    print("\n## graphs/flexible_link_ekf.yaml, 3 s (torque-meter noise, 24-bit ADC)")
    print(f"max |q error| {np.array2string(q_err, precision=2)} rad")
    row("dof", "max err/range %", "peaks est (truth), Hz: relative amplitude error %")
    dt = run.time[1] - run.time[0]
    freqs = np.fft.rfftfreq(len(est), dt)
    for k, name in enumerate(("x4", "y5", "x14", "y15", "x25", "x26")):
        spec = [np.abs(np.fft.rfft((s[:, k] - s[:, k].mean()) * np.hanning(len(s))))
                for s in (est, truth)]
        se = spec[0]
        peaks = [i for i in range(1, len(se) - 1) if se[i] > se[i - 1] and se[i] >= se[i + 1]
                 and freqs[i] < 100 and se[i] > 0.01 * se[freqs < 100].max()]
        err = 100 * np.abs(est[:, k] - truth[:, k]).max() / np.ptp(truth[:, k])
        row(name, err, " ".join(f"{freqs[i]:.1f}:{100 * (se[i] / spec[1][i] - 1):+.1f}"
                                for i in peaks))


def main() -> None:
    import sys
    if sys.argv[1:] == ["--ekf"]:
        ekf_table()
        return
    manipulator_table()
    horn_tables()
    updating_table()
    spectra_table()
    complexity_table(*reduction_table())
    ekf_table()


if __name__ == "__main__":
    main()
