"""Side effects: mutations the trace made to the world outside the graph.

The graph holds only tensor work.  Everything else the frame did to objects
that outlive it (list/dict/set contents, object and module attributes,
globals, closure cells) is logged here during tracing and replayed by
generated code after the graph runs, in the order it happened, so that
compiled and eager runs leave the world in the same state.
Objects created during the trace are rebuilt only if they escape.  A container's new contents
replace its old ones (``lst[:] = [...]``, ``d.clear(); d.update(...)``), except a list from
outside that was only appended to, never read (``InputListVariable``): ``lst.extend(new)``,
and such a deque (``InputDequeVariable``): ``extend`` / ``extendleft`` of each run of appends.

Replayed calls (``print``, logging calls, ``warnings.warn``: variables/replayed.py decides
which) are logged here too, in the same order as the mutations, and generated code makes the
real call at its place in that order, after the graph.  A replayed call receives snapshots
of its constant arguments and the graph's output values for its tensor arguments; it runs in
a *trampoline*, a one-line function whose code has the file, name and line of the user's
call, so logging's ``findCaller`` and tracebacks see the user's line.  Its order with the
mutations is exact: an object mutated both before and after a replayed call would be
replayed with its final state before the call, so that second mutation breaks the graph
(``note_barrier``).  (Objects made in the trace reach the call only through its arguments.)
Tested by tests/semantics/test_side_effects.py and tests/semantics/test_replayed_calls.py.
"""
from __future__ import annotations

import dataclasses
import itertools
import types
from typing import Any, Optional

from .. import graph_breaks as gb
from .. import _C, cache
from ..exc import GraphBreak, InternalError
from ..variables.base import VariableTracker
from ..variables.mappings import DictVariable, ObjectKeyedDictVariable
from ..variables.sequences import DequeVariable, InputDequeVariable, InputListVariable, ListVariable
from ..variables.sets import SetVariable


def _call_with_items(cg, var: VariableTracker, method: str, items: list) -> None:
    """Code for ``var.method((item, ...))`` (its result dropped)."""
    cg.reconstruct(var)
    cg.load_method(method)
    for item in items:
        cg.reconstruct(item)
    cg.emit("BUILD_TUPLE", len(items))
    cg.call_method(1)
    cg.emit("POP_TOP")


def _check_replayable(var: VariableTracker) -> None:
    """A change to a real object the trace has no source for breaks: it could not be replayed
    (the graph would drop it)."""
    if getattr(var, "unreplayable", False) and var.source is None:
        raise GraphBreak(gb.SIDE_EFFECT, f"changing a {var.describe()} the trace reached by no path it can load "
                         "again (a class attribute, the closure of a function read without a source): the "
                         "change could not be replayed on the real object")


@dataclasses.dataclass
class ReplayedCall:
    """One call generated code makes after the graph: ``fn(*args, **kwargs)``.

    ``args``/``kwargs`` hold trackers (constants, tensors, sourced objects) whose values were
    fixed when the call was traced.  ``filename``/``lineno``/``name``/``f_globals`` are the
    user frame that made the call (the trampoline's).  ``after_node`` is the last graph node
    then (None: none yet) and ``step`` the root step of the call: if the nodes recorded after
    it leave traces (in-place ops, random numbers), a call that raises would not be exact, so
    codegen restarts the trace to break at ``step``; ``user_stack`` is where it was made."""

    fn: Any
    args: list
    kwargs: dict
    filename: str
    lineno: int
    name: str
    f_globals: dict
    after_node: Any
    step: int
    what: str  # "print()", "Logger.info()": for break reasons
    user_stack: list


def _trampoline_template(___fn, ___args, ___kwargs): return ___fn(*___args, **___kwargs)  # noqa: E704


def trampoline(filename: str, lineno: int, name: str, f_globals: dict):
    """A function calling ``fn(*args, **kwargs)`` from a frame that looks like the user's:
    its code has ``filename``, ``name`` and all of its instructions on ``lineno``.  It runs
    with the hook off (what it calls, a tensor's repr or a user's log handler, is not traced).
    One per replayed call: it lives as long as the generated code that calls it."""
    code = _trampoline_template.__code__.replace(co_filename=filename, co_firstlineno=max(lineno, 1),
                                                 co_name=name, co_qualname=name)
    cache.add_generated(code)  # never captured itself
    return _C.CallWithHookOff(types.FunctionType(code, f_globals, name))


