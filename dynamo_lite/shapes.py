"""Dynamic shapes: symbolic sizes and ints through torch's ShapeEnv, and the guards they need.

One ``ShapeTracker`` per trace (``OutputGraph.shapes``) owns the trace's
``torch.fx.experimental.symbolic_shapes.ShapeEnv``; the trace's FakeTensorMode is
made with it, so fake tensors of symbolic inputs have ``SymInt`` sizes and every
fact an operation relies on ("s0 == s1" for a ``cat``, "s1 % 2 == 0" for a
``view``, the branch a Python ``if`` took on a symbolic value) is recorded by
the ShapeEnv.  This module decides what is symbolic and turns the ShapeEnv's
facts into guard kinds of our own (guards/kinds.py: SHAPE_RANGE, SHAPE_EQ,
SHAPE_REL), each naming the user line that introduced it.

What is symbolic (``ShapeTracker.tensor_dims`` / ``int_symbol``):

    dynamic=False            nothing
    dynamic=True             every dimension of every eligible input tensor, every int argument
    dynamic=None (default)   automatic: what changed since an earlier compile of the same code
                             (``FrameSizes``, one per code object, kept by cache.py): the first
                             compile is static, a recompile makes the changed dims/ints symbolic
    mark_dynamic(t, d)       dimension d always symbolic (sizes 0/1 too); forcing it to a
                             constant raises DynamicDimSpecialized naming the line
    maybe_mark_dynamic(t, d) symbolic from the first compile, may specialise
    mark_static(t, d)        never symbolic (a module or class: none of its frames' inputs)

Sizes 0 and 1 stay specialised unless marked (as torch does).  Eligible: plain
``torch.Tensor`` inputs (not parameters, subclasses or views) read from the
frame's arguments or items of them; int arguments of the frame, and the int locals
a loop-body function receives (so a loop counter or accumulator the body reads
does not recompile the body for each value).  Parameters,
buffers and globals keep static shapes.

The sources we give the ShapeEnv are ``TorchSource`` adapters around ours (it
only needs a ``name``); it wraps them in its own size/stride sources, which
``_ours`` maps back to ``TensorSizeSource`` / ``TensorStrideSource``.
Tested by tests/torch/test_dynamic_shapes.py and tests/unit/test_shapes.py.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import math
import os
import re
import warnings
from typing import Any, Callable, Optional

import sympy
import torch
from torch._guards import GuardSource
from torch._guards import Source as _TorchSourceBase
from torch.fx.experimental.symbolic_shapes import (DimDynamic, PendingUnbackedSymbolNotFound, ShapeEnv,
                                                   StatelessSymbolicContext, compute_unbacked_bindings)
from torch.utils._sympy import functions as symfn
from torch.utils._sympy.value_ranges import ValueRanges

from . import config, guards, torch_compat
from . import graph_breaks as gb
from .exc import DynamicDimSpecialized, GraphBreak, InternalError, UserFrame
from .source import AttrSource, ClosureSource, DictLenSource, GlobalSource, ItemSource, LocalSource, LOOP_BODY_LOCALS, Source, TensorOffsetSource, TensorSizeSource, TensorStrideSource

MARKS_ATTR = "_dynamo_lite_marks"  # on a tensor: {dim: ("dynamic", min, max) | ("maybe",) | ("static",)}
STATIC_ATTR = "_dynamo_lite_static"  # on a module or class: its frames' inputs stay static



_NON_LEAF_GRAD = ("ignore", re.compile(r"The \.grad attribute of a Tensor that is not a leaf"), UserWarning, None, 0)


def is_grad_of_non_leaf_warning(w: warnings.WarningMessage) -> bool:
    """The warning of a ``.grad`` read on a non-leaf tensor (a fake-tensor conversion's)."""
    return issubclass(w.category, UserWarning) and _NON_LEAF_GRAD[1].match(str(w.message)) is not None


@contextlib.contextmanager
def no_grad_of_non_leaf_warning():
    """Quiet the warning torch's fake-tensor conversion issues when it reads ``.grad`` of a
    non-leaf input (eager reads no ``.grad``).  The filter goes in front *in place*, as in
    variables.tensor.warnings_issued: the filters version and the user's registries stay."""
    warnings.filters.insert(0, _NON_LEAF_GRAD)
    try:
        yield
    finally:
        try:
            warnings.filters.remove(_NON_LEAF_GRAD)
        except ValueError:  # (something reset the filters meanwhile)
            pass

class CannotSymbolize(Exception):
    """A fact of the ShapeEnv has no guard kind of ours: the frame is traced again with static
    shapes (convert_frame), never guessed.  ``floats``: the fact is about float arguments only,
    so the trace is first tried again with static floats (symbolic ints and sizes kept)."""

    def __init__(self, reason: str, floats: bool = False):
        super().__init__(reason)
        self.floats = floats


@dataclasses.dataclass(frozen=True)
class TorchSource(_TorchSourceBase):
    """Our Source, as the ShapeEnv sees it (it only needs ``name``)."""

    ours: Any = None

    @functools.cached_property
    def _name_template(self) -> str:
        return self.ours.name()

    @functools.cached_property
    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL


# ---- the memory of automatic dynamic ------------------------------------------------
class FrameSizes:
    """What a code object's compiles saw, per input source name: a tensor's sizes (None for a
    dimension that changed: symbolic from then on) or an int argument (None once it changed).

    Attributes:
        seen: source name -> tuple of (int | None), or int | None.
        changed: source names whose values changed at least once (for the cache-limit warning).
        made_constant: source name -> the user line that made a symbolic input a constant again
            (``range(n)`` unrolled in one graph, a list index): dynamic shapes cannot help there,
            and the cache-limit warning says so.
    """

    def __init__(self):
        self.seen: dict[str, Any] = {}
        self.changed: dict[str, None] = {}
        self.made_constant: dict[str, str] = {}
        self.objects: dict[str, Optional[int]] = {}  # source name -> id() of the object seen (None: changed)

    def merge_sizes(self, name: str, sizes: tuple) -> tuple:
        """Record ``sizes``; the merged entry (None where a dimension changed, now or before)."""
        old = self.seen.get(name)
        if type(old) is not tuple or len(old) != len(sizes):
            merged = sizes
        else:
            merged = tuple(None if o is None or o != s else s for o, s in zip(old, sizes))
        if any(m is None for m in merged):
            self.changed[name] = None
        self.seen[name] = merged
        return merged

    def merge_identity(self, name: str, obj) -> bool:
        """Record which object was found at ``name``; True once another object was seen there."""
        ident = id(obj)
        if name not in self.objects:
            self.objects[name] = ident
            return False
        old = self.objects[name]
        if old is None or old != ident:
            self.objects[name] = None
            self.changed[name] = None
            return True
        return False

    def merge_int(self, name: str, value: int) -> bool:
        """Record ``value``; True when the int changed since an earlier compile."""
        if name not in self.seen or type(self.seen[name]) is tuple:
            self.seen[name] = value
            return False
        old = self.seen[name]
        if old is not None and type(old) is not type(value):  # (an int where a float was: another kind, not a change)
            self.seen[name] = value
            return False
        if old is None or old != value:
            self.seen[name] = None
            self.changed[name] = None
            return True
        return False


def _eligible_source(source: Optional[Source]) -> bool:
    """A tensor argument, or one reached from an argument through items and attributes (a list's
    item, ``cache.layers[0].keys``, ``self.past``: a KV cache growing by a token per call), as
    torch.compile's automatic dynamic; not a module's parameter (static, as torch.compile's) nor a
    value of a class-keyed table (DictValueSource)."""
    while type(source) in (ItemSource, AttrSource):
        if type(source) is AttrSource and (source.attr == "_parameters" or source.attr.startswith("__")):
            return False
        source = source.parent
    return isinstance(source, LocalSource)


def _eligible_int_source(source: Optional[Source]) -> bool:
    """An int argument of the frame, an int in one of its closure cells (a function made anew
    around another value on every call of its maker), an int local handed to a loop-body
    function, an item or attribute of an argument (``cfg.k``, ``d["k"]``), a closure cell of a
    function argument (``fn.__closure__[0].cell_contents``), or the size of a dict keyed by
    objects found there (an LRU cache's ``len(self)``)."""
    if type(source) is ItemSource and isinstance(source.parent, LocalSource) and \
            source.parent.local_name == LOOP_BODY_LOCALS:
        return isinstance(source.key, str)
    if type(source) is AttrSource and source.attr == "cell_contents" and type(source.parent) is ItemSource:
        cells = source.parent.parent
        return type(cells) is AttrSource and cells.attr == "__closure__" and \
            isinstance(cells.parent, (LocalSource, ClosureSource))
    if type(source) is DictLenSource:  # the size of a dict keyed by objects found the same way
        source = source.parent
    # the argument itself, or reached from it through a few items and attributes (``cfg.k``,
    # ``d["lr"]``, ``sizes[0]``, ``opts.inner.k``, a bound method's ``fn.__self__.k``), as
    # torch.compile's automatic dynamic treats any int it can find again
    for _ in range(4):
        if type(source) not in (AttrSource, ItemSource):
            break
        if type(source) is AttrSource and source.attr.startswith("__") and source.attr != "__self__":
            return False
        source = source.parent
    return isinstance(source, (LocalSource, ClosureSource))


def _eligible_tensor(value: torch.Tensor) -> bool:
    return (type(value) is torch.Tensor and value.layout is torch.strided and value.dim() > 0
            and not value.is_nested)


def frame_is_static(f_locals: dict, code) -> bool:
    """mark_static on a module or class: its frames (``self`` first) keep static inputs."""
    if not code.co_varnames or code.co_argcount == 0:
        return False
    first = f_locals.get(code.co_varnames[0])
    # read statically: ``self`` may be any object, and its __getattr__ must not run
    return first is not None and inspect.getattr_static(first, STATIC_ATTR, False) is True


def _through_view_base(tsource) -> bool:
    """A torch source of a size read through a view's ``_base`` (fake tensors of views)."""
    return getattr(getattr(tsource, "base", None), "member", None) == "_base"


# ---- the tracker of one trace -----------------------------------------------------------
_FLOAT_RELATIONS = {sympy.StrictLessThan: "<", sympy.LessThan: "<=", sympy.StrictGreaterThan: ">",
                    sympy.GreaterThan: ">=", sympy.Equality: "==", sympy.Unequality: "!="}


class ShapeTracker:
    """The ShapeEnv of one trace and what is symbolic in it.

    Attributes:
        env: the ShapeEnv (the trace's FakeTensorMode holds it).
        dynamic: compile()'s ``dynamic`` (None: automatic).
        sizes: the code's FrameSizes (automatic dynamic), or None (no memory: resume of a probe).
        static: every input stays static (mark_static on the frame's module/class).
        static_floats: float arguments stay static (traced again after a refused float fact).
        inputs: (source, fake) of each input tensor with a symbolic dimension.
        marked: symbol -> (source, min, max) of mark_dynamic dimensions.
        input_sources: symbol -> the mark_dynamic size it stands for (guards name it so).
        where: index in ``env.guards`` -> the user line that added it.
        user_frame: callable -> the current innermost UserFrame (or None).
        data_dependent: an operation of the trace made a value from tensor data (``.item()``,
            ``nonzero``: unbacked symbols); the backend then sees the fake example inputs, of
            this ShapeEnv, and the graph checks the facts assumed about those values.
        data_values: symbol of such a value -> what made it and where ("Tensor.item() at
            f.py:12 in g"), for the break where Python needs it.
    """

    def __init__(self, dynamic: Optional[bool], sizes: Optional[FrameSizes], static: bool = False,
                 static_floats: bool = False):
        self.env = ShapeEnv(allow_dynamic_output_shape_ops=config.capture_dynamic_output_shape_ops,
                            allow_scalar_outputs=config.capture_scalar_outputs)
        torch_compat.skip_user_frame_lookup(self.env)
        self.dynamic = dynamic
        self.sizes = sizes
        self.static = static or dynamic is False
        self.static_floats = static_floats  # float arguments stay static (a float fact was refused)
        self.inputs: list[tuple[Source, torch.Tensor]] = []
        self.marked: dict[sympy.Symbol, tuple] = {}
        self.input_sources: dict[sympy.Symbol, Source] = {}  # symbol -> the size of the input that marked it
        self.where: dict[int, str] = {}
        self._noted = 0
        # symbols of numbers drawn from Python's random module before the graph (variables/stdlib.py):
        # a new value on every call, so nothing may be guarded on them (note() breaks instead)
        self.random_symbols: set = set()
        # symbols of float arguments (automatic dynamic): a float has no guard kind of ours, so a
        # fact about one (a branch, a specialisation) traces the frame again with static inputs
        self.float_symbols: set = set()
        self.float_values: dict = {}  # float argument symbol -> the argument's value in this trace
        self.float_comparisons: list = []  # FloatFactGuards of exact_float_comparison
        self.user_frame: Callable[[], Optional[UserFrame]] = lambda: None
        self.data_dependent = False
        self.data_values: dict[sympy.Symbol, str] = {}

    @property
    def used(self) -> bool:
        """Did anything become symbolic in this trace?"""
        return bool(self.env.backed_var_to_val)

    # ---- inputs ----------------------------------------------------------------------
    def fake_input(self, fake_mode, value: torch.Tensor, source: Source):
        """(fake, shape, stride) for an input tensor; shape/stride are the TensorSpec entries
        (ints, or the symbol's text where symbolic), None when the fake is all static."""
        dims = self._tensor_dims(value, source)
        base_context = self._marked_base_context(value)
        if dims is None and base_context is None:
            with no_grad_of_non_leaf_warning():
                return fake_mode.from_tensor(value, static_shapes=True), None, None
        if dims is None:
            dims = [None] * value.dim()
        if base_context is None and value._is_view():
            # a view (a slice of a larger tensor) with sizes of its own: its base stays static (the
            # base's symbols would be named through ``x._base``, which no guard reads)
            base_context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.STATIC] * value._base.dim())
        kinds = [DimDynamic.DYNAMIC if d is not None else DimDynamic.STATIC for d in dims]
        context = StatelessSymbolicContext(dynamic_sizes=kinds, view_base_context=base_context)
        marked = [i for i, d in enumerate(dims) if d is not None and d[0] == "dynamic"]
        saved = self.env.settings
        if marked:  # a marked 0/1 stays symbolic (the tensor's other 0/1 dims are STATIC above)
            self.env.settings = dataclasses.replace(saved, specialize_zero_one=False)
        try:
            with no_grad_of_non_leaf_warning():
                fake = fake_mode.from_tensor(value, static_shapes=False, source=TorchSource(source),
                                             symbolic_context=context)
        finally:
            self.env.settings = saved
        for i in marked:
            _, lo, hi = dims[i]
            sym = _symbol(fake.size(i))
            if sym is None:
                raise InternalError(f"mark_dynamic dimension {i} of {source.name()} did not become symbolic")
            self.marked[sym] = (TensorSizeSource(source, i), lo, hi)
            # made first for a view of this tensor read earlier, the symbol's source is the view's
            # ``_base``: guards name it by this input's own size instead
            self.input_sources.setdefault(sym, TensorSizeSource(source, i))
            if lo is not None or hi is not None:
                self._constrain(sym, lo, hi, TensorSizeSource(source, i), int(value.size(i)))
        shape = tuple(_entry(s) for s in fake.shape)
        stride = tuple(_entry(s) for s in fake.stride())
        if all(type(v) is int for v in (*shape, *stride)):
            return fake, None, None
        self.inputs.append((source, fake))
        return fake, shape, stride

    def _marked_base_context(self, value: torch.Tensor):
        """For a view whose base has mark_dynamic dimensions: the symbolic context its base's
        fake is made with (the fake mode makes a view's base first and keeps it; made static
        here, the base read later as an input of its own could not become symbolic), else None."""
        base = value._base if value._is_view() else None
        marks = getattr(base, MARKS_ATTR, None) if base is not None else None
        if not marks or self.static or not _eligible_tensor(base):
            return None
        dynamic = {i for i, m in marks.items() if m[0] == "dynamic" and 0 <= i < base.dim()}
        if not dynamic:
            return None
        return StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC if i in dynamic else DimDynamic.STATIC
                                                       for i in range(base.dim())])

    def _tensor_dims(self, value: torch.Tensor, source: Source) -> Optional[list]:
        """Per dimension: None (static) or the reason it is symbolic; None when all static."""
        if not _eligible_source(source) or not _eligible_tensor(value):
            return None
        marks = getattr(value, MARKS_ATTR, None) or {}
        sizes = tuple(int(s) for s in value.shape)
        merged = self.sizes.merge_sizes(source.name(), sizes) if self.sizes is not None else sizes
        if self.static:
            return None
        dims: list = []
        for i, size in enumerate(sizes):
            mark = marks.get(i)
            if mark is not None and mark[0] == "static":
                dims.append(None)
            elif mark is not None and mark[0] == "dynamic":
                lo, hi = mark[1], mark[2]
                if (lo is not None and size < lo) or (hi is not None and size > hi):
                    raise DynamicDimSpecialized(
                        gb.DYNAMIC_SPECIALIZED, f"{source.name()}.size({i}) is {size}, outside the range "
                        f"[{lo}, {hi}] given to mark_dynamic")
                dims.append(mark)
            elif size in (0, 1):
                dims.append(None)  # specialised (torch's rule); only a mark keeps 0/1 symbolic
            elif self.dynamic is True or (mark is not None and mark[0] == "maybe") or merged[i] is None:
                dims.append(("auto",))
            else:
                dims.append(None)
        if all(d is None for d in dims):
            return None
        # a tensor with a mark_dynamic 0/1 dimension: its other 0/1 dims stay static explicitly
        if any(d is not None and d[0] == "dynamic" for d in dims):
            dims = [d if d is not None and (d[0] == "dynamic" or sizes[i] not in (0, 1)) else None
                    for i, d in enumerate(dims)]
        return dims

    def int_symbol(self, value, source: Source):
        """A SymInt for an int argument that is symbolic in this trace (a SymFloat for a finite
        float argument that changed since an earlier compile), else None."""
        if type(value) not in (int, float) or not (_eligible_int_source(source) or (
                type(value) is float and type(source) is GlobalSource)):  # (torch.compile: global floats too)
            return None
        if type(value) is float and not math.isfinite(value):
            return None  # (nan, inf: guarded as they are)
        changed = self.sizes.merge_int(source.name(), value) if self.sizes is not None else False
        if self.static or (type(value) is float and (value in (0, 1) or self.static_floats)):
            return None
        if not (self.dynamic is True or changed):
            return None
        # an int argument is not a size: 0 and 1 stay symbolic (torch.compile's unspecialized ints),
        # so a counter or an index passing 0, 1, 2 compiles twice, not three times
        sym = self.env.create_symbol(value, TorchSource(source), DimDynamic.DYNAMIC, positive=None,
                                     do_not_specialize_zero_one=type(value) is int)
        if not isinstance(sym, sympy.Symbol):
            return None
        if type(value) is float:
            self.float_symbols.add(sym)
            self.float_values[sym] = value
            return self.env.create_symfloatnode(sym, hint=value, source=TorchSource(source))
        return self.env.create_symintnode(sym, hint=value, source=TorchSource(source))

    def refuse_float_facts(self, args) -> None:
        """An operation failed on ``args`` while one of them is a symbolic float argument: trace
        again with static inputs (CannotSymbolize) rather than break where eager would not."""
        for a in args:
            expr = getattr(getattr(a, "node", None), "expr", None) if isinstance(a, torch.SymFloat) else None
            if expr is not None and expr.free_symbols & self.float_symbols:
                raise CannotSymbolize(f"an operation on the symbolic float {expr} failed", floats=True)

    def is_float_input(self, value) -> bool:
        """Does the SymFloat ``value`` depend on a float argument made symbolic?"""
        expr = getattr(getattr(value, "node", None), "expr", None)
        return expr is not None and bool(expr.free_symbols & self.float_symbols)

    def refuse_computed_float_comparison(self, fn) -> None:
        """A comparison of a float computed from float arguments (``ta + dt > tb``) whose Python
        arithmetic the trace did not record (``python_number``), or float arithmetic sympy folded
        to a number (``s * 0.0``): the guard or the value would be sympy's form of it (``(a + b) - a``
        is ``b``; sums reassociated; ``-0.0`` is ``0``), which Python's float arithmetic can answer
        otherwise: trace again with static inputs."""
        raise CannotSymbolize(f"{getattr(fn, '__name__', fn)} of a float computed from float arguments", floats=True)

    def python_number(self, sym) -> Optional[tuple]:
        """For an input symbol: (guard text, pretty text, (source,), its value in this trace), the
        leaf of an ``arith.PyArith`` (None: not an input's)."""
        source = self.symbol_source(sym)
        if source is None:
            return None
        value = self.float_values[sym] if sym in self.float_values else self.hint(sym)
        return source.name(), guards.kinds.pretty_source(source), (source,), value

    def exact_float_comparison(self, text: str, pretty: str, sources: tuple) -> None:
        """Guard a comparison of floats computed from float arguments as Python evaluates it (the
        text repeats the traced code's own operations on the sources, in its order): the branch
        the trace took holds exactly when the guard passes."""
        self.float_comparisons.append(guards.FloatFactGuard(text, (), sources[0], pretty,
                                                            _where(self.user_frame()), sources))

    def _float_fact(self, expr, where: str):
        """The guard for a relation over float arguments (and int inputs), written only where
        Python's float arithmetic gives what the traced code computed: comparisons of the
        arguments themselves and constants (the tracer refused comparisons of computed floats),
        as ShapeEnv canonicalised them (``a - b < 0``: exact for floats too); anything else
        traces again with static inputs."""
        sources: list = []

        def term(e) -> tuple:  # (exec text, pretty text)
            if isinstance(e, sympy.Symbol):
                src = self._source_of(e)
                if src not in sources:
                    sources.append(src)
                return src.name(), guards.kinds.pretty_source(src)
            if e.is_Integer:
                return repr(int(e)), repr(int(e))
            if isinstance(e, sympy.Float) and math.isfinite(float(e)):
                return repr(float(e)), repr(float(e))
            if isinstance(e, sympy.Mul) and len(e.args) == 2 and e.args[0] == -1 and isinstance(e.args[1], sympy.Symbol):
                a, pa = term(e.args[1])
                return f"(-{a})", f"-{pa}"
            if isinstance(e, sympy.Add) and len(e.args) == 2:
                (a, pa), (b, pb) = term(e.args[0]), term(e.args[1])
                return f"({a} + {b})", f"{pa} + {pb}"
            raise CannotSymbolize(f"a fact about a float argument: {expr}", floats=True)

        def fact(e) -> tuple:
            if e is sympy.true or e is sympy.false:
                return repr(bool(e)), repr(bool(e))
            if isinstance(e, (sympy.And, sympy.Or)):
                joiner = " and " if isinstance(e, sympy.And) else " or "
                parts = [fact(a) for a in e.args]
                return joiner.join(f"({t})" for t, _ in parts), joiner.join(f"({p})" for _, p in parts)
            if isinstance(e, sympy.Not):
                t, p = fact(e.args[0])
                return f"not ({t})", f"not ({p})"
            op = _FLOAT_RELATIONS.get(type(e))
            if op is None:
                raise CannotSymbolize(f"a fact about a float argument: {expr}", floats=True)
            (a, pa), (b, pb) = term(e.args[0]), term(e.args[1])
            return f"{a} {op} {b}", f"{pa} {op} {pb}"

        text, pretty = fact(expr)
        return guards.FloatFactGuard(text, (), sources[0] if sources else None, pretty, where, tuple(sources))

    def object_changed(self, source: Source, value) -> bool:
        """Has an earlier compile of this code found another object at ``source`` (a module
        passed anew)?  Then it is guarded by its type and structure, not its identity."""
        return self.sizes is not None and self.sizes.merge_identity(source.name(), value)

    def bind_data_dependent(self, node, example, what: str) -> None:
        """After ``node``'s fake run: record which parts of ``example`` are the new values read
        from tensor data (torch's ``unbacked_bindings``, what the backend and the graph's
        runtime checks need to find them), and that ``what`` made them here."""
        try:
            bindings = compute_unbacked_bindings(self.env, example)
        except PendingUnbackedSymbolNotFound as e:  # (the pending list is cleared first)
            raise GraphBreak(gb.DATA_DEPENDENT, f"{what}() reads a value from tensor data that its result does not "
                             "hold: Python runs it") from e
        if bindings:
            node.meta["unbacked_bindings"] = bindings
            self.data_dependent = True
            where = _where(self.user_frame())
            for sym in bindings:
                self.data_values[sym] = f"{what}() at {where}" if where else f"{what}()"

    def describe_data_values(self, expr) -> str:
        """What made the values read from tensor data that ``expr`` uses ("Tensor.item() at
        f.py:12 in g: s = x.sum().item()")."""
        made = sorted({self.data_values[s] for s in getattr(expr, "free_symbols", ()) if s in self.data_values})
        return "; ".join(made) or "an earlier operation"

    def random_symbol(self, value, source: Source):
        """A SymInt / SymFloat for a number drawn from Python's random module before the graph
        runs (``value``: a stand-in of the right type; the graph reads the real draw as an input)."""
        tsource = TorchSource(source)
        sym = self.env.create_symbol(value, tsource, DimDynamic.DYNAMIC, positive=None,
                                     do_not_specialize_zero_one=True)
        if not isinstance(sym, sympy.Symbol):
            raise InternalError(f"a random draw became the constant {sym}")
        self.random_symbols.add(sym)
        if type(value) is float:
            return self.env.create_symfloatnode(sym, hint=value, source=tsource)
        return self.env.create_symintnode(sym, hint=value, source=tsource)

    def _constrain(self, sym, lo, hi, source, hint) -> None:
        old = self.env.var_to_range[sym]
        lower = max(int(old.lower), lo) if lo is not None else old.lower
        upper = min(old.upper, hi) if hi is not None else old.upper
        self.env.var_to_range[sym] = ValueRanges(lower, upper)

    # ---- during the trace ----------------------------------------------------------
    def note(self, final: bool = False) -> None:
        """After a step that may have added ShapeEnv facts: tag them with the user line, and
        refuse a mark_dynamic dimension that became a constant."""
        guards_now = len(self.env.guards)
        if guards_now == self._noted and not self.env.replacements:
            return
        frame = self.user_frame()
        where = _where(frame)
        if self.random_symbols:
            used = [sym for sym in self.random_symbols if sym in self.env.replacements] + [
                sym for i in range(self._noted, guards_now) for sym in self.env.guards[i].expr.free_symbols
                if sym in self.random_symbols]
            if used and final:
                raise InternalError("a fact about a number drawn from Python's random module was recorded "
                                    "after the trace")
            if used:
                raise GraphBreak(gb.RANDOM_VALUE_NEEDED, "the value of a number drawn from Python's random module "
                                 "is needed here" + (f" ({where})" if where else ""),
                                 user_stack=[frame] if frame is not None else [])
        for i in range(self._noted, guards_now):
            self.where[i] = where
        self._noted = guards_now
        for sym, (source, _lo, _hi) in self.marked.items():
            value = self.env.replacements.get(sym)
            if value is not None and value.is_number:
                raise DynamicDimSpecialized(
                    gb.DYNAMIC_SPECIALIZED, f"{source.pretty()} was marked dynamic (mark_dynamic), but the code "
                    f"made it the constant {int(value)}" + (f" at {where}" if where else ""),
                    user_stack=[frame] if frame is not None else [])

    # ---- guards ----------------------------------------------------------------------
    def produce_guards(self) -> list:
        """The shape guards of this trace (after the backend compiled: it may add facts)."""
        self.note(final=True)
        env = self.env
        out: list = []
        seen_text: set[str] = set()

        def add(g):
            text = g.exprs(None)[0]
            if text not in seen_text:
                seen_text.add(text)
                out.append(g)

        # every symbol of an input: specialised, equal to another expression, or its range
        for sym, tsources in env.var_to_sources.items():
            if sym in self.random_symbols:
                continue  # drawn anew on every call: never guarded (note() broke where it was needed)
            if sym in self.float_symbols:
                if env.simplify(sym) != sym or len(tsources) > 1:
                    raise CannotSymbolize(f"the float argument {sym} was specialised", floats=True)
                continue  # its type is guarded (builder); any fact about it is refused in lower()
            if sym in self.input_sources:  # (its sources through a view's _base name the same size)
                sources = [self.input_sources[sym]]
            elif all(_through_view_base(t) for t in tsources):
                # a size of a view's base that no input of the trace is (the view's own sizes are
                # static): nothing in the graph depends on it (a guard on it would not lower:
                # CannotSymbolize, static retry)
                continue
            else:
                sources = [self._ours(t) for t in tsources]
            value = env.simplify(sym)
            if value.is_number:
                where = next((self.where.get(i, "") for i, g in enumerate(env.guards)
                              if sym in g.expr.free_symbols), "")
                for src in sources:
                    add(guards.ShapeEqGuard(src, ("int", int(value)), where))
                    if self.sizes is not None and where:
                        self.sizes.made_constant[src.name()] = where
                continue
            if value != sym:
                where = next((self.where.get(i, "") for i, g in enumerate(env.guards)
                              if sym in g.expr.free_symbols), "")
                for src in sources:
                    add(guards.ShapeEqGuard(src, self.lower(value), where))
                continue
            for src in sources[1:]:
                add(guards.ShapeEqGuard(src, ("src", sources[0])))
            vr = env.var_to_range.get(sym)
            lo = hi = None
            if vr is not None:
                if vr.lower.is_Integer and not (int(vr.lower) <= 0 and not _is_int_source(sources[0])):
                    lo = int(vr.lower)
                if vr.upper.is_Integer:
                    hi = int(vr.upper)
            if lo is not None or hi is not None:
                add(guards.ShapeRangeGuard(sources[0], lo, hi))
        # strides of symbolic inputs that are expressions of sizes
        for source, fake in self.inputs:
            for i, st in enumerate(fake.stride()):
                expr = st.node.expr if isinstance(st, torch.SymInt) else None
                if expr is None:
                    continue
                expr = env.simplify(expr)
                stride_src = TensorStrideSource(source, i)
                if expr.is_number:
                    add(guards.ShapeEqGuard(stride_src, ("int", int(expr))))
                elif not (isinstance(expr, sympy.Symbol) and self._source_of(expr) == stride_src):
                    add(guards.ShapeEqGuard(stride_src, self.lower(expr)))
        # what the trace relied on
        for i, g in enumerate(env.guards):
            expr = env.simplify(g.expr)
            if expr is sympy.true:
                continue
            if expr is sympy.false:
                raise InternalError(f"shape guard {g.expr} is false for the inputs it was traced with")
            if expr.free_symbols & self.float_symbols:
                add(self._float_fact(expr, self.where.get(i, "")))
                continue
            rel = self.lower(expr)
            sources = guards.kinds.expr_sources(rel)
            add(guards.ShapeRelGuard(rel, self.where.get(i, ""), sources[0] if sources else None))
        for g in self.float_comparisons:
            add(g)
        return out

    def symbol_source(self, sym) -> Optional[Source]:
        """Our source of an input symbol (None: not an input's)."""
        try:
            return self._source_of(sym)
        except CannotSymbolize:
            return None

    def hint(self, sym) -> int:
        """The value the symbol has in the inputs the trace was made for."""
        return int(self.env.backed_var_to_val[sym])

    def _ours(self, tsource) -> Source:
        if isinstance(tsource, TorchSource):
            return tsource.ours
        base = getattr(tsource, "base", None)
        prop = getattr(getattr(tsource, "prop", None), "name", None)
        if isinstance(base, TorchSource) and prop in ("SIZE", "STRIDE"):
            kind = TensorSizeSource if prop == "SIZE" else TensorStrideSource
            return kind(base.ours, tsource.idx)
        if isinstance(base, TorchSource) and prop == "STORAGE_OFFSET":
            return TensorOffsetSource(base.ours)
        raise CannotSymbolize(f"symbol from an unknown source {tsource!r}")

    def _source_of(self, sym) -> Source:
        if sym in self.input_sources:
            return self.input_sources[sym]
        tsources = self.env.var_to_sources.get(sym)
        if not tsources:
            raise CannotSymbolize(f"symbol {sym} has no input source (data-dependent)")
        return self._ours(tsources[0])

    def lower(self, e) -> tuple:
        """A sympy expression of input symbols -> the integer-expression tree of guards/kinds.py."""
        if isinstance(e, sympy.Symbol):
            if e in self.float_symbols:
                raise CannotSymbolize(f"a fact about the float argument {e}", floats=True)
            return ("src", self._source_of(e))
        if e.is_Integer:
            return ("int", int(e))
        if e is sympy.true:
            return ("==", ("int", 1), ("int", 1))
        args = [self.lower(a) for a in e.args] if not isinstance(e, sympy.Rational) else None
        if isinstance(e, sympy.Add):
            return ("+", *args)
        if isinstance(e, sympy.Mul):
            return ("*", *args)
        if isinstance(e, (symfn.FloorDiv, symfn.CleanDiv)):
            return ("//", *args)
        if isinstance(e, (symfn.Mod, symfn.PythonMod, sympy.Mod)):
            return ("%", *args)
        if isinstance(e, (symfn.PowByNatural, sympy.Pow)) and e.args[1].is_Integer and int(e.args[1]) >= 0:
            return ("**", *args)
        if isinstance(e, (symfn.Max, sympy.Max)):
            return ("max", *args)
        if isinstance(e, (symfn.Min, sympy.Min)):
            return ("min", *args)
        if isinstance(e, sympy.Rel) and e.rel_op in guards.kinds.CMP_OPS:
            return (e.rel_op, *args)
        if isinstance(e, sympy.And):
            return ("and", *args)
        if isinstance(e, sympy.Or):
            return ("or", *args)
        if isinstance(e, sympy.Not):
            return ("not", *args)
        raise CannotSymbolize(f"no guard kind for {type(e).__name__} ({e})")


