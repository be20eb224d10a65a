"""Measured data files read as named columns: CSV, NumPy ``.npy``, HDF5 datasets, NI TDMS.

One reader for every consumer (identification, the ``Playback`` block), so a
file a user has is read the same way everywhere and every problem is one
:class:`DataFileError` naming the file, the line or row, and what would be
valid:

- CSV (:func:`read_csv`): one header row, then numbers.  A UTF-8 byte-order
  mark is accepted, and so is a delimiter ending every line; a byte that is
  not UTF-8, a field longer than :data:`MAX_FIELD` characters, a row with too
  few fields, a value that is not a number or not finite, are errors naming
  the line.  Header cells may
  carry a unit, ``name [unit]`` or ``name (unit)``; an unclosed bracket is an
  error, not a name.
- ``.npy`` (:func:`read_signal`, which reads one column of any of these): a 1-D array (one column ``0``) or a 2-D
  array (columns ``0``, ``1``, ...).
- HDF5: a hapflow recording (signals by name, plus ``time``) or any dataset,
  named ``path/to/dataset`` (``h5py``).  A damaged file can crash the HDF5
  library, so it is read once in a child process first
  (:func:`hapflow.h5check.check_readable`): a crash there is a
  :class:`DataFileError` naming the file, not the end of this process.
- TDMS: channels named ``group/channel`` (``npTDMS``).
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import HapflowError
from .h5check import DamagedFileError, check_readable

MAX_FIELD = 131072
"""Longest CSV field accepted (characters): Python's csv default; a longer one is an error."""

MAX_ROWS = 50_000_000
"""Most data rows read from one CSV file (about 1 GB of text)."""


class DataFileError(HapflowError):
    """A data file that cannot be read as columns of numbers (names file, line and what is valid)."""


@dataclass
class Table:
    """Named columns read from a file; numbers are parsed per column on request.

    Attributes
    ----------
    path : Path
    names : list of str
        Column names as written (without their unit).
    units : list of str or None
        Unit written in each header cell, if any.
    rows : list of list of str
        The data rows as text (CSV), or ``None`` when ``data`` holds numbers already.
    lines : list of int
        File line (1-based) of each data row.
    data : ndarray (rows, columns), optional
        Numbers of a binary file.
    header_line : int
        File line of the header row (CSV).
    """

    path: Path
    names: list[str]
    units: list[str | None]
    rows: list[list[str]] | None = None
    lines: list[int] = field(default_factory=list)
    data: np.ndarray | None = None
    header_line: int = 1

    @property
    def header(self) -> str:
        """``file:line`` of the header row, for messages about columns."""
        return f"{self.path}:{self.header_line}"

    @property
    def span(self) -> str:
        """``file:first-last`` of the data rows, for messages about the whole record."""
        if not self.lines:
            return str(self.path)
        return f"{self.path}:{self.lines[0]}-{self.lines[-1]}"

    def __len__(self) -> int:
        return len(self.rows) if self.rows is not None else self.data.shape[0]

    def index(self, name: str) -> int:
        """Position of the column ``name`` (exact, then case-insensitive match)."""
        if name in self.names:
            return self.names.index(name)
        lower = [n.lower() for n in self.names]
        if name.lower() in lower:
            return lower.index(name.lower())
        from .errors import suggest
        where = self.header if self.rows is not None else str(self.path)
        raise DataFileError(f"{where}: no column {name!r}{suggest(name, self.names)} "
                            f"Its columns are: {', '.join(self.names)}.")

    def column(self, name: str | int) -> np.ndarray:
        """The finite float64 values of one column (by name or position).

        Raises
        ------
        DataFileError
            Naming the line of a missing field, a value that is not a number or not finite.
        """
        j = name if isinstance(name, int) else self.index(name)
        if self.data is not None:
            values = np.asarray(self.data[:, j], dtype=np.float64)
        else:
            values = np.empty(len(self.rows))
            for i, row in enumerate(self.rows):
                try:
                    values[i] = float(row[j])
                except IndexError:
                    raise DataFileError(f"{self.path}:{self.lines[i]}: {len(row)} field(s), no "
                                        f"value for column {self.names[j]!r}") from None
                except ValueError:
                    raise DataFileError(f"{self.path}:{self.lines[i]}: column {self.names[j]!r} "
                                        f"value {row[j][:40]!r} is not a number") from None
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            i = int(bad[0])
            where = f"{self.path}:{self.lines[i]}" if self.lines else f"{self.path}: row {i + 1}"
            raise DataFileError(f"{where}: column {self.names[j]!r} is {float(values[i])!r}; every "
                                "value must be a finite number")
        return values


