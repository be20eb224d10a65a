"""The ``hapflow camera`` subcommand: the haptic-camera loop on the simulated rig.

::

    hapflow camera PROBE.yaml --validate VALIDATION.yaml [--method segmented|auto|ewls]
                   [--segments N] [--forgetting L] [--grid M] [--duration S]
                   [--validation-duration S] [--out DIR]

1. **probe** - run the probe graph, recording to ``DIR/probe.h5``;
2. **identify** - fit the model (:func:`hapflow.ident.pipeline.identify`), save
   ``DIR/model.yaml``, plot ``DIR/parameters.png`` (truth dashed when the
   device knows it) and ``DIR/fit_force.png``;
3. **render and verify** - run the validation graph to ``DIR/validation.h5``,
   replay its recorded motion through the model (prepared as the
   identification data was) and compare with the measured force: NRMSE and
   worst position range, plot ``DIR/verify_force.png``;
4. **report** - ``DIR/summary.md`` with the graphs, the runs (ticks, real-time
   factor), the model table, the errors against the truth, the fit and
   validation NRMSE and links to the plots.

Every step reuses the library functions of ``hapflow run``, ``hapflow
identify`` and ``hapflow verify``.
"""
from __future__ import annotations

import argparse
import dataclasses
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hapflow.blocks.impedance_model import DIRECTION_NAMES, ImpedanceModel
from .report import identified, model_table, truth_errors
from .truth import Truth
from .verify import Verification

_UNITS = {"m": "kg", "b": "N s/m", "k": "N/m", "F0": "N"}


@dataclass
class CameraResult:
    """What :func:`camera` produced.

    Attributes
    ----------
    out : Path
        Output folder.
    probe_run, validation_run : RunResult
        The two simulations (ticks, wall time, real-time factor).
    model : ImpedanceModel
        The identified model (``model.fit`` holds the fit NRMSE).
    truth : Truth or None
        The true impedance of the probed device, when known.
    verification : Verification
        Force NRMSE and worst position range on the validation run.
    files : dict of str -> Path
        ``probe``, ``validation``, ``model``, ``parameters``, ``fit_force``,
        ``verify_force``, ``summary``.
    """

    out: Path
    probe_graph: Path
    validation_graph: Path
    method: str
    probe_run: Any
    validation_run: Any
    model: ImpedanceModel
    truth: Truth | None
    verification: Verification
    files: dict[str, Path] = field(default_factory=dict)
    command: str = ""

    @property
    def fit_nrmse(self) -> float:
        """Force NRMSE on the identification (probe) data, %."""
        return float(self.model.fit["nrmse_percent"])

    @property
    def validation_nrmse(self) -> float:
        """Force NRMSE on the validation run, %."""
        return float(self.verification.nrmse_percent)

    @property
    def worst_range(self) -> tuple[float, float, float, int]:
        """Worst position bin of the validation run: (lo m, hi m, RMS error N, samples)."""
        return self.verification.worst

    def truth_errors(self) -> dict[int, dict[str, dict[str, float]]] | None:
        """Per direction and parameter, the errors against the truth (see
        :func:`hapflow.ident.report.truth_errors`), or None without a truth."""
        return None if self.truth is None else truth_errors(self.model, self.truth)

    def summary(self) -> str:
        """A few lines for the terminal."""
        lo, hi, rms, count = self.worst_range
        lines = [f"probe      {self.probe_graph}: {self.probe_run.summary()}",
                 f"validation {self.validation_graph}: {self.validation_run.summary()}",
                 f"model ({self.method}) -> {self.files['model']}",
                 f"fit: force NRMSE {self.fit_nrmse:.3f} %",
                 f"validation: force NRMSE {self.validation_nrmse:.3f} %, worst range "
                 f"{lo * 1e3:.4g} .. {hi * 1e3:.4g} mm (RMS error {rms:.4g} N)"]
        errs = self.truth_errors()
        if errs is not None:
            parts = []
            for p in identified(self.model):
                worst = max(100 * errs[d][p]["rms"] / errs[d][p]["scale"]
                            for d in (1, -1) if errs[d][p]["scale"] > 0) \
                    if any(errs[d][p]["scale"] > 0 for d in (1, -1)) else None
                if worst is not None:
                    parts.append(f"{p} {worst:.3g} %")
            if parts:
                lines.append("vs truth (RMS error / RMS of truth, worse direction): "
                             + ", ".join(parts))
        lines.append(f"report -> {self.files['summary']}")
        return "\n".join(lines)


def _run(graph_path: Path, duration: float | None, out: Path):
    from .. import load
    from ..simulation import Simulation
    return Simulation(load(graph_path)).run(duration, out=out, progress=False)


