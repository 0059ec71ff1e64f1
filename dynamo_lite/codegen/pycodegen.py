"""PyCodegen: emits abstract instructions (``bytecode.Instr``) that rebuild values.

Sources and trackers call back into a PyCodegen to load themselves
(``load_local``, ``load_global``, ``load_attr``, ``load_const``, ``call``...).
It runs in two passes over the same emission: a collecting pass records which
tensors must come out of the graph (``graph_outputs``), then the real pass
loads them from the graph's result tuple.  Trackers of mutable objects built
during the trace are rebuilt once and reused through a temporary local, so
aliasing is preserved.  Codegen never imports the interpreter loop.
Tested by tests/unit/test_codegen_roundtrip.py.
"""
from __future__ import annotations

import types
import weakref
from typing import Any, Optional

import torch
from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd

from .. import graph_breaks as gb
from .. import bytecode_compat, runtime

from ..exc import GraphBreak, SkipFrame
from ..variables.base import NullVariable, VariableTracker
from ..variables.constant import ConstantVariable
from ..variables.cells import CellVariable
from ..variables.mappings import DictVariable, key_to_var
from ..variables.sequences import ListVariable
from ..variables.sets import SetVariable
from ..variables.tensor import TensorVariable

GRAPH_OUT = "___graph_out"


def _key_tracker(key) -> VariableTracker:
    """The tracker that rebuilds a dict key (key_to_var); one that cannot be rebuilt fails codegen."""
    try:
        return key_to_var(key)
    except GraphBreak as e:
        raise CodegenFailed(f"cannot rebuild the dict key {type(key).__name__}") from e


class CodegenFailed(SkipFrame):
    """A value cannot be rebuilt by generated code: the frame runs eagerly."""

    def __init__(self, reason: str):
        super().__init__(gb.CANNOT_REBUILD, reason)


