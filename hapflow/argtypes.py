"""Types of command-line options: each rejects a bad value with the range that is valid.

argparse calls them on the option's text; an ``ArgumentTypeError`` becomes
the one-line usage error (exit status 2) that names the option, so every
check here runs before anything is loaded or started.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Callable


def number(low: float, high: float, unit: str = "", low_open: bool = True) -> Callable[[str], float]:
    """A finite float in ``(low, high]`` (``[low, high]`` with ``low_open=False``)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        inside = (low < value if low_open else low <= value) and value <= high
        if not inside:
            bracket = "(" if low_open else "["
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a number in {bracket}{low:g}, {high:g}]{' ' + unit if unit else ''}")
        return value
    return parse


def integer(low: int, high: int) -> Callable[[str], int]:
    """An integer in ``[low, high]``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer from {low} to {high}")
        return value
    return parse


def new_file(text: str) -> str:
    """The path of a file to write: not a folder, and no file where a folder must be.

    A missing folder is fine: the writer creates it.
    """
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file name in it")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} needs {str(folder)!r} to be a folder, "
                                         "and it is a file")
    return text


IMAGE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")
"""File types a figure is saved as (matplotlib picks the format from the suffix)."""


def image_file(text: str) -> str:
    """The path of a figure to write: a :func:`new_file` with an image suffix."""
    if Path(text).suffix.lower() not in IMAGE_SUFFIXES:
        raise argparse.ArgumentTypeError(f"{text!r}: a figure is saved as "
                                         f"{', '.join(IMAGE_SUFFIXES)}; end the name with one")
    return new_file(text)


def recording(text: str) -> str:
    """The path of a data file a command reads (an HDF5 recording, or CSV): an HDF5 one is
    read once in a child process first (:func:`hapflow.h5check.check_readable`), so a file
    that crashes the HDF5 library is a :class:`~hapflow.h5check.DamagedFileError` naming it,
    not a dead process.  A missing file is left to the command, which names it."""
    from .h5check import check_readable
    if Path(text).is_file():
        check_readable(text)
    return text