def camera(probe: str | Path, validate: str | Path, method: str = "segmented",
           segments: int = 8, duration: float | None = None,
           validation_duration: float | None = None, out: str | Path = "out/camera",
           forgetting: float = 0.999, grid: float = 1e-3, bin_width: float | None = None,
           prep: dict[str, Any] | None = None, command: str = "",
           on_step: Callable[[str], None] | None = None) -> CameraResult:
    """Probe, identify, render and verify on the simulated rig; write the report.

    Parameters
    ----------
    probe, validate : path
        Graph files of the probe run and the validation run.
    method : {'segmented', 'auto', 'ewls'}
        Identification method.
    segments : int
        Number of segments (``segmented``).
    duration, validation_duration : float, optional
        Simulated seconds of each run (default: each graph's).
    out : path
        Output folder.
    forgetting, grid : float
        EWLS settings.
    bin_width : float, optional
        Position bin of the worst range, m (see :func:`hapflow.ident.verify.compare`).
    prep : dict, optional
        Data preparation settings for :func:`hapflow.ident.prep.load_motion`
        (default: ``enc.pos``, ``head.force``, ``head.accel`` if recorded).
    command : str
        The command line, for the report.
    on_step : callable, optional
        Called with a line as each step starts (the first run of a graph compiles its
        kernel, seconds of silence otherwise).

    Returns
    -------
    CameraResult
    """
    from ..recorder import load as load_recording
    from .pipeline import identify
    from .prep import load_motion
    from .report import plot_force, plot_parameters
    from .truth import find_truth
    from .verify import compare, predict_motion, prep_settings

    probe, validate, out = Path(probe), Path(validate), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {"probe": out / "probe.h5", "validation": out / "validation.h5",
             "model": out / "model.yaml", "parameters": out / "parameters.png",
             "fit_force": out / "fit_force.png", "verify_force": out / "verify_force.png",
             "summary": out / "summary.md"}

    step = on_step or (lambda line: None)
    # (a) probe
    step(f"probe: running {probe} -> {files['probe']}")
    probe_run = _run(probe, duration, files["probe"])

    # (b) identify
    step(f"identify: {method} on the probe run -> {files['model']}")
    motion = load_motion(files["probe"], **(prep or {}))
    model = identify(motion, method, segments=segments, forgetting=forgetting, grid=grid)
    model.save(files["model"])
    truth = find_truth(load_recording(files["probe"]))
    plot_parameters(model, files["parameters"], truth,
                    title=f"{probe.name}: {method}"
                          + (" (error bars 2 sigma)" if method != "ewls" else ""))
    plot_force(model, motion, predict_motion(model, motion), files["fit_force"],
               f"fit on the probe run ({probe.name})")

    # (c) render the validation motion and verify
    step(f"validation: running {validate} -> {files['validation']}")
    validation_run = _run(validate, validation_duration, files["validation"])
    step(f"verify: the model's force along the validation motion -> {files['verify_force']}")
    vmotion = load_motion(files["validation"], **prep_settings(model))
    predicted = predict_motion(model, vmotion)
    ok = vmotion.valid
    verification = compare(vmotion.force[ok], predicted[ok], vmotion.x[ok], bin_width)
    shown = dataclasses.replace(model, fit={"nrmse_percent": verification.nrmse_percent})
    plot_force(shown, vmotion, predicted, files["verify_force"],
               f"validation run ({validate.name})")

    result = CameraResult(out, probe, validate, method, probe_run, validation_run, model, truth,
                          verification, files, command)
    files["summary"].write_text(summary_markdown(result))
    return result


def _errors_markdown(result: CameraResult) -> list[str]:
    errs = result.truth_errors()
    if errs is None:
        return ["The probed device does not state its true impedance; no errors against the "
                "truth.", ""]
    lines = [f"Against the truth ({result.truth.name}), over the identified position range "
             "(2 % margin at each end):", "",
             "| direction | parameter | RMS error | RMS error / RMS of truth | median abs. error "
             "| max abs. error | RMS of truth |",
             "|---|---|---|---|---|---|---|"]
    for d in (1, -1):
        for p in identified(result.model):
            e = errs[d][p]
            rel = f"{100 * e['rms'] / e['scale']:.3g} %" if e["scale"] > 0 else "-"
            u = _UNITS[p]
            lines.append(f"| {DIRECTION_NAMES[d]} | {p} | {e['rms']:.4g} {u} | {rel} | "
                         f"{e['median']:.4g} {u} | {e['max']:.4g} {u} | {e['scale']:.4g} {u} |")
    lines.append("")
    return lines


