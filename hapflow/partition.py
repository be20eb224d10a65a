"""Cut a phase's kernel call sites into compile units of bounded size.

numba compiles one function in time that grows faster than its length (its
SSA reconstruction and closure-inlining passes), so a graph's tick is
compiled as units of at most ``max_lines`` generated lines.  Where the cuts
fall decides how much compiled code identical subsystems can share: a unit
is reused only when its sites (block structure, kernel, sample-hit
condition) and their relative offsets repeat exactly.  The cuts are
therefore made by content, not by count:

- a new unit starts at a site whose key equals the key of the current
  unit's first site (the sequence has come round to where the unit began:
  one period of a replicated subsystem), and
- at an *anchor*: a site whose key hashes to 0 modulo :data:`ANCHOR_EVERY`
  (content-defined chunking, as in rsync: in a repeated stretch longer
  than a unit the anchors repeat too, so the cuts fall at the same places
  in every copy),

each only once the unit holds ``max_lines // 4`` lines, and always before
a site that would take the unit past ``max_lines`` (one site larger than
that is a unit of its own).

``max_lines`` counts kernel source lines (:func:`hapflow.inline.size`).
The generator's default of 120 was chosen on the 100-block replicated graph
of ``bench/compile.py`` (cold compile CPU s / ns per block and tick):
60 lines 4.5 / 6.3, 120 lines 4.9 / 5.9, 300 lines 8.0 / 6.5, 1000 lines
12.3 / 6.5.  Larger units compile more slowly and run no faster: LLVM
inlines the units into their phase function anyway, and what the units
cost at run time is their offsets being arguments rather than constants.
On a graph without repeats (the distinct family) the size hardly matters:
there the cost is the code itself (see :mod:`hapflow.compiler`).
"""
from __future__ import annotations

import hashlib
from typing import Callable, Sequence, TypeVar

Site = TypeVar("Site")

ANCHOR_EVERY = 7
"""One site key in this many, on average, is an anchor."""


def _anchor(key: str) -> bool:
    return int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % ANCHOR_EVERY == 0


def cut(sites: Sequence[Site], cost: Callable[[Site], int], key: Callable[[Site], str],
        max_lines: int) -> list[list[Site]]:
    """Consecutive groups of ``sites``, each costing at most ``max_lines`` (see the module doc).

    Parameters
    ----------
    sites : sequence
        Kernel call sites in execution order.
    cost : callable
        Generated lines of a site.
    key : callable
        What makes two sites generate the same code up to offsets.
    max_lines : int
        Most lines of one group (a single larger site forms its own group).
    """
    groups: list[list[Site]] = []
    current: list[Site] = []
    size, first = 0, None
    for site in sites:
        lines, k = cost(site), key(site)
        if current and (size + lines > max_lines
                        or (size >= max_lines // 4 and (k == first or _anchor(k)))):
            groups.append(current)
            current, size = [], 0
        if not current:
            first = k
        current.append(site)
        size += lines
    if current:
        groups.append(current)
    return groups
