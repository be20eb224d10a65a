"""The ``hapflow identify`` and ``hapflow verify`` subcommands.

::

    hapflow identify RUN.h5|DATA.csv [--method segmented|auto|ewls|poly|bic] [--segments N]
                     [--forgetting 0.999] [--grid M] [--two-sided] [--regressors avx1]
                     [--stiffness 1,3 --damping 0] [--strict]
                     [--pos enc.pos --force head.force --acc head.accel|none]
                     [--velocity fusion|spectral|savgol|rts|encoder|accel|difference] [--cutoff HZ] ...
                     [--out model.yaml] [--plots DIR]
    hapflow verify MODEL.yaml --against RUN.h5|DATA.csv [--bin M] [--max-nrmse PCT]
                   [--simulate] [--plots DIR]

``identify`` writes the model file and prints which velocity/acceleration
estimate it used and why, the parameter table, the fit NRMSE, warnings for
non-physical or unsupported estimates (:mod:`hapflow.ident.checks`; exit 1
with ``--strict``), with ``--method bic`` every candidate's BIC
(:mod:`hapflow.ident.select`) and, for a recording of a simulated device, the errors
against the true impedance; ``--plots`` adds ``parameters.png`` (true curves
dashed) and ``force.png`` (measured vs predicted).  ``verify`` prepares the
data as the model's identification data was prepared and prints the force
NRMSE and the worst position range; ``--max-nrmse`` makes it exit 1 above a
limit; ``--simulate`` also runs the model free from the measured force
(admittance) and prints the RMS position error (plot ``verify_simulate.png``).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..argtypes import number, recording
from .errors import IdentError
from .options import add_method_options, add_prep_options, prep_kwargs


def cmd_identify(args: argparse.Namespace) -> int:
    """Run ``hapflow identify``."""
    from .pipeline import identify
    from .verify import predict_motion
    from .prep import load_motion
    from .report import model_table, plot_force, plot_parameters, truth_table
    data = Path(args.data)
    motion = load_motion(data, **prep_kwargs(args, data))
    for line in motion.source.get("warnings", []):
        print(f"warning: {line}")
    try:
        if args.method == "bic":
            from .select import select, selection_table
            model, scored, failed = select(motion, damping=args.damping,
                                           regressors=args.regressors,
                                           resolution=args.resolution, penalty=args.penalty,
                                           v_blend=args.v_blend)
            chosen = f"bic: {model.method}" + (
                f" {','.join(map(str, model.settings['stiffness']))}"
                if model.method == "poly" else "")
        else:
            model = identify(motion, args.method, segments=args.segments,
                             regressors=args.regressors, forgetting=args.forgetting, p0=args.p0,
                             grid=args.grid, two_sided=args.two_sided,
                             resolution=args.resolution, penalty=args.penalty,
                             v_blend=args.v_blend, window=args.window,
                             stiffness=args.stiffness, damping=args.damping)
            chosen = args.method
    except IdentError as exc:       # the data cannot carry the fit: name the rows fitted
        raise IdentError(f"{motion.where}: {exc}") from None
    out = Path(args.out) if args.out else Path("out") / f"{data.stem}_model.yaml"
    model.save(out)
    truth = None
    if data.suffix.lower() != ".csv":
        from ..recorder import load
        from .truth import find_truth
        truth = find_truth(load(data))
    n_pos = int((motion.direction > 0).sum())
    n_neg = int((motion.direction < 0).sum())
    how = ("quasi-static (row order gives the direction)" if motion.quasi_static else
           f"{motion.rate:g} Hz")
    print(f"{data}: {len(motion)} samples, {how}; fitted {n_pos} positive and {n_neg} "
          f"negative samples by {chosen}")
    if not motion.quasi_static:
        print(f"velocity and acceleration: {motion.settings['reason']}")
    if args.method == "bic":
        print("candidates (" + ("force residual" if motion.quasi_static else
                                "free run from the measured force") + "):")
        print(selection_table(scored))
        for reason in failed:
            print(f"  left out: {reason}")
    print(model_table(model))
    fit = model.fit
    print(f"fit: force NRMSE {fit['nrmse_percent']:.3f} % (RMS error {fit['rms_error']:.4g} N, "
          f"force range {fit['force_range']:.4g} N)")
    if truth is not None:
        print(truth_table(model, truth))
    print(f"model -> {out}")
    from .checks import ADVICE, warnings_for
    warned = warnings_for(model)
    for line in warned:
        print(f"warning: {line}")
    if warned:
        print(f"hint: {ADVICE}")
    if args.plots:
        folder = Path(args.plots)
        p1 = plot_parameters(model, folder / "parameters.png", truth,
                             title=f"{data.name}: {chosen}"
                                   + (" (error bars 2 sigma)" if args.method != "ewls" else ""))
        p2 = plot_force(model, motion, predict_motion(model, motion), folder / "force.png",
                        f"fit: {data.name}")
        print(f"plots -> {p1}, {p2}")
    if warned and args.strict:
        print(f"FAIL: {len(warned)} warning(s) and --strict")
        return 1
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Run ``hapflow verify``."""
    from hapflow.blocks.impedance_model import ImpedanceModel, nonpositive_mass
    from .prep import load_motion
    from .report import plot_force
    from .verify import compare, predict_motion, prep_settings
    model = ImpedanceModel.load(args.model)
    mass = nonpositive_mass(model)
    if mass:
        print(f"warning: {mass}")
    kw = prep_settings(model)
    data = Path(args.against)
    csv = data.suffix.lower() == ".csv"
    for key in ("pos", "force", "acc") if csv else ("units", "columns", "rate"):
        kw.pop(key, None)           # the model's data was of the other kind: its names do not apply
    given = prep_kwargs(args, data)
    if args.acc is None:
        given.pop("acc")
    kw.update({k: v for k, v in given.items() if v is not None})
    motion = load_motion(data, **kw)
    predicted = predict_motion(model, motion)
    ok = motion.valid
    result = compare(motion.force[ok], predicted[ok], motion.x[ok], args.bin)
    print(f"{args.model} against {data}:")
    print(result.summary())
    run = None
    if args.simulate:
        from .verify import free_run
        run = free_run(model, motion)
        print(run.summary())
    if args.plots:
        model.fit = {"nrmse_percent": result.nrmse_percent}
        path = plot_force(model, motion, predicted, Path(args.plots) / "verify_force.png",
                          f"verify {Path(args.model).name} against {data.name}")
        print(f"plot -> {path}")
        if run is not None:
            from .report import plot_free_run
            print(f"plot -> {plot_free_run(run, Path(args.plots) / 'verify_simulate.png')}")
    if args.max_nrmse is not None and result.nrmse_percent > args.max_nrmse:
        print(f"FAIL: NRMSE {result.nrmse_percent:.3f} % exceeds --max-nrmse {args.max_nrmse:g} %")
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``identify`` and ``verify`` subcommands to the ``hapflow`` parser."""
    p = sub.add_parser("identify", help="identify an impedance model from a recording or CSV",
                       description="Fit F = m(x) a + b(x) v + k(x) x + F0(x) per direction "
                                   "to a recording (or CSV file); write the model YAML, print "
                                   "the parameters, the fit NRMSE and (for a simulated device) "
                                   "the errors against the truth.")
    p.add_argument("data", metavar="RUN", type=recording,
                   help="HDF5 recording (.h5) or CSV file (.csv)")
    add_method_options(p, ("segmented", "auto", "ewls", "poly", "bic"),
                       "fixed segments (seed 000), automatic BIC segments, EWLS on a grid "
                       "(seed 002), one global polynomial model, or the least-BIC of auto "
                       "and polynomials of orders 1, 3, 1-3, 1-3-5 [segmented]")
    p.add_argument("--regressors", help="subset of avx1 [avx1; x1 for quasi-static data]")
    p.add_argument("--window", type=number(0.0, 100.0, "m"), metavar="M",
                   help="EWLS window in metres (sets the forgetting factor from the data density)")
    p.add_argument("--p0", type=number(0.0, 1e30), default=1e6,
                   help="EWLS initial covariance [1e6]")
    p.add_argument("--two-sided", action="store_true",
                   help="EWLS: combine ascending and descending passes (no lag)")
    p.add_argument("--resolution", type=number(0.0, 1.0, "m"), metavar="M",
                   help="auto: candidate boundary spacing [range/200]")
    p.add_argument("--penalty", type=number(0.0, 1e6), default=1.0,
                   help="auto: BIC penalty multiplier [1]")
    p.add_argument("--stiffness", default="1,3", metavar="POWERS",
                   help="poly: powers of x in the spring force [1,3: k1 x + k3 x^3]")
    p.add_argument("--damping", default="0", metavar="POWERS",
                   help="poly: powers of x in the damping, b(x) v [0: constant]")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when the model has non-physical or unsupported estimates")
    p.add_argument("--v-blend", type=number(0.0, 10.0, "m/s"), default=1e-3, metavar="M/S",
                   help="direction blend velocity stored in the model [0.001 m/s]")
    add_prep_options(p, defaults=True)
    p.add_argument("--out", help="model file [out/<RUN stem>_model.yaml]")
    p.add_argument("--plots", metavar="DIR", help="write parameters.png and force.png here")
    p.set_defaults(func=cmd_identify)

    v = sub.add_parser("verify", help="replay a recording through a model; force NRMSE",
                       description="Replay the recorded motion through the model (prepared as "
                                   "its identification data was) and report the force NRMSE "
                                   "(RMS error / force range) and the worst position range.")
    v.add_argument("model", help="model YAML file from 'hapflow identify'")
    v.add_argument("--against", required=True, metavar="RUN", type=recording,
                   help="HDF5 recording or CSV file to replay")
    v.add_argument("--bin", type=number(0.0, 10.0, "m"), metavar="M",
                   help="position bin for the worst range [0.005 m; for strokes under 20 mm the "
                        "largest 1-2-5 step <= stroke/4]")
    v.add_argument("--max-nrmse", type=number(0.0, 1e6, "%"), metavar="PCT",
                   help="exit 1 if the NRMSE exceeds this (in %%)")
    v.add_argument("--simulate", action="store_true",
                   help="also run the model free from the measured force (admittance) and "
                        "report the RMS position error")
    v.add_argument("--plots", metavar="DIR",
                   help="write verify_force.png (and verify_simulate.png) here")
    add_prep_options(v, defaults=False)
    v.set_defaults(func=cmd_verify)

    from .camera import register as register_camera
    register_camera(sub)  # camera: probe, identify, render and verify
