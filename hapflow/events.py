"""In-step event location: Illinois regula falsi over re-integrated trial steps.

The generated kernel integrates a tick from the saved state ``x0`` at time
``ta`` over a trial length ``th`` and evaluates every guard into ``ge``
(``gs`` holds the guards at ``ta``).  :func:`decide` then says what to do:

- ``ACCEPT``: no guard went from > 0 to <= 0; the step stands.
- ``RETRY``: integrate again from ``x0`` over the new ``th`` (locating).
- ``RESET``: the state is just past the earliest crossing (bracket below the
  tolerance); apply guard ``ev[J]``'s reset, then :func:`restart` the
  remaining part of the tick from there.

The tick grid never moves; at most ``max_events`` events are handled per
tick and any further crossing is counted in ``stats[OVERFLOW]``.
"""
from __future__ import annotations

from .jit import njit

# ev (work array) fields
TA, REM, TH, A, FA, B, FB, SIDE, J, PHASE, IT, NEV = range(12)
# phases
STEPPING, LOCATING, FINISHING, SATURATED = 0.0, 1.0, 2.0, 3.0
# actions
ACCEPT, RETRY, RESET = 0, 1, 2
# stats fields
EVENTS, OVERFLOW = 0, 1
MAX_ITERATIONS = 60


@njit(cache=True)
def begin(ev, t, h):
    """Start a tick at time ``t`` (s) of length ``h`` (s)."""
    ev[TA] = t
    ev[REM] = h
    ev[TH] = h
    ev[PHASE] = STEPPING
    ev[NEV] = 0.0


@njit(cache=True)
def earliest(gs, ge):
    """Index of the guard whose >0 -> <=0 crossing is earliest by linear estimate, or -1."""
    best = -1
    best_frac = 2.0
    for j in range(gs.size):
        if gs[j] > 0.0 and ge[j] <= 0.0:
            frac = gs[j] / (gs[j] - ge[j])
            if frac < best_frac:
                best = j
                best_frac = frac
    return best


@njit(cache=True)
def _falsi(ev):
    a, b, fa, fb = ev[A], ev[B], ev[FA], ev[FB]
    th = (a * fb - b * fa) / (fb - fa) if fb != fa else 0.5 * (a + b)
    if not a < th < b:
        th = 0.5 * (a + b)
    return th


@njit(cache=True)
def decide(ev, gs, ge, locate, tol, stats):
    """Decide after a trial step; see the module docstring for the actions.

    Parameters
    ----------
    ev : ndarray
        Event control record (fields TA..NEV), updated in place.
    gs, ge : ndarray
        Guard values at the start and at the end of the trial step.
    locate : bool
        False applies resets at the end of the tick (no location).
    tol : float
        Time tolerance of the crossing (s).
    stats : ndarray of int64
        Event and overflow counters.
    """
    phase = ev[PHASE]
    if phase == FINISHING:
        return RESET
    j = earliest(gs, ge)
    if phase == SATURATED:
        if j >= 0:
            stats[OVERFLOW] += 1
        return ACCEPT
    if phase == STEPPING:
        if j < 0:
            return ACCEPT
        ev[J] = j
        if not locate:
            return RESET
        ev[A], ev[FA], ev[B], ev[FB] = 0.0, gs[j], ev[TH], ge[j]
        ev[SIDE], ev[IT], ev[PHASE] = 0.0, 0.0, LOCATING
        ev[TH] = _falsi(ev)
        return RETRY
    th = ev[TH]
    if j >= 0 and j != int(ev[J]):          # another guard crossed earlier
        ev[J], ev[A], ev[FA], ev[B], ev[FB], ev[SIDE] = j, 0.0, gs[j], th, ge[j], 0.0
    elif j >= 0:                             # crossing lies in [A, th]
        ev[B], ev[FB] = th, ge[j]
        if ev[SIDE] == -1.0:
            ev[FA] *= 0.5
        ev[SIDE] = -1.0
    else:                                    # crossing lies in [th, B]
        ev[A], ev[FA] = th, ge[int(ev[J])]
        if ev[SIDE] == 1.0:
            ev[FB] *= 0.5
        ev[SIDE] = 1.0
    ev[IT] += 1.0
    if ev[B] - ev[A] <= tol or ev[IT] >= MAX_ITERATIONS or ev[FB] == 0.0:
        if th == ev[B]:
            return RESET
        ev[TH] = ev[B]
        ev[PHASE] = FINISHING
        return RETRY
    ev[TH] = _falsi(ev)
    return RETRY


@njit(cache=True)
def restart(ev, stats, max_events):
    """After a reset: move the tick's start to the event; return 0 if the tick is done."""
    ev[TA] += ev[TH]
    ev[REM] -= ev[TH]
    ev[NEV] += 1.0
    stats[EVENTS] += 1
    ev[TH] = ev[REM]
    ev[PHASE] = SATURATED if ev[NEV] >= max_events else STEPPING
    return 1 if ev[REM] > 0.0 else 0