class SideEffects:
    """The mutation log of one trace (shared by the root and inlined frames).

    Attributes:
        attr_values: id(obj tracker) -> {attr name: value tracker}, the current
            value of every attribute written during the trace.
        attr_objects: id(obj tracker) -> obj tracker, in first-write order.
        mutated: id(container tracker) -> tracker, for containers with a source
            whose contents changed.
        global_stores: global name -> value tracker.
        cell_stores: id(cell tracker) -> (cell tracker, value tracker), for
            cells outside the trace (the frame's free variables, real cells).
        new_objects: objects created during the trace, in creation order.
        classes: id(class) -> the tracker of a real class whose attributes the trace wrote
            (the first one used: a class reached by two paths has two trackers).
    """

    def __init__(self):
        self.attr_values: dict[int, dict[str, VariableTracker]] = {}
        self.attr_objects: dict[int, VariableTracker] = {}
        # (id(obj), name) of stores made by ``object.__setattr__`` on an object whose class has its
        # own __setattr__: replayed by that call, not by STORE_ATTR (which would run it again)
        self.raw_attr_stores: set[tuple[int, str]] = set()
        self.mutated: dict[int, VariableTracker] = {}
        self.global_stores: dict[str, VariableTracker] = {}
        self.cell_stores: dict[int, tuple] = {}
        self.new_objects: list[VariableTracker] = []
        self.classes: dict[int, VariableTracker] = {}
        self.order: list[tuple[str, int]] = []  # ("attr"|"container"|"global"|"cell"|"call", key)
        self._noted: dict = {}  # entry of order -> number of replayed calls logged before it
        self.calls: list[ReplayedCall] = []
        # set by OutputGraph: does any graph node after this one (None: any node) leave traces?
        self.leaves_traces_after = lambda node: True
        # set by OutputGraph: may a graph op after this node raise where the frame cannot be run
        # again (an earlier node left traces)?  A replayed call before it would then be lost
        self.unrecoverable_after = lambda node: True
        # bumped by every mutation, of traced-only objects too (generator inlining checks it)
        self.version = 0
        # lists that see every mutation and every read this log answers, as events (a block call being
        # recorded as a template: variables/repeated_blocks.py): ("mutate", tracker), ("store", object
        # tracker, name), ("external", kind), ("read_attr", object tracker, name, value), ("read_global", name, value),
        # ("identity", object tracker, dict tracker used as a key in or None)
        self.recorders: list[list] = []

    def _record(self, *event) -> None:
        for recorder in self.recorders:
            recorder.append(event)

    def note_identity(self, obj: VariableTracker, container: Optional[VariableTracker] = None) -> None:
        """The trace used ``id()`` or the identity hash of a real object as a constant (as a key
        of the dict tracker ``container``, or otherwise: None)."""
        if self.recorders:
            self._record("identity", obj, container)

    def is_empty(self) -> bool:
        return not (self.attr_objects or self.mutated or self.global_stores or self.cell_stores or self.calls)

    def _note(self, kind: str, key) -> None:
        entry = (kind, key)
        calls_before = self._noted.get(entry)
        if calls_before is None:
            self._noted[entry] = len(self.calls)
            self.order.append(entry)
        elif calls_before < len(self.calls):
            # replayed with its final state before that call: the call would see this mutation
            what = self.calls[calls_before].what
            raise GraphBreak(gb.SIDE_EFFECT, f"state changed both before and after {what}, which is replayed "
                             "after the graph: the graph ends here so the replay keeps eager's order")

    def record_call(self, **fields) -> None:
        """Log a call that generated code makes after the graph, in order with the mutations
        (``fields``: those of ReplayedCall)."""
        self.version += 1
        self._record("external", "call")
        self.calls.append(ReplayedCall(**fields))
        self.order.append(("call", len(self.calls) - 1))

    # ---- recording ----------------------------------------------------------
    def mutate(self, var: VariableTracker) -> None:
        _check_replayable(var)
        self.version += 1
        self._record("mutate", var)
        if var.source is not None:
            self.mutated[id(var)] = var
            self._note("container", id(var))

    def store_attr(self, obj: VariableTracker, name: str, value: VariableTracker, raw: bool = False) -> None:
        """``obj.name = value`` (``raw``: by ``object.__setattr__``, bypassing the class's own)."""
        _check_replayable(obj)
        self.version += 1
        if raw:
            self.raw_attr_stores.add((id(obj), name))
        else:
            self.raw_attr_stores.discard((id(obj), name))
        self._record("store", obj, name)
        self.attr_objects.setdefault(id(obj), obj)
        self.attr_values.setdefault(id(obj), {})[name] = value
        if obj.source is not None:
            self._note("attr", id(obj))

    def load_attr(self, obj: VariableTracker, name: str) -> Optional[VariableTracker]:
        value = self.attr_values.get(id(obj), {}).get(name)
        if value is not None and self.recorders:
            self._record("read_attr", obj, name, value)
        return value

    def store_class_attr(self, cls_var: VariableTracker, name: str, value: VariableTracker) -> None:
        """``cls.name = value`` on a real class (``cls_var.value``; replayed by STORE_ATTR)."""
        self.store_attr(self.classes.setdefault(id(cls_var.value), cls_var), name, value)

    def load_class_attr(self, cls: type, name: str) -> Optional[VariableTracker]:
        """The value the trace stored as ``name`` on ``cls`` or on the class of its MRO that
        lookup finds first (None: the real classes answer)."""
        if not self.classes:
            return None
        for klass in type.__dict__["__mro__"].__get__(cls):
            var = self.classes.get(id(klass))
            if var is not None:
                value = self.load_attr(var, name)
                if value is not None:
                    return value
            if name in type.__dict__["__dict__"].__get__(klass):
                return None
        return None

    def delete_new_object_attr(self, obj: VariableTracker, name: str) -> bool:
        """``del obj.name`` of an object made in the trace (nothing to replay: it is rebuilt
        without the attribute); False when it has no such attribute."""
        attrs = self.attr_values.get(id(obj), {})
        if name not in attrs:
            return False
        self.version += 1
        self._record("store", obj, name)
        del attrs[name]
        return True

    def is_raw_store(self, obj: VariableTracker, name: str) -> bool:
        """Was ``obj.name`` last written by ``object.__setattr__`` (bypassing the class's own)?"""
        return (id(obj), name) in self.raw_attr_stores

    def new_object_attrs(self, obj: VariableTracker) -> dict[str, VariableTracker]:
        return self.attr_values.get(id(obj), {})

    def track_new_object(self, obj: VariableTracker) -> None:
        self.new_objects.append(obj)

    def store_global(self, name: str, value: VariableTracker) -> None:
        self.version += 1
        self._record("external", "global")
        self.global_stores[name] = value
        self._note("global", name)

    def load_global(self, name: str) -> Optional[VariableTracker]:
        value = self.global_stores.get(name)
        if value is not None and self.recorders:
            self._record("read_global", name, value)
        return value

    def store_cell(self, cell, value: VariableTracker) -> None:
        self.version += 1
        self._record("external", "cell")
        self.cell_stores[id(cell)] = (cell, value)
        self._note("cell", id(cell))

    def describe(self) -> list[str]:
        out = []
        for kind, key in self.order:
            if kind == "container":
                out.append(f"mutate {self.mutated[key].source.name()}")
            elif kind == "attr":
                obj = self.attr_objects[key]
                for name in self.attr_values[key]:
                    out.append(f"setattr {obj.source.name()}.{name}")
            elif kind == "global":
                out.append(f"global {key}")
            elif kind == "call":
                out.append(f"call {self.calls[key].what}")
            else:
                out.append(f"cell {self.cell_stores[key][0].name}")
        return out

    # ---- replay -------------------------------------------------------------
    def codegen(self, cg) -> None:
        """Emit code that applies every logged effect to the real objects."""
        for kind, key in self.order:
            if kind == "container":
                var = self.mutated[key]
                # the targets are rebuilt through cg.reconstruct, which uses the value
                # preloaded before the replay when an earlier effect may overwrite the source
                if isinstance(var, InputListVariable) and not var.realized:
                    # appends to a list whose entry contents the trace never read: real.extend(...)
                    _call_with_items(cg, var, "extend", var.appended)
                elif isinstance(var, InputDequeVariable) and not var.realized:
                    # appends at either end of a deque the trace never read: the same items
                    # through extend / extendleft, in order (the real deque applies its maxlen)
                    for name, run in itertools.groupby(var.pending, key=lambda p: p[0]):
                        _call_with_items(cg, var, name.replace("append", "extend"), [item for _, item in run])
                elif isinstance(var, ObjectKeyedDictVariable):
                    var.replay(cg)  # dict.__setitem__ / __delitem__ of each write, in order
                elif isinstance(var, ListVariable):
                    cg.reconstruct_contents(var)
                    cg.reconstruct(var)
                    cg.load_const(None)
                    cg.load_const(None)
                    cg.emit("BUILD_SLICE", 2)
                    cg.emit("STORE_SUBSCR")
                elif isinstance(var, DequeVariable):  # d.clear(); d.extend([...]) (maxlen is the deque's own)
                    cg.reconstruct(var)
                    cg.load_method("clear")
                    cg.call_method(0)
                    cg.emit("POP_TOP")
                    _call_with_items(cg, var, "extend", var.items)
                elif isinstance(var, SetVariable) and var.replay_log is not None:
                    # the logged calls, in order: the real table goes through what eager's did
                    for op, item in var.replay_log:
                        cg.reconstruct(var)
                        cg.load_method(op)
                        if item is not None:
                            cg.reconstruct(item)
                        cg.call_method(0 if item is None else 1)
                        cg.emit("POP_TOP")
                elif isinstance(var, (DictVariable, SetVariable)):
                    cg.reconstruct_contents(var)
                    tmp = cg.new_temp()
                    cg.store_fast(tmp)
                    cg.reconstruct(var)
                    cg.load_method("clear")
                    cg.call_method(0)
                    cg.emit("POP_TOP")
                    cg.reconstruct(var)
                    cg.load_method("update")
                    cg.load_fast(tmp)
                    cg.call_method(1)
                    cg.emit("POP_TOP")
                else:
                    raise InternalError(f"the side-effect log holds a mutated {var.describe()}, which it cannot replay")
            elif kind == "attr":
                obj = self.attr_objects[key]
                for name, value in self.attr_values[key].items():
                    if (key, name) in self.raw_attr_stores:  # object.__setattr__(obj, name, value)
                        cg.load_callable(object.__setattr__)
                        cg.reconstruct(obj)
                        cg.load_const(name)
                        cg.reconstruct(value)
                        cg.call(3)
                        cg.emit("POP_TOP")
                        continue
                    cg.reconstruct(value)
                    cg.reconstruct(obj)
                    cg.emit("STORE_ATTR", name)
            elif kind == "global":
                cg.reconstruct(self.global_stores[key])
                cg.emit("STORE_GLOBAL", key)
            elif kind == "call":
                self._codegen_call(cg, self.calls[key])
            else:
                cell, value = self.cell_stores[key]
                cg.reconstruct(value)
                if cell.kind == "root":
                    cg.store_deref(cell.name)
                else:
                    cell.source.reconstruct(cg)
                    cg.emit("STORE_ATTR", "cell_contents")

    def _codegen_call(self, cg, call: ReplayedCall) -> None:
        if cg.collecting:
            why = None
            if self.leaves_traces_after(call.after_node):
                # if the call raises, the graph ran ops after it that leave traces (in-place, random)
                why = ("is followed by graph operations that change tensors in place or draw random numbers: "
                       "replaying it after the graph would not be exact if it raised")
            elif self.unrecoverable_after(call.after_node):
                # an op after it may raise in a graph that cannot be run again (an in-place op or a
                # random draw came first): the replay after the graph would never happen
                why = ("is followed by graph operations that may raise, in a graph that changes tensors in place "
                       "or draws random numbers: the call would be lost if they raised")
            if why is not None:
                brk = GraphBreak(gb.SIDE_EFFECT, f"{call.what} {why}")
                brk.restart_step = call.step
                brk.user_stack = list(call.user_stack)
                raise ReplayNotExact(brk)
        cg.load_callable(trampoline(call.filename, call.lineno, call.name, call.f_globals))
        cg.load_const(call.fn)
        for a in call.args:
            cg.reconstruct(a)
        cg.emit("BUILD_TUPLE", len(call.args))
        for k, v in call.kwargs.items():
            cg.load_const(k)
            cg.reconstruct(v)
        cg.emit("BUILD_MAP", len(call.kwargs))
        cg.call(3)
        cg.emit("POP_TOP")

    def values_to_reconstruct(self) -> list[VariableTracker]:
        """Every tracker the replay will rebuild (for collecting graph outputs)."""
        out = []
        for kind, key in self.order:
            if kind == "container":
                var = self.mutated[key]
                if isinstance(var, ObjectKeyedDictVariable):
                    out.extend(var.replayed_values())
                    continue
                out.extend(var.items.values() if isinstance(var.items, dict) else var.items)
            elif kind == "attr":
                out.extend(self.attr_values[key].values())
            elif kind == "global":
                out.append(self.global_stores[key])
            elif kind == "call":
                out.extend(self.calls[key].args)
                out.extend(self.calls[key].kwargs.values())
            else:
                out.append(self.cell_stores[key][1])
        return out


class ReplayNotExact(Exception):
    """Raised by the first codegen pass: ``brk`` (a GraphBreak with ``restart_step``) says where
    the trace must stop instead (convert_frame traces again up to there)."""

    def __init__(self, brk: GraphBreak):
        super().__init__(brk.reason)
        self.brk = brk
