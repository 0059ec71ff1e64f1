"""VariableTracker: the symbolic value the interpreter keeps for every Python value.

Each kind of value the interpreter understands has a subclass (one file per
family in this package).  A tracker knows:

- ``source``: where its value came from outside the frame (None when the value
  was created during the trace).  A tracker with a source can always be
  reloaded in generated code; one without must know how to rebuild itself.
- ``python_type()``: the Python type of the value it stands for.
- how to answer operations: the protocol below (``getitem``, ``setitem``,
  ``setattr``, ``contains``, ``bool``, ``len``, ``iter``, ``var_getattr``,
  ``call_function``, ``call_method``, ``constant_copy``), by recording graph
  nodes, returning other trackers, or raising ``GraphBreak`` when it cannot.
  Opcode handlers and builtins call the protocol; they do not test the kind.
- ``reconstruct(cg)``: emit bytecode that rebuilds the real value after the
  graph ran.

Trackers of immutable values are never changed after construction.  Mutable
containers (list, dict, set, new objects) are mutated in place; every alias
of the same real object shares one tracker (see builder.py), so a mutation is
seen through all names.  Variables never import the translator; no file here imports one above it
(what a default needs from above is installed on VariableTracker at import time).
Tested through tests/semantics/test_branches_and_loops.py and tests/semantics/test_container_values.py.
"""
from __future__ import annotations

import operator
from typing import Any, Optional

from .. import graph_breaks as gb
from ..exc import GraphBreak
from ..source import Source


class IdentityKey:
    """A dict/set key standing for an object compared by identity."""

    def __init__(self, var, ident):
        self.var = var
        self.ident = ident

    def __hash__(self):
        return hash(self.ident)

    def __eq__(self, other):
        return isinstance(other, IdentityKey) and other.ident == self.ident