class PyCodegen:
    """Emission state of one piece of generated code.

    Attributes:
        instrs: the abstract instructions emitted so far.
        cellvars / freevars: names of the code's cell and free variables (loads
            of those names go through LOAD_DEREF).
        collecting: first pass (graph outputs not known yet).
        graph_outputs: tensor nodes the graph must return, in order.
        output_index: node -> index in the graph's result tuple.
        tempvars: id(tracker) -> temporary local holding its rebuilt value.
        lineno: line number given to emitted instructions.
    """

    def __init__(self, code: types.CodeType, collecting: bool,
                 output_index: Optional[dict] = None, temp_prefix: str = "___tmp"):
        self.instrs: list[Any] = []
        self.cellvars = set(code.co_cellvars)
        self.freevars = set(code.co_freevars)
        self.collecting = collecting
        self.graph_outputs: list[torch.fx.Node] = []
        self.output_index: dict = dict(output_index or {})
        self.tempvars: dict[int, str] = {}
        self._keepalive: list[VariableTracker] = []
        self._in_progress: set[int] = set()
        self._temp_prefix = temp_prefix
        self._temp_count = 0
        self.lineno = code.co_firstlineno
        # collecting pass: trackers rebuilt by loading their source, in first-use order
        # (see preload_sources); id -> tracker
        self.source_loads: dict[int, VariableTracker] = {}
        self.closure_loads: set[str] = set()  # cells pushed as cell objects (LOAD_CLOSURE)
        # objects the trace modelled with a twin made at trace time, which generated code makes
        # anew before the graph (a namedtuple class made in the frame): id(twin) -> (twin, Source
        # of the run-time object); ``load_const`` of a twin loads the run-time object
        self.constant_sources: dict[int, tuple] = {}

    # ---- raw emission -------------------------------------------------------
    def emit(self, opname: str, arg: Any = None) -> None:
        if arg is None and opname not in ("LOAD_CONST",):
            self.instrs.append(Instr(opname, lineno=self.lineno))
        else:
            self.instrs.append(Instr(opname, arg, lineno=self.lineno))

    def label(self, label: Label) -> None:
        self.instrs.append(label)

    def push_null(self) -> None:
        self.instrs.extend(bytecode_compat.push_null(self.lineno))

    def jump(self, label: Label, backward: bool = False) -> None:
        self.instrs.extend(bytecode_compat.jump(label, backward=backward, lineno=self.lineno))

    def jump_if(self, truth: bool, label: Label, pop: bool = True) -> None:
        """Jump forward to ``label`` when TOS's truth is ``truth`` (see bytecode_compat.jump_if)."""
        self.instrs.extend(bytecode_compat.jump_if(truth, label, pop, lineno=self.lineno))

    @property
    def temp_prefix(self) -> str:
        return self._temp_prefix

    def new_temp(self) -> str:
        self._temp_count += 1
        return f"{self._temp_prefix}{self._temp_count}"

    # ---- loads and stores --------------------------------------------------
    def load_const(self, value: Any) -> None:
        made = self.constant_sources.get(id(value))
        if made is not None and made[0] is value:
            made[1].reconstruct(self)
            return
        if type(value) is slice:  # slices are unhashable in 3.11: as a constant they make the code unhashable
            for part in (value.start, value.stop, value.step):
                self.load_const(part)
            self.emit("BUILD_SLICE", 3)
            return
        if _needs_holder(value):
            # an unhashable constant (a mappingproxy, a dict) would make the code object
            # unhashable, and a user __hash__ would run: load it from a holder instead
            self.instrs.append(Instr("LOAD_CONST", _ConstHolder(value), lineno=self.lineno))
            self.load_attr("value")
            return
        self.instrs.append(Instr("LOAD_CONST", value, lineno=self.lineno))

    def load_fast(self, name: str) -> None:
        self.emit("LOAD_FAST", name)

    def store_fast(self, name: str) -> None:
        self.emit("STORE_FAST", name)

    def _cell(self, name: str):
        if name in self.cellvars:
            return CellVar(name)
        if name in self.freevars:
            return FreeVar(name)
        return None

    def load_local(self, name: str) -> None:
        cell = self._cell(name)
        if cell is not None:
            self.emit("LOAD_DEREF", cell)
        else:
            self.emit("LOAD_FAST", name)

    def store_local(self, name: str) -> None:
        cell = self._cell(name)
        if cell is not None:
            self.emit("STORE_DEREF", cell)
        else:
            self.emit("STORE_FAST", name)

    def load_deref(self, name: str) -> None:
        self.emit("LOAD_DEREF", self._cell(name))

    def store_deref(self, name: str) -> None:
        self.emit("STORE_DEREF", self._cell(name))

    def emit_load_closure(self, name: str) -> None:
        self.closure_loads.add(name)
        self.instrs.extend(bytecode_compat.load_closure(self._cell(name), lineno=self.lineno))

    def load_global(self, name: str) -> None:
        self.instrs.extend(bytecode_compat.load_global(name, lineno=self.lineno))

    def load_attr(self, name: str) -> None:
        self.instrs.extend(bytecode_compat.load_attr(name, lineno=self.lineno))

    def load_method(self, name: str) -> None:
        self.instrs.extend(bytecode_compat.load_method(name, lineno=self.lineno))

    def load_callable(self, obj: Any) -> None:
        """Push a constant callable with the NULL of a call (start of a call sequence)."""
        self.null_before_callable()
        self.load_const(obj)
        self.null_after_callable()

    def null_before_callable(self) -> None:
        """Before pushing a callable (not a constant: ``load_callable``) for ``call``."""
        self.instrs.extend(bytecode_compat.null_before_callable(self.lineno))

    def null_after_callable(self) -> None:
        """After pushing a callable for ``call``."""
        self.instrs.extend(bytecode_compat.null_after_callable(self.lineno))

    def call(self, nargs: int, kwnames: tuple = ()) -> None:
        """Call: the stack holds the callable with its NULL (``load_callable``), then nargs
        arguments (the last len(kwnames) by keyword)."""
        self.instrs.extend(bytecode_compat.call(nargs, tuple(kwnames), lineno=self.lineno))

    def call_method(self, nargs: int) -> None:
        """Call after ``load_method``."""
        self.instrs.extend(bytecode_compat.call_method(nargs, lineno=self.lineno))

    # ---- trackers -----------------------------------------------------------
    def reconstruct(self, var: VariableTracker) -> None:
        name = self.tempvars.get(id(var))
        if name is not None:
            self.load_fast(name)
            return
        if isinstance(var, NullVariable):
            self.push_null()
            return
        if var.source is None and var.mutable_local:
            if id(var) in self._in_progress:
                raise CodegenFailed(f"{var.describe()} contains itself; cannot rebuild it")
            self._in_progress.add(id(var))
            try:
                var.reconstruct(self)
            except CodegenFailed:
                raise
            except Exception as e:  # GraphBreak from a tracker that cannot rebuild itself
                raise CodegenFailed(f"cannot rebuild {var.describe()}: {e}") from e
            finally:
                self._in_progress.discard(id(var))
            name = self.new_temp()
            self.emit("COPY", 1)
            self.store_fast(name)
            self.tempvars[id(var)] = name
            self._keepalive.append(var)
            return
        if self.collecting and var.source is not None and _loads_source(var):
            self.source_loads.setdefault(id(var), var)
        try:
            var.reconstruct(self)
        except CodegenFailed:
            raise
        except Exception as e:  # GraphBreak from a tracker that cannot rebuild itself
            raise CodegenFailed(f"cannot rebuild {var.describe()}: {e}") from e

    def preload_sources(self, trackers) -> None:
        """Load each tracker's source now into a temporary that later rebuilds use.

        Replayed side effects and restored locals may overwrite a source
        (``o.a = o.b``, ``x, y = y, x``) before a value read from it is rebuilt;
        right after the graph call every source still holds what the trace read.
        """
        for var in trackers:
            if id(var) in self.tempvars:
                continue
            var.source.reconstruct(self)
            name = self.new_temp()
            self.store_fast(name)
            self.tempvars[id(var)] = name
            self._keepalive.append(var)

    def reconstruct_tensor(self, var) -> None:
        node = var.node
        if var.source is not None and node.op == "placeholder":
            var.source.reconstruct(self)
            return
        index = self.output_index.get(node)
        if index is None:
            if not self.collecting:
                raise CodegenFailed(f"tensor {node.name} is not a graph output")
            index = len(self.graph_outputs)
            self.output_index[node] = index
            self.graph_outputs.append(node)
        self.load_fast(GRAPH_OUT)
        self.load_const(index)
        self.emit("BINARY_SUBSCR")

    def reconstruct_contents(self, var) -> None:
        """Build a fresh list/dict/set with the current items of a tracked container."""
        if isinstance(var, ListVariable):
            for item in var.items:
                self.reconstruct(item)
            self.emit("BUILD_LIST", len(var.items))
        elif isinstance(var, DictVariable):
            for k, v in var.items.items():
                self.reconstruct(_key_tracker(k))
                self.reconstruct(v)
            self.emit("BUILD_MAP", len(var.items))
        elif isinstance(var, SetVariable):
            for v in var.items.values():
                self.reconstruct(v)
            self.emit("BUILD_SET", len(var.items))
        else:
            raise CodegenFailed(f"cannot rebuild contents of {var.describe()}")

    def blank_object(self, var) -> str:
        """``object.__new__(type)`` of a tracker made in the trace, in a temporary that every later
        ``reconstruct(var)`` loads (its attributes may refer to it: a bound method of it, a
        list holding it); returns the temporary's name.  Nothing is left on the stack."""
        self.load_callable(runtime.blank)
        self.load_const(var.value_type)
        self.call(1)
        name = self.new_temp()
        self.store_fast(name)
        self.tempvars[id(var)] = name
        self._keepalive.append(var)
        return name

    def reconstruct_new_object(self, var) -> None:
        attrs = self.side_effects.new_object_attrs(var)
        self.load_callable(runtime.fill_object)
        self.load_fast(self.blank_object(var))
        for name, value in attrs.items():
            self.load_const(name)
            self.reconstruct(value)
        self.emit("BUILD_MAP", len(attrs))
        self.call(2)

    def make_sibling_function(self, new_code: types.CodeType, original: types.CodeType) -> None:
        """Push a function of ``new_code`` sharing the frame's cells (resume functions, loop bodies).

        ``new_code``'s free variables are ``original``'s cell then free variables.
        """
        closure = list(original.co_cellvars) + list(original.co_freevars)
        for name in closure:
            self.emit_load_closure(name)
        if closure:
            self.emit("BUILD_TUPLE", len(closure))
        self.load_const(new_code)
        self.instrs.extend(bytecode_compat.make_function(closure=bool(closure), lineno=self.lineno))

    def store_locals_from_dict(self, dict_local: str, names) -> None:
        """``name = d[name]`` for each name present in the dict held by local ``dict_local``."""
        for name in names:
            skip = Label()
            self.load_const(name)
            self.load_fast(dict_local)
            self.emit("CONTAINS_OP", 0)
            self.jump_if(False, skip)
            self.load_fast(dict_local)
            self.load_const(name)
            self.emit("BINARY_SUBSCR")
            self.store_fast(name)
            self.label(skip)

    def make_function(self, fn_var) -> None:
        if fn_var.foreign_globals:
            self._make_function_with_globals(fn_var)
            return
        if fn_var.defaults is not None:
            self.reconstruct(fn_var.defaults)
        if fn_var.kwdefaults is not None:
            self.reconstruct(fn_var.kwdefaults)
        if fn_var.closure:
            self._closure_tuple(fn_var)
        self.load_const(fn_var.code)
        self.instrs.extend(bytecode_compat.make_function(
            defaults=fn_var.defaults is not None, kwdefaults=fn_var.kwdefaults is not None,
            closure=bool(fn_var.closure), lineno=self.lineno))

    def _closure_tuple(self, fn_var) -> None:
        """The tuple of cells a made function closes over, each cell itself (not its contents)."""
        for cell in fn_var.closure:
            if not cell.can_reconstruct_as_cell():
                raise CodegenFailed("a function closing over a variable of an inlined call")
            cell.reconstruct_as_cell(self)
        self.emit("BUILD_TUPLE", len(fn_var.closure))

    def _make_function_with_globals(self, fn_var) -> None:
        """``types.FunctionType(code, f_globals, None, defaults, closure)`` (+ ``__kwdefaults__``):
        a function made in an inlined call of another module keeps that module's globals."""
        self.load_callable(types.FunctionType)
        self.load_const(fn_var.code)
        self.load_const(fn_var.f_globals)
        self.load_const(None)
        if fn_var.defaults is not None:
            self.reconstruct(fn_var.defaults)
        else:
            self.load_const(None)
        if fn_var.closure:
            self._closure_tuple(fn_var)
        else:
            self.load_const(None)
        self.call(5)
        if fn_var.kwdefaults is not None:  # fn.__kwdefaults__ = {...}, keeping fn on the stack
            self.emit("COPY", 1)
            self.reconstruct(fn_var.kwdefaults)
            self.emit("SWAP", 2)
            self.emit("STORE_ATTR", "__kwdefaults__")