_UNIT = re.compile(r"^\s*([^\[\]\(\)]*?)\s*(?:([\[\(])\s*([^\[\]\(\)]*?)\s*([\]\)]))?\s*$")


def split_unit(cell: str, where: str) -> tuple[str, str | None]:
    """``"time [s]"`` -> ``("time", "s")``; ``"time"`` -> ``("time", None)``.

    Raises
    ------
    DataFileError
        For an unclosed or mismatched bracket (``time [s``, ``force (N]``) or an empty name.
    """
    m = _UNIT.match(cell)
    pairs = {"[": "]", "(": ")"}
    if not m or (m.group(2) and pairs[m.group(2)] != m.group(4)) or not m.group(1):
        raise DataFileError(f"{where}: header cell {cell!r} is not 'name', 'name [unit]' or "
                            "'name (unit)' (check the brackets)")
    if m.group(2) and not m.group(3):
        raise DataFileError(f"{where}: header cell {cell!r} has empty brackets; write the unit "
                            "or leave the brackets out")
    return m.group(1), m.group(3) if m.group(2) else None


def _text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataFileError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataFileError(f"{path}:{line}: byte 0x{raw[exc.start]:02x} is not UTF-8 text; save "
                            "the file as UTF-8 (or plain ASCII)") from None


def read_csv(path: str | Path, min_rows: int = 2) -> Table:
    """Read a CSV file of one header row and rows of numbers.

    Parameters
    ----------
    path : str or Path
    min_rows : int
        Fewest data rows accepted.

    Raises
    ------
    DataFileError
        Naming the file and line of the first problem (see the module docstring).
    """
    path = Path(path)
    reader = csv.reader(io.StringIO(_text(path), newline=""))
    rows: list[list[str]] = []
    lines: list[int] = []
    limit = csv.field_size_limit()
    try:
        csv.field_size_limit(MAX_FIELD)
        for row in reader:
            if any(cell.strip() for cell in row):
                rows.append(row)
                lines.append(reader.line_num)
                if len(rows) > MAX_ROWS + 1:
                    raise DataFileError(f"{path}:{reader.line_num}: more than {MAX_ROWS} data "
                                        "rows; split the file")
    except csv.Error as exc:
        raise DataFileError(f"{path}:{reader.line_num}: {exc} (a field may have at most "
                            f"{MAX_FIELD} characters; check the quoting)") from None
    finally:
        csv.field_size_limit(limit)
    if not rows:
        raise DataFileError(f"{path}:1: the file is empty; it needs a header row and at least "
                            f"{min_rows} data rows")
    cells = rows[0]
    while len(cells) > 1 and not cells[-1].strip():   # a delimiter ending every line (MATLAB's
        cells = cells[:-1]                            # writematrix, many DAQ exports)
    header = [split_unit(cell, f"{path}:{lines[0]}") for cell in cells]
    if len(rows) - 1 < min_rows:
        raise DataFileError(f"{path}:{lines[-1]}: the data end after {len(rows) - 1} row(s); at "
                            f"least {min_rows} are needed after the header row (line {lines[0]})")
    return Table(path, [h[0] for h in header], [h[1] for h in header], rows[1:], lines[1:],
                 header_line=lines[0])