def mro_lookup(cls: type, name: str):
    """``(attribute, owning class)`` of ``name`` found along ``cls.__mro__`` without running
    descriptors, or ``(None, None)``."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name], klass
    return None, None


class VariableTracker:
    """Base class of every symbolic value.

    Attributes:
        source: where the real value is loaded from (None: created in the trace).
        mutable_local: True for containers/objects created during the trace
            that may be mutated; codegen builds them once and reuses the copy.
        symbolic: True for a symbolic int (tensor.SymNodeVariable): a constant only by
            specialising it, so containers holding one are not folded as constants.
    """

    mutable_local = False
    symbolic = False

    def __init__(self, source: Optional["Source"] = None):
        self.source = source

    # ---- what the value is ------------------------------------------------
    def python_type(self) -> type:
        raise GraphBreak(gb.UNKNOWN_TYPE, f"type of {self.describe()} is unknown at trace time")

    def is_python_constant(self) -> bool:
        try:
            self.as_python_constant()
            return True
        except (GraphBreak, NotImplementedError):
            return False

    def as_python_constant(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} is not a constant")

    def describe(self) -> str:
        return type(self).__name__.replace("Variable", "").lower() or "value"

    def __repr__(self) -> str:
        src = f" source={self.source.name()}" if self.source is not None else ""
        return f"{type(self).__name__}({self._repr_body()}{src})"

    def _repr_body(self) -> str:
        return ""

    # ---- operations -------------------------------------------------------
    def var_getattr(self, tx, name: str) -> "VariableTracker":
        raise GraphBreak(gb.UNSUPPORTED_ATTRIBUTE, f"attribute {name!r} of {self.describe()} is not supported")

    def call_function(self, tx, args: list, kwargs: dict) -> "VariableTracker":
        raise GraphBreak(gb.UNSUPPORTED_CALL, f"calling {self.describe()} is not supported")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> "VariableTracker":
        if name == "__getattribute__" and len(args) == 1 and args[0].is_python_constant():
            return self.var_getattr(tx, args[0].as_python_constant())
        method = self.var_getattr(tx, name)
        return method.call_function(tx, args, kwargs)

    def truthiness(self, tx) -> Optional[bool]:
        """bool(value) if it is known at trace time, else None."""
        if self.is_python_constant():
            return bool(self.as_python_constant())
        return None

    def stop_iteration_args(self) -> list["VariableTracker"]:
        """The arguments of the StopIteration that ``next()`` raises once this iterator is
        exhausted: none, except a generator's return value (its ``StopIteration.value``)."""
        return []

    def unpack(self, tx) -> list["VariableTracker"]:
        """Items of an iterable whose length is known at trace time."""
        raise GraphBreak(gb.UNSUPPORTED_ITERATION, f"cannot iterate over {self.describe()} at trace time")

    def has_len(self) -> bool:
        return False

    def constant_copy(self) -> Any:
        """A fresh Python value equal to this one when everything in it is known at trace time
        (lists, dicts, sets and iterators of constants included; they are copies, so only pass the
        result to functions that do not mutate it).  Raises NotImplementedError otherwise."""
        if self.is_python_constant():
            return self.as_python_constant()
        raise NotImplementedError(f"{self.describe()} is not a constant")

    def is_tensor(self) -> bool:
        """True for a tensor tracker (a tensor index into a Python container is data-dependent)."""
        return False

    def identity_key(self) -> Optional[IdentityKey]:
        """A dict/set key for this value when its identity is known (real objects, new objects);
        trackers of real objects compared by identity override it."""
        if self.mutable_local:
            return IdentityKey(self, ("var", id(self)))
        if self.is_python_constant():
            value = self.as_python_constant()
            return IdentityKey(self, ("obj", id(value))) if isinstance(value, type) else None
        return None

    # ---- the protocol: what Python code does to a value ----------------------
    # Opcode handlers and builtins call these; trackers override what they support.
    def getitem(self, tx, key: "VariableTracker") -> "VariableTracker":
        """``self[key]`` (BINARY_SUBSCR, ``operator.getitem``): folded when both are constants,
        else ``self.__getitem__(key)``."""
        if self.is_python_constant() and key.is_python_constant():
            try:
                item = self.as_python_constant()[key.as_python_constant()]
            except Exception as e:  # noqa: BLE001 - raise it for real
                raise GraphBreak(gb.OPERATION_RAISES, f"subscript raised {type(e).__name__}") from e
            return self.wrap_constant(item)  # its own break when the item cannot be tracked
        return self.call_method(tx, "__getitem__", [key], {})

    def setitem(self, tx, key: "VariableTracker", value: "VariableTracker") -> None:
        """``self[key] = value`` (STORE_SUBSCR, ``operator.setitem``)."""
        self.call_method(tx, "__setitem__", [key, value], {})

    def setattr(self, tx, name: str, value: "VariableTracker") -> None:
        """``self.name = value`` (STORE_ATTR, ``setattr``): only objects whose attribute writes
        the trace can replay support it."""
        raise GraphBreak(gb.SIDE_EFFECT, f"setting attribute {name!r} on {self.describe()}")

    def contains(self, tx, item: "VariableTracker") -> bool:
        """``item in self`` (CONTAINS_OP, ``operator.contains``, ``__contains__``).  Default: a
        constant is searched item by item (``is`` then ``==``, like CPython); anything else is
        ``bool(self.__contains__(item))``.  Containers, strings and tensors override it."""
        if self.is_python_constant():
            return search_items(tx, self.unpack(tx), item)
        return self.call_method(tx, "__contains__", [item], {}).bool(tx)

    def bool(self, tx) -> bool:
        """``bool(self)`` (``not``, ``bool()``, ``any``/``all``, ``__bool__`` results): the
        ``truthiness`` known at trace time; unknown (a tensor's data) breaks the graph."""
        t = self.truthiness(tx)
        if t is None:
            raise GraphBreak(gb.DATA_DEPENDENT, f"truth value of {self.describe()} is not known at trace time")
        return t

    def len(self, tx) -> int:
        """``len(self)`` (``len()``, ``__len__``).  Default: a constant's len, else
        ``self.__len__()`` checked as len() checks it.  Containers, tensors and iterators override it."""
        if self.is_python_constant():
            value = self.as_python_constant()
            try:
                return len(value)
            except TypeError as e:
                raise GraphBreak(gb.OPERATION_RAISES, f"len() of {type(value).__name__}") from e
        return checked_len(self.call_method(tx, "__len__", [], {}))

    def len_tracker(self, tx) -> "VariableTracker":
        """``len(self)`` as a tracker (``len()``): a constant, except where the size is an input
        that can be symbolic (a dict keyed by objects)."""
        return self.wrap_constant(self.len(tx))

    def iter(self, tx) -> "VariableTracker":
        """``iter(self)`` (GET_ITER, ``iter()``, the argument iterators of map/zip/...): an iterator
        tracker (sequences.ListIteratorVariable or a subclass).  Default: an iterator over a snapshot
        of ``unpack`` (immutable values); lists iterate live, dicts read live, sets are watched, and
        an iterator is its own iterator."""
        return self.snapshot_iterator(self.unpack(tx))

    # ---- calls up the layers, installed from above at import time ------------------
    # Some protocol defaults and container methods need what is built on top of them (an
    # iterator tracker, the operator table that compares list items, the container trackers a
    # folded value becomes).  The module that owns each installs it here at import time, so no
    # file of this package imports a file above it.
    # value -> tracker for a plain value computed at trace time from constants (containers of
    # constants included): folding.wrap_constant_result.
    wrap_constant: "staticmethod"
    # items -> an iterator tracker over them (the default ``iter``): sequences.ListIteratorVariable.
    snapshot_iterator: "staticmethod"
    # (tx, fn, args) -> tracker: the ``operator`` table (``==`` on list items): arith.apply_operator.
    apply_operator: "staticmethod"
    # (tx, cls, args, kwargs) -> tracker or None: a torch.nn module class called in traced code
    # (nn_module.build_fresh_module; None: Python builds it).
    build_module: "staticmethod"
    # (cls, class source) -> tracker: a new instance of a user nn.Module subclass, before its
    # ``__init__`` is traced (nn_module.NewModuleVariable).
    new_module_object: "staticmethod"
    # (cls, item trackers) -> tracker or None: an instance of the namedtuple class ``cls`` (None:
    # not a plain namedtuple class): user_objects.namedtuple_of.
    namedtuple_of: "staticmethod"
    # (tx, fn, args, kwargs) -> tracker: call the Python function ``fn`` in the trace (inlined;
    # a method's self is args[0]): functions.call_python_function.
    call_python_function: "staticmethod"
    # (tx, exc_type, args) -> NoReturn: raise ``exc_type(*args)`` (a builtin exception) in the
    # trace, as the operation does in eager (a missing dict key's KeyError), so a traced handler
    # catches it: exceptions.raise_in_trace.
    raise_in_trace: "staticmethod"
    # (tx, tensor, args, kwargs) -> tracker: ``Tensor.numpy()``, an ndarray backed by the same graph
    # tensor: numpy_arrays.tensor_numpy.
    tensor_numpy: "staticmethod"
    # (tx, message: str, category) -> tracker: ``warnings.warn(message, category)`` replayed after
    # the graph from the user's line (a warning a traced torch op issues): replayed.replay_warning.
    replay_warning: "staticmethod"
    # (tx, tensor, hook) -> tracker: ``tensor.register_hook(hook)`` in traced code (None: Python
    # runs it, the graph breaks): replayed.register_tensor_hook.
    register_tensor_hook: "staticmethod"
    # (tx, tensor) -> tracker: ``tensor.requires_grad_()`` on a tensor that does not require grad
    # (it becomes a leaf that does), replayed after the graph on the graph's output or the input;
    # later uses of it in the trace break (replayed.enable_grad_after_graph).
    enable_grad_after_graph: "staticmethod"

    # ---- codegen -----------------------------------------------------------
    def reconstruct(self, cg) -> None:
        if self.source is not None:
            self.source.reconstruct(cg)
            return
        raise GraphBreak(gb.CANNOT_REBUILD, f"cannot rebuild {self.describe()} in generated code")

    def can_reconstruct(self) -> bool:
        return self.source is not None


