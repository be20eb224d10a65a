"""The Block base class: ports, parameters, state sizes and pure ``@njit`` kernels.

A block exists only while a graph is built and checked.  At run time its
kernels are called by generated code on constant slices of flat arrays.

Kernel signatures (every argument is a 1-D ``float64``/``int64``/``bool``
array view; ``t`` is the time in s)::

    output(t, x, d, m, p, *inputs, *outputs)   # write outputs
    update(t, x, d, m, p, *inputs)             # discrete step at the block's rate
    deriv(t, x, d, m, p, *inputs, dx)          # continuous state derivative
    guard(t, x, d, m, p, *inputs, g)           # event functions; event when g goes >0 -> <=0
    reset(t, x, d, m, p, *inputs, k)           # apply guard k's reset map to x, d, m
    init(x, d, m, p)                           # optional: initial state from parameters

``x`` is the continuous state, ``d`` the discrete float state, ``m`` the
integer state (a hybrid block keeps its mode in ``m[0]``), ``p`` the packed
live parameters (see :meth:`Block.pack`).  Inputs and outputs come in the
order they are declared.

Outputs must be a pure function of (t, x, d, m, p, inputs): the engine may
call ``output`` more than once per tick.  A block with an ``update`` may
still keep work entries in ``d`` that ``output`` writes and ``update`` reads
(saving a second evaluation of its law): at every sample hit ``output`` runs
before ``update``, and ``output`` must not read those entries.

Python-side blocks (sinks: MIDI, sound, files) keep kernels free of I/O:
their ``update`` appends records to a buffer in their own state, and the
scheduler calls the block's :meth:`Block.drain` between chunks and
:meth:`Block.close` when a run ends (see those methods).
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator

import numpy as np

from .errors import GraphError, Where, suggest, valid_list
from .names import SCALAR_KINDS, Derived, offsets, spans, state_sizes
from .params import Param
from .ports import In, Out

KERNELS = ("output", "update", "deriv", "guard", "reset", "init")


@dataclass
class Origin:
    """Where a block comes from: its name in a graph and, from a graph file, the file and line
    of its declaration and of each parameter (for the errors it raises)."""

    name: str | None = None
    where: Where = field(default_factory=Where)
    param_where: dict[str, Where] = field(default_factory=dict)


class ParamError(GraphError):
    """A parameter that is unknown, missing or invalid, alone or with the others.

    Blocks raise it naming the parameter; the :class:`Block` base class adds
    the block's type, its name in the graph and (from a graph file) the file
    and line of the parameter, so the message reads
    ``graph.yaml:12: block 'pid' (PIDFeedforward): parameter 'kp' must be > 0``.

    Parameters
    ----------
    param : str
        Name of the offending parameter.
    message : str
        What is wrong and what would be valid.
    block : str, optional
        The block's name in its graph.
    where : Where, optional
        File and line the value comes from.
    block_type : str, optional
        The block's class name.
    """

    def __init__(self, param: str, message: str, block: str | None = None,
                 where: Where | None = None, block_type: str | None = None):
        self.param = param
        self.block_type = block_type
        super().__init__(message, where, block=block, key=param)

    def place(self, block: "Block", from_source: bool = True) -> "ParamError":
        """Fill in what is not known yet from ``block`` (its type and name and, when the value
        comes from the block's source (its graph file), the parameter's file and line);
        returns itself."""
        origin = block.origin
        self.block_type = self.block_type or type(block).__name__
        self.block = self.block or origin.name
        if from_source and not (self.where.file or self.where.line):
            self.where = origin.param_where.get(self.param, origin.where)
        self.args = (str(self),)
        return self

    def __str__(self) -> str:
        kind = f" ({self.block_type})" if self.block_type and self.block else ""
        who = (f"block {self.block!r}{kind}: " if self.block
               else f"{self.block_type}: " if self.block_type else "")
        prefix = str(self.where)
        return f"{prefix + ': ' if prefix else ''}{who}{self.message}"

    def __reduce__(self) -> tuple:
        return (ParamError, (self.param, self.message, self.block, self.where, self.block_type))


class Block:
    """Base class of every block.

    Subclasses declare ``inputs``, ``outputs`` (dicts of :class:`In`/:class:`Out`),
    ``params`` (dict of :class:`Live`/:class:`Structural`), ``derived``
    parameters (:class:`hapflow.names.Derived`), the state sizes or names
    ``cstate``, ``dstate``, ``istate``, the number of event functions
    ``nguards``, and static ``@njit`` kernels (see the module docstring).
    ``configure`` may change ports and sizes from structural parameters.
    The class gets the offsets its kernels use by name: ``P`` (parameters,
    unless it overrides :meth:`pack`), and ``X``, ``D``, ``M`` for states
    declared by name (see :mod:`hapflow.names`).

    Parameters
    ----------
    **values
        Parameter values by name; missing ones take their defaults.

    Raises
    ------
    ParamError
        For an unknown, missing or invalid parameter.
    """

    inputs: ClassVar[dict[str, In]] = {}
    outputs: ClassVar[dict[str, Out]] = {}
    params: ClassVar[dict[str, Param]] = {}
    derived: ClassVar[dict[str, Derived]] = {}
    """Parameters computed from the declared ones, packed after the live ones."""
    cstate: int = 0
    dstate: int = 0
    istate: int = 0
    nguards: int = 0
    position_states: tuple[int, ...] = ()
    """Indices of continuous states integrated after the others by
    semi-implicit Euler (positions whose derivative is a velocity state)."""
    initial_from: ClassVar[dict[str, str]] = {}
    """Named continuous or discrete states that start at a parameter's value,
    ``{state: parameter}`` (``{"angle": "angle0"}``); the others start at zero
    (override :meth:`initial_state` for more)."""
    initial_depends: ClassVar[tuple[str, ...] | None] = ()
    """The parameters an :meth:`initial_state` override reads besides those of
    :attr:`initial_from`, declared with the override (a batch of runs computes the
    initial state once per distinct value of these); an override that declares none
    depends on every parameter (see :meth:`initial_parameters`)."""
    random_streams: int = 0
    """Number of random streams (see :mod:`hapflow.rng`); stream k lives in
    ``m[istate + k]`` and is seeded from the graph seed and the block name."""
    sample_time: float | None = None
    """Time between the block's sample hits in s, set when it is added to a
    graph (so :meth:`pack` can discretise with it)."""

    output: ClassVar[Callable | None] = None
    update: ClassVar[Callable | None] = None
    deriv: ClassVar[Callable | None] = None
    guard: ClassVar[Callable | None] = None
    reset: ClassVar[Callable | None] = None
    init: ClassVar[Callable | None] = None

    def __init_subclass__(cls, register: bool = True, **kwargs: Any):
        """Check the declarations, name the offsets and register the class by name
        (``class Mine(Block, register=False)`` keeps a local class, e.g. a test's, out of
        the registry; :func:`hapflow.registry.registered` adds it for a while)."""
        super().__init_subclass__(**kwargs)
        clash = [n for n in (*cls.params, *cls.derived)
                 if hasattr(Block, n) or n in ("type", "rate", "tick_offset")]
        # a derived value may take the name of an optional parameter (a None default,
        # never packed itself): it is that parameter as the kernels read it, defaults resolved
        clash += [n for n in cls.derived if n in cls.params
                  and not (cls.params[n].live and cls.params[n].default is None)]
        if clash:
            raise TypeError(f"{cls.__name__}: parameter name(s) {clash} shadow Block attributes, "
                            "the graph-file block keys type/rate/tick_offset or a parameter")
        cls._name_offsets()
        cls._check_initial()
        if register:
            from . import registry
            registry.register(cls)

    @classmethod
    def _check_initial(cls) -> None:
        named = [n for title in ("X", "D")
                 for n in getattr(getattr(cls, title, None), "_fields", ())]
        wrong = [f"{s}: {p}" for s, p in cls.initial_from.items()
                 if s not in named or p not in cls.params]
        if wrong:
            raise TypeError(f"{cls.__name__}.initial_from: {', '.join(wrong)} does not map a "
                            f"named state ({', '.join(named) or 'none'}) to a parameter")
        unknown = [p for p in cls.initial_depends or () if p not in cls.params]
        if unknown:
            raise TypeError(f"{cls.__name__}.initial_depends: {', '.join(unknown)} "
                            f"{'is not a parameter' if len(unknown) == 1 else 'are not parameters'}"
                            f" (valid: {', '.join(cls.params) or 'none'})")

    @classmethod
    def initial_parameters(cls) -> frozenset[str] | None:
        """The parameters :meth:`initial_state` depends on: those of :attr:`initial_from` and
        :attr:`initial_depends`; None (any parameter) when the class that overrides
        :meth:`initial_state` last, or a class after it, declares no ``initial_depends``."""
        mro = cls.__mro__
        overrides = next(i for i, k in enumerate(mro) if "initial_state" in k.__dict__)
        declares = next(i for i, k in enumerate(mro) if "initial_depends" in k.__dict__)
        if declares > overrides or cls.initial_depends is None:
            return None
        return frozenset(cls.initial_from.values()) | frozenset(cls.initial_depends)

    @classmethod
    def _name_offsets(cls) -> None:
        """``X``, ``D``, ``M`` for states declared by name, ``P`` for the default packing."""
        for attr, title in (("cstate", "X"), ("dstate", "D"), ("istate", "M")):
            sizes = state_sizes(cls.__dict__.get(attr))
            if sizes is not None:
                setattr(cls, title, offsets(f"{cls.__name__}_{title}", sizes))
                setattr(cls, attr, sum(size for _, size in sizes))
        if cls.pack is Block.pack:
            sizes = [(n, 1 if s.kind in SCALAR_KINDS else None) for n, s in cls._packed()]
            cls.P = offsets(f"{cls.__name__}_P", sizes + [
                (n, d.size if isinstance(d.size, int) else None) for n, d in cls.derived.items()])

    def __init__(self, **values: Any):
        self.__dict__.setdefault("origin", Origin())
        self.values: dict[str, Any] = {}
        with self.naming_errors():
            for name in values:
                if name not in self.params:
                    raise ParamError(name, f"unknown parameter {name!r}{suggest(name, self.params)} "
                                           f"Valid parameters of {type(self).__name__}: "
                                           f"{valid_list(self.params)}")
            for name, spec in self.params.items():
                if name in values:
                    self.values[name] = self._coerce(name, spec, values[name])
                elif spec.required:
                    raise ParamError(name, f"missing required parameter {name!r} "
                                           f"({spec.unit or 'dimensionless'}): {spec.doc}")
                else:
                    self.values[name] = spec.default
            self.inputs = dict(type(self).inputs)
            self.outputs = dict(type(self).outputs)
            self.configure()
            self.validate(None)

    @classmethod
    def built(cls, origin: Origin, **values: Any) -> "Block":
        """A block that knows its graph name and source from the start, so an error in its
        parameters names them (graph files build blocks this way).

        Raises
        ------
        ParamError
            As the constructor, with the block name and the parameter's file and line.
        """
        block = cls.__new__(cls)
        block.origin = origin
        block.__init__(**values)
        return block

    @contextmanager
    def naming_errors(self, from_source: bool = True) -> Iterator[None]:
        """Let a :class:`ParamError` raised inside name this block (type, graph name and, for
        values ``from_source``, the file and line of the parameter)."""
        try:
            yield
        except ParamError as exc:
            raise exc.place(self, from_source) from None

    @staticmethod
    def _coerce(name: str, spec: Param, value: Any) -> Any:
        try:
            return spec.coerce(value)
        except ValueError as exc:
            unit = f" [{spec.unit}]" if spec.unit else ""
            raise ParamError(name, f"parameter {name!r}{unit} {exc}") from None

    def coerce(self, name: str, value: Any) -> Any:
        """``value`` of parameter ``name`` as the block stores it (alone: rules between
        parameters are not checked).

        Raises
        ------
        ParamError
            If the value is not valid for the parameter.
        """
        with self.naming_errors(from_source=False):
            return self._coerce(name, self.params[name], value)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def configure(self) -> None:
        """Adjust ports and state sizes from structural parameters (override)."""

    def validate(self, changed: str | None) -> None:
        """Check the rules between parameters (override); the base class calls it once the
        block is built and after every :meth:`set`, which it undoes when this raises.

        Parameters
        ----------
        changed : str or None
            The parameter just set (None while the block is built): the one to
            name in the error when a rule between several breaks.

        Raises
        ------
        ParamError
            Naming the parameter and saying what would be valid.
        """

    def pack(self) -> np.ndarray:
        """Live parameters as the flat ``float64`` vector the kernels receive as ``p``.

        The default concatenates live parameters in declaration order (but
        those whose default is ``None``), then the ``derived`` ones (kernels
        find them by name: ``p[P.name]``).  A block that overrides it (a test's
        stand-in) gets no ``P`` and no names; the length must not depend on live
        values.  The engine calls :meth:`packed`, which packs once per set of values.

        Raises
        ------
        ParamError
            If a derived parameter's value does not have its declared size.
        """
        return _joined(self._pieces()[0])

    def _pieces(self) -> tuple[list[tuple[str, np.ndarray, str]], frozenset[str]]:
        """Name, values and unit of each part of the default :meth:`pack`, in order, and the
        parameters the derived values read (:meth:`derived_reads`)."""
        parts = [(n, np.atleast_1d(np.asarray(self.values[n], dtype=np.float64)).ravel(), s.unit)
                 for n, s in self._packed()]
        values = self.__dict__["values"]
        log = self.__dict__["values"] = _ReadLog(values)
        try:
            derived = [(name, spec, spec.value(self)) for name, spec in self.derived.items()]
        finally:
            self.__dict__["values"] = values
        for name, spec, value in derived:
            part = np.atleast_1d(np.asarray(value, dtype=np.float64)).ravel()
            size = spec.size_for(self)
            if size is not None and part.size != size:
                raise ParamError(name, f"derived parameter {name!r} of {type(self).__name__} "
                                       f"has {part.size} values, declared {size}")
            parts.append((name, part, spec.unit))
        return parts, frozenset(log.read)

    @classmethod
    def _packed(cls) -> list[tuple[str, Param]]:
        """The live parameters the default :meth:`pack` packs, in declaration order: all but
        those declared with a ``None`` default (optional alternatives, which ``derived``
        parameters resolve: a kernel reads the derived value)."""
        return [(n, s) for n, s in cls.params.items() if s.live and s.default is not None]

    def packed_names(self) -> list[tuple[str, int, str]] | None:
        """Name, size and unit of each value :meth:`pack` packs, in order (None when a
        subclass packs by hand)."""
        if type(self).pack is not Block.pack:
            return None
        out = [(n, np.atleast_1d(np.asarray(self.values[n], dtype=np.float64)).size, s.unit)
               for n, s in self._packed()]
        for name, spec in self.derived.items():
            size = spec.size_for(self)
            if size is None:
                size = np.atleast_1d(np.asarray(spec.value(self))).size
            out.append((name, size, spec.unit))
        return out

    def derived_reads(self) -> frozenset[str] | None:
        """The parameters the ``derived`` values read when packed at the current values (None
        if packing raises, or the block packs by hand).

        A derived value is a function of the parameter values it reads (and of
        the sample time and structural set-up): while none of those changes, the
        evaluation takes the same path and gives the same value, whatever other
        parameters do.  So runs of a batch that differ only elsewhere share the
        derived values (:class:`hapflow.batch.Filler` packs them once).  Read
        through :attr:`values` (as attributes or by key); iterating over it
        counts as reading every parameter.  Noted by :meth:`packed`, so asking
        costs no evaluation."""
        try:
            self.packed()
        except Exception:  # noqa: BLE001 - the caller packs per value and reports it
            return None
        return self.__dict__["_packing"][2]

    def packed_offsets(self) -> tuple | None:
        """Offset of each packed value of this block by name (a named tuple, as ``P`` but
        for every value, also after one whose size follows from structural parameters);
        None when a subclass packs by hand.  For kernels made per structure
        (:meth:`kernels`): give such derived values a ``size`` function, so their offsets
        are known before their values (before the block has a sample time)."""
        names = self.packed_names()
        if names is None:
            return None
        return offsets(f"{type(self).__name__}_P", [(n, size) for n, size, _ in names])

    def initial_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Initial continuous, discrete and integer state: zeros, and the states named in
        :attr:`initial_from` at their parameters' values (override for more)."""
        x, d = np.zeros(self.cstate), np.zeros(self.dstate)
        for values, named in ((x, getattr(self, "X", None)), (d, getattr(self, "D", None))):
            for name, at, size in spans(named, values.size) if named is not None else ():
                if name in self.initial_from:
                    values[at:at + size] = self.values[self.initial_from[name]]
        return x, d, np.zeros(self.istate, dtype=np.int64)

    def kernels(self) -> dict[str, Callable]:
        """The block's kernels by name (override to specialise on structural parameters)."""
        return {k: getattr(type(self), k) for k in KERNELS if getattr(type(self), k) is not None}

    # ------------------------------------------------------------ Python side (sinks)
    def drain_limit(self) -> int | None:
        """Most sample hits of this block that may pass between two :meth:`drain` calls.

        A block whose ``update`` appends records to a buffer in its own state
        returns its buffer capacity divided by its worst-case records per
        sample hit; the scheduler then ends every chunk before the buffer can
        fill (see :meth:`drain`).  ``None`` (the default) sets no limit.
        """
        return None

    def drain(self, d: np.ndarray, m: np.ndarray, t0: float, t1: float) -> None:
        """Python-side hook, called between chunks (override; the default does nothing).

        The kernel never does I/O: a sink's ``update`` writes events or samples
        into its own discrete state (e.g. ``m[0]`` records, then fixed-size
        records in ``d``) and this hook empties that buffer into files, ports
        or audio streams, and resets the count.  It is called after every
        chunk by :class:`~hapflow.simulation.Simulation` (and by the HIL
        runner) with writable views of the block's own state; the scheduler
        limits chunks to :meth:`drain_limit` sample hits so buffers never
        overflow.

        Parameters
        ----------
        d : ndarray of float64
            View of the block's discrete state (``dstate`` values).
        m : ndarray of int64
            View of the block's integer state (``istate`` values, then its
            random streams).
        t0, t1 : float
            Start and end time of the ticks run since the previous drain, in s
            (ticks ``t0 <= t < t1``); ``t0 == 0`` starts a new run from tick 0.
        """

    def close(self, status: str = "complete") -> None:
        """Python-side hook, called once when a run ends (override; default does nothing).

        Called after the last :meth:`drain` of a run, also when the run stops
        on an error or Ctrl-C, so files the block writes are complete and
        readable.  A later run continues where this one stopped (reopening
        what it needs) unless it starts again from ``t0 == 0``.

        Parameters
        ----------
        status : {'complete', 'interrupted', 'error'}
            How the run ended (e.g. do not wait for queued audio to play out
            after an interrupt).
        """

    @classmethod
    def has_drain(cls) -> bool:
        """True if the block has a Python side: it overrides :meth:`drain` or :meth:`close`."""
        return cls.drain is not Block.drain or cls.close is not Block.close

    def signature_problem(self) -> str | None:
        """Describe a kernel whose parameters do not match the ports, or None."""
        ins, outs = list(self.inputs), list(self.outputs)
        expected = {"output": [*ins, *outs], "update": ins, "deriv": [*ins, "dx"],
                    "guard": [*ins, "g"], "reset": [*ins, "k"]}
        for kind, fn in self.kernels().items():
            names, variadic = _parameters(getattr(fn, "py_func", fn))
            want = ["x", "d", "m", "p"] if kind == "init" else ["t", "x", "d", "m", "p", *expected[kind]]
            if (len(names) != len(want)) if not variadic else (len(names) - 1 > len(want)):
                return (f"kernel {kind}{tuple(names)} of {type(self).__name__} must take "
                        f"({', '.join(want)}): every input, then every output, in declaration order")
        return None

    def set(self, name: str, value: Any) -> None:
        """Change a live parameter (takes effect at the next chunk).

        Raises
        ------
        ParamError
            If the parameter is unknown, structural, or the value is invalid,
            alone or with the others (:meth:`validate`; the old value is kept).
        """
        with self.naming_errors(from_source=False):    # the value comes from the caller
            spec = self.params.get(name)
            if spec is None:
                raise ParamError(name, f"unknown parameter {name!r}{suggest(name, self.params)} "
                                       f"Valid: {valid_list(self.params)}")
            if not spec.live:
                raise ParamError(name, f"parameter {name!r} is structural: it changes the "
                                       "generated code, so rebuild the graph to change it")
            old = self.values[name]
            self.values[name] = self._coerce(name, spec, value)
            try:
                self.validate(name)
            except ParamError:
                self.values[name] = old
                raise

    def packed(self) -> np.ndarray:
        """:meth:`pack`, with its errors naming this block (what the engine calls).

        Packed once per set of live values and sample time: the layout, the
        simulation and a batch all read this one (read-only) vector.

        Raises
        ------
        ParamError
            For a value the block's design rejects (a cut-off above Nyquist ...).
        """
        key = (self.sample_time, repr([v for n, v in self.values.items() if self.params[n].live]))
        memo = self.__dict__.get("_packing")
        if memo is None or memo[0] != key:
            with self.naming_errors():
                if type(self).pack is Block.pack:
                    pieces, reads = self._pieces()
                    vector = _joined(pieces)
                else:
                    vector, reads = np.array(self.pack(), dtype=np.float64), None
            vector.flags.writeable = False
            memo = self.__dict__["_packing"] = (key, vector, reads)
        return memo[1]

    def structural_key(self) -> tuple:
        """Everything about this block that shapes the generated code (for the cache hash)."""
        return (type(self).__module__, type(self).__qualname__,
                tuple((n, repr(self.values[n])) for n, s in self.params.items() if not s.live),
                tuple((n, p) for n, p in self.inputs.items()),
                tuple((n, p) for n, p in self.outputs.items()),
                self.cstate, self.dstate, self.istate, self.random_streams, self.nguards,
                self.position_states)

    @classmethod
    def summary(cls) -> str:
        """First line of the docstring."""
        doc = inspect.getdoc(cls) or ""
        return doc.splitlines()[0] if doc else ""


class _ReadLog(Mapping):
    """A block's parameter values that note the names read (what :meth:`Block.pack` gives
    its derived values to read: :meth:`Block.derived_reads`)."""

    def __init__(self, values: dict[str, Any]):
        self.source = values          # not "values": Mapping has a values() method
        self.read: set[str] = set()

    def __getitem__(self, name: str) -> Any:
        self.read.add(name)
        return self.source[name]

    def __iter__(self) -> Iterator[str]:
        self.read.update(self.source)
        return iter(self.source)

    def __len__(self) -> int:
        return len(self.source)


def _joined(pieces: list[tuple[str, np.ndarray, str]]) -> np.ndarray:
    return np.concatenate([v for _, v, _ in pieces]) if pieces else np.zeros(0)


@functools.lru_cache(maxsize=1024)
def _parameters(py: Callable) -> tuple[tuple[str, ...], bool]:
    """A kernel's parameter names and whether it takes ``*args`` (blocks of one type share
    their kernels: read once, not once per block)."""
    parameters = inspect.signature(py).parameters
    return tuple(parameters), any(q.kind is inspect.Parameter.VAR_POSITIONAL
                                 for q in parameters.values())