@dataclass
class Signal:
    """One recorded signal, uniformly sampled.

    Attributes
    ----------
    values : ndarray
        float64, finite.
    rate : float or None
        Samples per second from the file's time base (``None``: the file has none).
    start : float
        Time of the first sample in the file's time base, s (0 without one).
    where : str
        The file and column, for messages.
    unit : str or None
        The unit the file gives the values (a CSV header's ``[unit]``, an HDF5
        dataset's ``unit`` attribute, a TDMS channel's ``unit_string``).
    """

    values: np.ndarray
    rate: float | None
    start: float
    where: str
    unit: str | None = None


def si_unit(unit: str) -> tuple[float, str] | None:
    """``(factor, SI unit)`` of a unit string (through pint, :mod:`hapflow.units`): ``"mm"``
    -> ``(1e-3, "m")``, ``"gf"`` -> ``(0.00980665, "N")``, ``"N"`` -> ``(1.0, "N")``; None
    when pint does not know it."""
    from .units import UnitError, si_text, to_si
    try:
        factor, dims = to_si(unit)
    except UnitError:
        return None
    return factor, si_text(dims)


TIME_NAMES = ("time", "t")


def uniform_rate(t: np.ndarray, where: str, lines: list[int] | None = None) -> float:
    """Sample rate of time stamps ``t`` that step uniformly (within 1 %).

    Raises
    ------
    DataFileError
        Naming the line (or row) where the time does not increase or the step changes.
    """
    dt = np.diff(t)
    if dt.size == 0:
        raise DataFileError(f"{where}: one time stamp gives no sample rate")
    step = float(np.median(dt))
    bad = np.flatnonzero((dt <= 0) | (np.abs(dt - step) > 0.01 * step))
    if bad.size:
        i = int(bad[0]) + 1
        at = f"{where}:{lines[i]}" if lines else f"{where}, row {i + 1}"
        raise DataFileError(f"{at}: time steps from {t[i - 1]:g} to {t[i]:g} s where the "
                            f"median step is {step:g} s; playback needs uniformly sampled data "
                            "(within 1 %)")
    return 1.0 / step


