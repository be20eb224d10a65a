"""Command-line options of data preparation, shared by ``identify``, ``verify`` and ``camera``."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..argtypes import integer, number
from .errors import IdentError
from .prep import VELOCITY_METHODS

MAX_SEGMENTS = 1000
"""Most segments per direction ``--segments`` asks for (the data may allow fewer)."""


def _pairs(text: str | None, option: str, example: str) -> dict[str, str] | None:
    if not text:
        return None
    out = {}
    what = "quantity=unit" if option == "--units" else "quantity=column"
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise IdentError(f"{option} {text!r}: write {what} pairs, e.g. {option} {example}")
        out[key.strip().lower()] = value.strip()
    return out


SIGNAL_DEFAULTS = {"pos": "enc.pos", "force": "head.force", "acc": "none"}
"""The recording-signal options and the values that name nothing beyond the defaults."""


def prep_kwargs(args: argparse.Namespace, data: Path | None = None) -> dict:
    """The data-preparation settings the command-line options of :func:`add_prep_options`
    give, as keyword arguments of :func:`hapflow.ident.prep.load_motion`.

    Raises
    ------
    IdentError
        When ``data`` is a CSV file and ``--pos``, ``--force`` or ``--acc`` name a signal:
        those name a recording's signals (a CSV file's columns are named by ``--columns``).
    """
    if data is not None and data.suffix.lower() == ".csv":
        given = [f"--{k} {getattr(args, k)}" for k, default in SIGNAL_DEFAULTS.items()
                 if getattr(args, k) not in (None, default)]
        if given:
            raise IdentError(f"{' '.join(given)}: --pos, --force and --acc name signals of a "
                             f"recording; {data} is a CSV file, whose columns are named with "
                             "--columns, e.g. --columns position=y,force=u,acceleration=a")
    acc = args.acc
    if acc is not None and acc.lower() == "none":
        acc = None
    elif acc is None:
        acc = "auto"
    kw = dict(pos=args.pos, force=args.force, acc=acc, velocity=args.velocity,
              units=_pairs(args.units, "--units", "position=mm,force=gf"),
              columns=_pairs(args.columns, "--columns", "time=t,position=y,force=u"),
              rate=args.rate)
    for key in ("order", "cutoff", "crossover", "highpass", "deadband", "trim"):
        value = getattr(args, key)
        if value is not None:
            kw[key] = value
    return kw


def add_method_options(p: argparse.ArgumentParser, methods: tuple[str, ...], about: str) -> None:
    """``--method`` (one of ``methods``, described by ``about``) and the settings of the
    segmented and EWLS methods, shared by ``identify`` and ``camera``."""
    p.add_argument("--method", choices=methods, default="segmented", help=about)
    p.add_argument("--segments", type=integer(1, MAX_SEGMENTS), default=8,
                   help="number of segments [8]")
    p.add_argument("--forgetting", type=number(0.0, 1.0), default=0.999,
                   help="EWLS forgetting factor [0.999]")
    p.add_argument("--grid", type=number(0.0, 1.0, "m"), default=1e-3, metavar="M",
                   help="EWLS grid spacing [0.001 m]")


def add_prep_options(p: argparse.ArgumentParser, defaults: bool) -> None:
    """The data-preparation options of ``identify``, ``verify`` and ``camera`` (with the
    defaults of a first fit when ``defaults``; else the model's stored settings apply)."""
    g = p.add_argument_group("data preparation" + ("" if defaults else
                                                  " (default: as stored in the model)"))
    g.add_argument("--pos", default="enc.pos" if defaults else None,
                   help="position signal (m)" + (" [enc.pos]" if defaults else ""))
    g.add_argument("--force", default="head.force" if defaults else None,
                   help="force signal (N)" + (" [head.force]" if defaults else ""))
    g.add_argument("--acc", default=None,
                   help="accelerometer signal (m/s^2), or 'none'"
                        + (" [head.accel if recorded]" if defaults else ""))
    g.add_argument("--velocity", choices=VELOCITY_METHODS,
                   help="velocity/acceleration estimator [fusion with an accelerometer, "
                        "else spectral with its corner from the data's band; savgol: "
                        "Savitzky-Golay, its window from the same corner; rts: "
                        "Rauch-Tung-Striebel smoother of a white-jerk model, its corner "
                        "from the same band]")
    g.add_argument("--order", type=integer(1, 10), help="Butterworth order [2]")
    g.add_argument("--cutoff", type=number(0.0, 1e6, "Hz"), metavar="HZ",
                   help="low-pass cutoff [spectral: 1.25 x the data's band; encoder 40 Hz; "
                        "200 Hz with an accelerometer]")
    g.add_argument("--crossover", type=number(0.0, 1e6, "Hz"), metavar="HZ",
                   help="fusion crossover [5 Hz]")
    g.add_argument("--highpass", type=number(0.0, 1e6, "Hz"), metavar="HZ",
                   help="accelerometer high-pass of --velocity accel [0.5 Hz]")
    g.add_argument("--deadband", type=number(0.0, 10.0, "m/s", low_open=False), metavar="M/S",
                   help="velocity dead band of the direction grouping [0.005 m/s]")
    g.add_argument("--trim", type=number(0.0, 1e6, "s", low_open=False), metavar="S",
                   help="seconds left out at each end (filter edge transients) [3/corner]")
    g.add_argument("--units", metavar="Q=U,...",
                   help="CSV column units, e.g. position=mm,force=gf; scaled or in volts: "
                        "'position=V*0.001 m/V'")
    g.add_argument("--columns", metavar="Q=NAME,...",
                   help="CSV columns by quantity, e.g. time=t,position=y,force=u")
    g.add_argument("--rate", type=number(0.0, 1e7, "Hz"), metavar="HZ",
                   help="sample rate of a CSV file without a time column (else such a file "
                        "is read as a quasi-static curve)")
