"""Measured data files read as named columns: CSV, NumPy ``.npy``, HDF5 datasets, NI TDMS.

One reader for every consumer (identification, the ``Playback`` block), so a
file a user has is read the same way everywhere and every problem is one
:class:`DataFileError` naming the file, the line or row, and what would be
valid:

- CSV (:func:`read_csv`): one header row, then numbers.  A UTF-8 byte-order
  mark is accepted; a byte that is not UTF-8, a field longer than
  :data:`MAX_FIELD` characters, a row with too few fields, a value that is
  not a number or not finite, are errors naming the line.  Header cells may
  carry a unit, ``name [unit]`` or ``name (unit)``; an unclosed bracket is an
  error, not a name.
- ``.npy`` (:func:`read_columns`): a 1-D array (one column ``0``) or a 2-D
  array (columns ``0``, ``1``, ...).
- HDF5: a hapflow recording (signals by name, plus ``time``) or any dataset,
  named ``path/to/dataset`` (``h5py``).
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
    """

    path: Path
    names: list[str]
    units: list[str | None]
    rows: list[list[str]] | None = None
    lines: list[int] = field(default_factory=list)
    data: np.ndarray | None = None

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
        raise DataFileError(f"{self.path}: no column {name!r}{suggest(name, self.names)} "
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
                    raise DataFileError(f"{path}: more than {MAX_ROWS} data rows")
    except csv.Error as exc:
        raise DataFileError(f"{path}:{reader.line_num}: {exc} (a field may have at most "
                            f"{MAX_FIELD} characters; check the quoting)") from None
    finally:
        csv.field_size_limit(limit)
    if not rows:
        raise DataFileError(f"{path}: the file is empty; it needs a header row and data rows")
    header = [split_unit(cell, f"{path}:{lines[0]}") for cell in rows[0]]
    if len(rows) - 1 < min_rows:
        raise DataFileError(f"{path}: {len(rows) - 1} data row(s); at least {min_rows} are needed "
                            "after the header row")
    return Table(path, [h[0] for h in header], [h[1] for h in header], rows[1:], lines[1:])