def checked_len(result: VariableTracker) -> int:
    """The int len() makes of ``__len__``'s result (True -> 1); a result len() rejects
    (negative: ValueError, not an int: TypeError) breaks so Python raises it."""
    if not result.is_python_constant():
        raise GraphBreak(gb.VALUE_UNKNOWN, "__len__() result not known at trace time")
    value = result.as_python_constant()
    if type(value) not in (int, bool) or value < 0:
        raise GraphBreak(gb.OPERATION_RAISES, f"__len__() returned {type(value).__name__} {value!r} (len() raises)")
    return int(value)


def same_object(a: VariableTracker, b: VariableTracker) -> Optional[bool]:
    """``a is b`` when it is known at trace time (None: not known)."""
    if a is b:
        return True
    if a.is_python_constant() and b.is_python_constant():
        va, vb = a.as_python_constant(), b.as_python_constant()
        if va is None or vb is None or isinstance(va, bool) or isinstance(vb, bool):
            return va is vb
    ka, kb = a.identity_key(), b.identity_key()
    if ka is not None and kb is not None:
        return ka == kb
    ta, tb = type_or_none(a), type_or_none(b)
    if ta is not None and tb is not None and ta is not tb:
        return False
    if (a.is_python_constant() and b.mutable_local) or (b.is_python_constant() and a.mutable_local):
        return False
    if a.mutable_local and b.mutable_local:
        return False
    if (a.mutable_local and b.source is not None) or (b.mutable_local and a.source is not None):
        return False  # made in the trace vs read from outside it: never the same object
    return None