def _loads_source(var) -> bool:
    """Whether rebuilding ``var`` (which has a source) loads the value from its source."""
    if isinstance(var, ConstantVariable):
        return False  # a constant is rebuilt by LOAD_CONST
    if isinstance(var, CellVariable):
        return False  # the cell object itself (LOAD_CLOSURE); its source names the contents
    if isinstance(var, TensorVariable):
        return var.node.op == "placeholder"
    return True


# id(code) -> (weak reference to code, its items as a tuple): disassembling a code object with
# the `bytecode` package is the largest part of building code; a frame, its resume functions and
# loop bodies, and every recompile of them disassemble the same code again
_ORIGINAL: dict = {}


def original_items(code: types.CodeType) -> tuple:
    """The items of ``original_instructions(code)``, shared: read them, never change them (a
    ``FlowInfo``, a scan of the prologue).  Cached per code object."""
    hit = _ORIGINAL.get(id(code))
    if hit is not None and hit[0]() is code:
        return hit[1]
    items = tuple(_disassemble(code))
    if len(_ORIGINAL) > 2048:
        _ORIGINAL.clear()
    key = id(code)

    def forget(ref, key=key):  # the code object died: drop its entry (unless the id was reused)
        entry = _ORIGINAL.get(key)
        if entry is not None and entry[0] is ref:
            del _ORIGINAL[key]

    _ORIGINAL[key] = (weakref.ref(code, forget), items)
    return items