def summary_markdown(result: CameraResult) -> str:
    """The markdown report of a camera run."""
    r = result
    fit = r.model.fit
    v = r.verification
    lo, hi, rms, count = v.worst
    rel = lambda p: p.name  # noqa: E731 - files sit beside summary.md
    lines = [f"# Haptic camera: {r.probe_graph.name} -> {r.validation_graph.name}", ""]
    if r.command:
        lines += ["```", r.command, "```", ""]
    lines += ["## Runs", "",
              "| step | graph | recording | ticks | simulated | wall | real-time factor |",
              "|---|---|---|---|---|---|---|"]
    for step, graph, run in (("probe", r.probe_graph, r.probe_run),
                             ("validation", r.validation_graph, r.validation_run)):
        lines.append(f"| {step} | `{graph}` | [{rel(run.path)}]({rel(run.path)}) | {run.ticks} | "
                     f"{run.ticks / run.rate:g} s | {run.wall:.3f} s | "
                     f"{run.realtime_factor:,.0f}x |")
    lines += ["", "(wall: the simulation loop and recording; compiling the graph is not included)", "",
              f"## Model ({r.method})", "",
              f"Model file: [{rel(r.files['model'])}]({rel(r.files['model'])})", "",
              "```", model_table(r.model), "```", "",
              "## Parameters against the truth", ""]
    lines += _errors_markdown(r)
    lines += ["## Force prediction", "",
              "| data | force NRMSE | RMS error | force range | samples |",
              "|---|---|---|---|---|",
              f"| identification (probe) | {fit['nrmse_percent']:.3f} % | {fit['rms_error']:.4g} N "
              f"| {fit['force_range']:.4g} N | {fit['samples']} |",
              f"| validation | {v.nrmse_percent:.3f} % | {v.rms_error:.4g} N | "
              f"{v.force_range:.4g} N | {v.n} |", "",
              f"Worst position range of the validation run: {lo * 1e3:.4g} .. {hi * 1e3:.4g} mm, "
              f"RMS error {rms:.4g} N ({count} samples; {v.bin_width * 1e3:.3g} mm bins).", "",
              "## Plots", "",
              f"- identified parameters (truth dashed): "
              f"[{rel(r.files['parameters'])}]({rel(r.files['parameters'])})",
              f"- fit, measured vs model force on the probe run: "
              f"[{rel(r.files['fit_force'])}]({rel(r.files['fit_force'])})",
              f"- validation, measured vs model force: "
              f"[{rel(r.files['verify_force'])}]({rel(r.files['verify_force'])})", "",
              f"![parameters]({rel(r.files['parameters'])})", "",
              f"![validation]({rel(r.files['verify_force'])})", ""]
    return "\n".join(lines)


def cmd_camera(args: argparse.Namespace) -> int:
    """Run ``hapflow camera``."""
    from .options import prep_kwargs
    words = ["hapflow", "camera", args.probe, "--validate", args.validate,
             "--method", args.method]
    if args.method == "segmented":
        words += ["--segments", str(args.segments)]
    if args.method == "ewls":
        words += ["--forgetting", f"{args.forgetting:g}", "--grid", f"{args.grid:g}"]
    for flag, value in (("--duration", args.duration),
                        ("--validation-duration", args.validation_duration)):
        if value is not None:
            words += [flag, f"{value:g}"]
    words += ["--out", args.out]
    command = " ".join(shlex.quote(w) for w in words)
    result = camera(args.probe, args.validate, args.method, segments=args.segments,
                    duration=args.duration, validation_duration=args.validation_duration,
                    out=args.out, forgetting=args.forgetting, grid=args.grid,
                    bin_width=args.bin, prep=prep_kwargs(args), command=command,
                    on_step=lambda line: print(line, flush=True))
    print(result.summary())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``camera`` subcommand to the ``hapflow`` parser."""
    from ..argtypes import number
    from .options import add_method_options, add_prep_options
    c = sub.add_parser("camera", help="probe, identify, render and verify on the simulated rig",
                       description="The haptic-camera loop: run the probe graph, identify the "
                                   "impedance model, run the validation graph, replay its "
                                   "motion through the model and compare forces; write the "
                                   "recordings, model, plots and summary.md to --out.")
    c.add_argument("probe", metavar="PROBE.yaml", help="probe graph")
    c.add_argument("--validate", required=True, metavar="VALIDATION.yaml",
                   help="validation graph")
    add_method_options(c, ("segmented", "auto", "ewls"), "identification method [segmented]")
    c.add_argument("--duration", type=number(0.0, 1e7, "s"), metavar="S",
                   help="simulated seconds of the probe run [the graph's]")
    c.add_argument("--validation-duration", type=number(0.0, 1e7, "s"), metavar="S",
                   help="simulated seconds of the validation run [the graph's]")
    c.add_argument("--bin", type=number(0.0, 10.0, "m"), metavar="M",
                   help="position bin for the worst range [as hapflow verify]")
    add_prep_options(c, defaults=True)
    c.add_argument("--out", default="out/camera", metavar="DIR", help="output folder [out/camera]")
    c.set_defaults(func=cmd_camera)