def guard_distinct(tx, a: VariableTracker, b: VariableTracker) -> None:
    """``a is b`` was False for two objects read from outside the trace, of one type: a later
    call may pass one object for both (the same object from two sources is one tracker, with a
    guard that they are one: builder._aliased; this is the guard that they are two)."""
    if a.source is None or b.source is None or a.is_python_constant() or b.is_python_constant():
        return
    ta, tb = type_or_none(a), type_or_none(b)
    if ta is None or ta is tb:
        tx.output.guard_distinct(a.source, b.source)


def type_or_none(v: VariableTracker) -> Optional[type]:
    """``v.python_type()``, or None when it is not known at trace time."""
    try:
        return v.python_type()
    except GraphBreak:
        return None


def runs_code_when_freed(v: VariableTracker) -> bool:
    """Is ``v`` a real object (it has a source) whose freeing runs code: its type has ``__del__``
    (a user class's, a generator's close, a file's flush)?  Where Python drops it decides when
    that code runs (symbolic/opcodes/load_store.py drop_reference, codegen/resume.py)."""
    if getattr(v, "source", None) is None:
        return False
    cls = type_or_none(v)
    return isinstance(cls, type) and getattr(cls, "__del__", None) is not None


def search_items(tx, items: list, item: VariableTracker) -> bool:
    """``item in items`` as CPython searches a sequence: identity first, then ``==``."""
    for candidate in items:
        same = same_object(candidate, item)
        if same:
            return True
        if candidate.is_tensor() or item.is_tensor():
            raise GraphBreak(gb.DATA_DEPENDENT, "`in` with tensors compares tensor data")
        result = VariableTracker.apply_operator(tx, operator.eq, [candidate, item])
        equal = result.truthiness(tx)
        if equal is None:
            raise GraphBreak(gb.DATA_DEPENDENT, "`in` comparison not known at trace time")
        if equal:
            return True
    return False


class HeldValueVariable(VariableTracker):
    """A tracker of one Python object known at trace time (``self.value``, set by the subclass):
    generated code rebuilds it from its source when it has one, else loads the object itself as a
    constant of the new code."""

    value: object

    def reconstruct(self, cg):
        if self.source is not None:
            return super().reconstruct(cg)
        cg.load_const(self.value)

    def can_reconstruct(self):
        return True


class KnownValueVariable(HeldValueVariable):
    """A held object the trace may use as it is: its type and the object itself are its constant
    (a function, a class, a module known at trace time)."""

    def python_type(self):
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def is_python_constant(self):
        return True


class UnreadArgumentVariable(VariableTracker):
    """An argument of the frame the trace never read (symbolic/translator.py wraps an argument
    when the code first loads it): it is still what the frame was called with, so generated code
    leaves it in its local and nothing is guarded on it.  Only its type is known (whether
    freeing it runs code: codegen/resume.py)."""

    def __init__(self, cls: type, source):
        super().__init__(source)
        self.cls = cls

    def python_type(self):
        return self.cls

    def describe(self):
        return f"argument {self.source.name()} (not read)"

    def can_reconstruct(self):
        return True


class NullVariable(VariableTracker):
    """The NULL that 3.11 pushes below a callable (PUSH_NULL, LOAD_GLOBAL)."""

    def reconstruct(self, cg):
        cg.push_null()

    def can_reconstruct(self):
        return True

    def describe(self):
        return "NULL"