def original_instructions(code: types.CodeType) -> list:
    """``Bytecode.from_code(code)`` with every TryBegin carrying the original handler depth: a new
    list of new items each call (rewrites change them), copied from the cached disassembly.

    Generated code enters the original bytecode in the middle (after a graph
    break), so the `bytecode` package cannot recompute exception-handler
    depths by following control flow from the entry; the original exception
    table already has them.
    """
    return _fresh_copy(original_items(code))


def _disassemble(code: types.CodeType) -> list:
    items = bytecode_compat.mark_cell_loads(list(Bytecode.from_code(code)), code)
    begins = [x for x in items if isinstance(x, TryBegin)]
    entries = bytecode_compat.exception_table(code)
    if len(begins) != len(entries):
        raise CodegenFailed("exception table does not map onto the bytecode's try blocks")
    for tb, (_start, _end, _target, depth, lasti) in zip(begins, entries):
        if bool(tb.push_lasti) != bool(lasti):
            raise CodegenFailed("exception table does not map onto the bytecode's try blocks")
        tb.stack_depth = depth
    return items


def _fresh_copy(items) -> list:
    """A copy of ``items`` sharing no mutable object with it: new instructions, labels and try
    blocks, wired to each other as the originals are (``Instr.copy`` is a slot copy; about 15 times
    cheaper than disassembling again)."""
    labels = {x: Label() for x in items if type(x) is Label}
    begins: dict = {}
    out: list = []
    for x in items:
        kind = type(x)
        if kind is Instr:
            y = x.copy()
            if x.has_jump():
                y.arg = labels[x.arg]
            out.append(y)
        elif kind is Label:
            out.append(labels[x])
        elif kind is TryBegin:
            y = TryBegin(labels[x.target], x.push_lasti, x.stack_depth)
            begins[x] = y
            out.append(y)
        elif kind is TryEnd:
            out.append(TryEnd(begins[x.entry]))
        else:
            out.append(x)  # (SetLineno: the disassembly makes none)
    return out