def _is_int_source(source: Source) -> bool:
    return not isinstance(source, (TensorSizeSource, TensorStrideSource, TensorOffsetSource))


def _symbol(size) -> Optional[sympy.Symbol]:
    if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
        return size.node.expr
    return None


def _entry(size):
    """A TensorSpec entry: the int, or the symbolic expression's text."""
    if isinstance(size, torch.SymInt):
        expr = size.node.expr
        return int(expr) if expr.is_number else str(expr)
    return int(size)


def _where(frame: Optional[UserFrame]) -> str:
    if frame is None:
        return ""
    text = f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}"
    return f"{text}: {frame.line}" if frame.line else text


# ---- the marks (api.py's mark_dynamic / maybe_mark_dynamic / mark_static) ----------------
def set_mark(t, dims, mark: tuple) -> None:
    """Record ``mark`` for each dimension of ``t`` in ``dims`` (an int or a list of ints)."""
    if isinstance(t, (torch.nn.Module, type)):
        if mark != ("static",):
            raise TypeError("only mark_static() applies to a module or class")
        setattr(t, STATIC_ATTR, True)
        return
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(t).__name__}")
    for d in [dims] if isinstance(dims, int) else list(dims):
        if not isinstance(d, int) or not -t.dim() <= d < t.dim():
            raise IndexError(f"dimension {d} is out of range for a tensor of {t.dim()} dims")
        marks = dict(getattr(t, MARKS_ATTR, None) or {})
        marks[d % t.dim()] = mark
        setattr(t, MARKS_ATTR, marks)