def read_signal(path: str | Path, column: str = "") -> Signal:
    """One column of a data file with its time base (see the module docstring for the formats).

    Parameters
    ----------
    path : str or Path
        ``.csv``, ``.npy``, ``.h5``/``.hdf5`` or ``.tdms``.
    column : str
        CSV column, recording signal (``block.port``) or HDF5 dataset path,
        TDMS ``group/channel``, ``.npy`` column number; empty: the only one
        (the only non-time column of a CSV file, a 1-D ``.npy`` array).

    Raises
    ------
    DataFileError
        For a missing file, column, or unreadable content, naming what the file has.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"data file {str(path)!r} does not exist")
    kind = path.suffix.lower()
    readers = {".csv": _csv_signal, ".npy": _npy_signal, ".h5": _hdf5_signal,
               ".hdf5": _hdf5_signal, ".tdms": _tdms_signal}
    if kind not in readers:
        raise DataFileError(f"{path}: unknown data file type {kind!r}; use .csv, .npy, .h5/.hdf5 "
                            "or .tdms")
    return readers[kind](path, column)


def _csv_signal(path: Path, column: str) -> Signal:
    table = read_csv(path)
    lower = [n.lower() for n in table.names]
    time = next((lower.index(n) for n in TIME_NAMES if n in lower), None)
    if not column:
        others = [n for k, n in enumerate(table.names) if k != time]
        if len(others) != 1:
            raise DataFileError(f"{table.header}: name the column to play; its columns are "
                                f"{', '.join(table.names)}")
        column = others[0]
    values = table.column(column)
    where = f"{path} column {column!r}"
    unit = table.units[table.index(column)]
    if time is None:
        return Signal(values, None, 0.0, where, unit)
    t = table.column(time) * _seconds(table.units[time] or "s", table)
    return Signal(values, uniform_rate(t, str(path), table.lines), float(t[0]), where, unit)


def _seconds(unit: str, table: Table) -> float:
    """Seconds per unit of a time column (``ms`` -> 1e-3)."""
    known = si_unit(unit)
    if known is None or known[1] != "s" or not known[0] > 0:
        raise DataFileError(f"{table.header}: the time column's unit {unit!r} is not a unit of "
                            "time; write s, ms, us (or another pint knows)")
    return known[0]


def _npy_signal(path: Path, column: str) -> Signal:
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DataFileError(f"{path}: not a NumPy .npy array ({exc})") from None
    if data.ndim == 2 and column.isdigit() and int(column) < data.shape[1]:
        data = data[:, int(column)]
    elif data.ndim != 1 or column not in ("", "0"):
        raise DataFileError(f"{path}: array of shape {data.shape}; give a 1-D array, or a 2-D one "
                            f"with column: 0..{data.shape[-1] - 1 if data.ndim == 2 else 0}")
    return Signal(_finite(data, f"{path}"), None, 0.0, f"{path}")


def _hdf5_signal(path: Path, column: str) -> Signal:
    import h5py
    try:
        check_readable(path)
    except DamagedFileError as exc:
        raise DataFileError(str(exc)) from None
    try:
        with h5py.File(path, "r") as f:
            if "signals" in f and "time" in f:                     # a hapflow recording
                have = sorted(f["signals"])
                if column not in have:
                    raise DataFileError(f"{path}: recording has no signal {column!r}; it has "
                                        f"{', '.join(have) or 'none'}")
                values = f["signals"][column][()].reshape(f["time"].shape[0], -1)
                if values.shape[1] != 1:
                    raise DataFileError(f"{path}: signal {column!r} has {values.shape[1]} values "
                                        "per sample; playback needs a scalar signal")
                t = f["time"][()]
                rate = uniform_rate(t, str(path))
                return Signal(_finite(values[:, 0], f"{path} {column}"), rate, float(t[0]),
                              f"{path} {column}", _unit_attr(f["signals"][column].attrs))
            if column not in f or not isinstance(f[column], h5py.Dataset):
                names: list[str] = []
                f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
                raise DataFileError(f"{path}: no dataset {column!r}; it has "
                                    f"{', '.join(names[:20]) or 'none'}")
            ds = f[column]
            if ds.ndim != 1 or ds.dtype.kind not in "fiu":
                raise DataFileError(f"{path}: dataset {column!r} is {ds.dtype} of shape "
                                    f"{ds.shape}; playback needs a 1-D numeric dataset")
            rate = ds.attrs.get("rate")
            return Signal(_finite(ds[()], f"{path} {column}"),
                          None if rate is None else float(rate), 0.0, f"{path} {column}",
                          _unit_attr(ds.attrs))
    except OSError as exc:
        raise DataFileError(f"{path}: not a readable HDF5 file ({exc})") from None


def _tdms_signal(path: Path, column: str) -> Signal:
    from nptdms import TdmsFile
    try:
        tdms = TdmsFile.read(path)
    except Exception as exc:  # npTDMS raises ValueError, KeyError, struct.error on bad files
        raise DataFileError(f"{path}: not a readable TDMS file ({type(exc).__name__}: {exc})") \
            from None
    channels = [f"{g.name}/{c.name}" for g in tdms.groups() for c in g.channels()]
    if column not in channels:
        raise DataFileError(f"{path}: no channel {column!r}; it has "
                            f"{', '.join(channels) or 'none'} (group/channel)")
    group, name = column.split("/", 1)
    channel = tdms[group][name]
    step = channel.properties.get("wf_increment")
    start = float(channel.properties.get("wf_start_offset", 0.0))
    unit = str(channel.properties.get("unit_string", "")).strip() or None
    return Signal(_finite(channel[:], f"{path} {column}"),
                  None if not step else 1.0 / float(step), start, f"{path} {column}", unit)


def _unit_attr(attrs) -> str | None:
    """An HDF5 object's ``unit`` (or ``units``) attribute as text; None when absent or empty."""
    value = attrs.get("unit", attrs.get("units"))
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return str(value).strip() or None if value is not None else None


def _finite(values: np.ndarray, where: str) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise DataFileError(f"{where}: sample {int(bad[0])} is {float(values[bad[0]])!r}; every "
                            "value must be a finite number")
    return values