def stack_size(items, flags: int = 0) -> Optional[int]:
    """The largest value-stack depth ``items`` (instructions, labels, try blocks whose
    ``stack_depth`` is set) of code with ``flags`` reach, following jumps from the start
    (bytecode_compat.entry_stack_depth) and from every
    handler at its try block's depth (+ the exception, + lasti); None when the flow is not
    consistent (two depths at one instruction, a negative depth) or a depth is unknown: the
    caller lets the `bytecode` package work it out.

    One linear walk, with no control-flow graph: what ``Bytecode.to_code`` would compute through
    its ControlFlowGraph, at a fraction of the cost (tests/unit/test_codegen_cost.py compares them).
    """
    label_at = {}
    work = [(0, bytecode_compat.entry_stack_depth(flags))]
    for i, x in enumerate(items):
        kind = type(x)
        if kind is Label:
            label_at[x] = i
        elif kind is TryBegin:
            if not isinstance(x.stack_depth, int):
                return None
            work.append((x.target, x.stack_depth + 1 + int(bool(x.push_lasti))))
    work = [(w if type(w) is int else label_at[w], d) for w, d in work]
    n = len(items)
    depth: list = [None] * n
    top = 0
    while work:
        i, d = work.pop()
        top = max(top, d)  # (a handler starts deeper than its try block: the exception is pushed)
        while i < n:
            seen = depth[i]
            if seen is not None:
                if seen != d:
                    return None
                break
            depth[i] = d
            x = items[i]
            i += 1
            if type(x) is not Instr:
                continue
            if x.has_jump():
                taken = d + x.stack_effect(jump=True)
                if taken < 0:
                    return None
                top = max(top, taken)
                work.append((label_at[x.arg], taken))
                if x.is_final():
                    break
                d += x.stack_effect(jump=False)
            elif x.is_final():
                break
            else:
                d += x.stack_effect()
            if d < 0:
                return None
            top = max(top, d)
    return top


def assemble(bc, original: types.CodeType, n_generated: int) -> types.CodeType:
    """Bytecode (made from ``original_instructions``) -> code object.

    Exception-handler depths are the original's (see original_instructions);
    the stack size is ``stack_size``'s (no control-flow graph), else computed by the `bytecode`
    package when it can follow the flow, else bounded from above: the original's plus two slots
    per generated instruction.  Handlers of the original code are reached with the original
    depths: the size is never below the original frame's own.
    """
    size = stack_size(bc, bc.flags)
    if size is not None:
        return bc.to_code(stacksize=max(size, original.co_stacksize), compute_exception_stack_depths=False)
    try:
        code = bc.to_code(compute_exception_stack_depths=False)
    except RuntimeError:
        return bc.to_code(stacksize=original.co_stacksize + 2 * n_generated + 2,
                          compute_exception_stack_depths=False)
    if code.co_stacksize < original.co_stacksize:
        code = code.replace(co_stacksize=original.co_stacksize)
    return code


def _needs_holder(value) -> bool:
    """Would ``value`` as a code constant be unhashable, or be hashed by user code?"""
    t = type(value)
    if t.__hash__ is None or t is types.MappingProxyType:
        # (3.12's mappingproxy hashes its mapping: a dict's raises, a user mapping's runs code)
        return True
    if t in (tuple, frozenset):
        try:
            hash(value)
        except TypeError:
            return True
        return False
    return isinstance(t.__hash__, types.FunctionType)  # a Python-level __hash__


class _ConstHolder:
    """An unhashable constant of generated code (see PyCodegen.load_const)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"<constant {type(self.value).__name__}>"
