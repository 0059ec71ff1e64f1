"""Functions that generated code calls at run time.

Code made by codegen/ (the code that replaces a frame, resume functions, loop bodies) and the
``reconstruct`` methods of trackers load these as constants and call them after a graph ran,
to rebuild Python objects the trace made or changed.  They run as ordinary Python on real
values, on every call of compiled code, so they are small and do no tracing work.

Invariant: this module imports nothing of dynamo_lite (it is the bottom layer; see the
import-linter contracts in pyproject.toml), so any layer may refer to these functions.
Tested through tests that break graphs inside loops, rebuild iterators, grad-mode contexts,
exceptions and user objects (tests/breaks/, tests/semantics/).
"""
from __future__ import annotations

import builtins
import random
import types
import weakref

import torch


def numpy_array_of(t: torch.Tensor):
    """The ndarray a graph output tensor stands for (the same memory, as Tensor.numpy()); the
    tensor may require grad (``torch.from_numpy(a).requires_grad_()`` shares a's memory, and in
    the graph a's tensor is that tensor): the array is its data."""
    return t.detach().resolve_conj().resolve_neg().numpy()


def numpy_scalar_of(t: torch.Tensor):
    """The numpy scalar a 0-d graph output tensor stands for (np.float64, np.int64, np.bool_...)."""
    return t.detach().resolve_conj().resolve_neg().numpy()[()]


def pick(mapping: dict, names: tuple) -> dict:
    """The bound ones among ``names`` (loop-body code passes ``locals()`` here)."""
    return {n: mapping[n] for n in names if n in mapping}


def new_object(cls, attrs: dict):
    """An instance of ``cls`` made without running its ``__init__``, with ``attrs`` set."""
    return fill_object(object.__new__(cls), attrs)


def blank(cls):
    """``object.__new__(cls)``: an instance whose attributes are set next (fill_object / fill_module)."""
    return object.__new__(cls)


def fill_object(obj, attrs: dict):
    """``obj`` (an ``object.__new__`` instance) with ``attrs`` set by ``object.__setattr__``:
    made in two steps so that the attributes may refer to ``obj`` (a bound method of it)."""
    for name, value in attrs.items():
        object.__setattr__(obj, name, value)
    return obj


def new_module(cls, before: dict, after: dict):
    """An instance of the nn.Module subclass ``cls`` as a traced ``__init__`` left it."""
    return fill_module(object.__new__(cls), before, after)


def fill_module(obj, before: dict, after: dict):
    """``obj`` (an ``object.__new__`` instance of an nn.Module subclass) as a traced ``__init__``
    left it: ``before`` (set before it called nn.Module.__init__), nn.Module.__init__, then
    ``after`` (the module's tables, rebuilt, and the rest), all by ``object.__setattr__``; no
    method of its class runs."""
    for name, value in before.items():
        object.__setattr__(obj, name, value)
    torch.nn.Module.__init__(obj)
    for name, value in after.items():
        object.__setattr__(obj, name, value)
    return obj


def with_attrs(obj, attrs: dict, raw: tuple = ()):
    """``obj`` after ``obj.name = value`` for each attribute (``object.__setattr__`` for the names in
    ``raw``), in order: the writes a trace made on an object it rebuilds by calling its class."""
    for name, value in attrs.items():
        if name in raw:
            object.__setattr__(obj, name, value)
        else:
            setattr(obj, name, value)
    return obj


def reenter_grad_mode(enabled: bool, prev: bool):
    """An entered grad-mode context whose ``__exit__`` restores ``prev``."""
    ctx = torch.set_grad_enabled(enabled)
    ctx.prev = prev
    return ctx


def chained_exception(exc: BaseException, context, cause, suppress_context: bool) -> BaseException:
    """An exception rebuilt with the chaining a traced ``raise`` gave it."""
    exc.__context__ = context
    exc.__cause__ = cause
    exc.__suppress_context__ = suppress_context
    return exc


def exception_with(cls: type, args: tuple, names: tuple, *values) -> BaseException:
    """An exception of a class with a Python ``__init__`` that traced code made: built as
    BaseException.__new__ builds it (``args``: what its __init__ left in ``.args``) and given the
    instance attributes its __init__ and later writes set, without running that code again."""
    exc = cls.__new__(cls, *args)  # BaseException.__new__ sets .args
    exc.__dict__.update(zip(names, values))
    return exc


def format_fields(layout: tuple, *tensors) -> str:
    """The text of an f-string whose tensor fields were formatted after the graph
    (variables/formatted_text.py): ``layout`` holds the constant pieces (str) and, for each field
    in order, its conversion (0: ``format(t, "")``, 1: str, 2: repr, 3: ascii)."""
    out = []
    fields = iter(tensors)
    for part in layout:
        if type(part) is str:
            out.append(part)
            continue
        t = next(fields)
        out.append(format(t, "") if part == 0 else str(t) if part == 1 else repr(t) if part == 2 else ascii(t))
    return "".join(out)


def set_iterator_at(real: set, consumed: tuple, rest: tuple):
    """A set iterator: iter(real) past the ``consumed`` items, if the real set yields them first
    and then exactly ``rest``; else an iterator over ``rest``."""
    it = iter(real)
    taken = [next(it) for _ in range(min(len(consumed), len(real)))]
    if len(taken) == len(consumed) and set(taken) == set(consumed) and len(real) - len(taken) == len(rest) \
            and set(real) - set(taken) == set(rest):
        return it
    return iter(rest)


def list_iterator_at(lst: list, index: int):
    """iter(lst) advanced by ``index`` items (-1: exhausted)."""
    it = iter(lst)
    if index < 0:
        for _ in it:  # run off the end: CPython drops the list
            pass
        return it
    it.__setstate__(index)
    return it


def range_iterator_at(r: range, index: int):
    """iter(r) advanced by ``index`` items (a range with a symbolic bound, rebuilt after a graph)."""
    it = iter(r)
    if index:
        it.__setstate__(index)
    return it


def passthrough(v):
    """The function of a rebuilt map object (its items were computed in the trace)."""
    return v


def keep(v) -> bool:
    """The predicate of a rebuilt filter object (its items were filtered in the trace)."""
    return True


class _Unbound:
    """The value handed to a resume function for a local that is unbound (its prologue unbinds it)."""

    def __repr__(self):
        return "<unbound local>"


UNBOUND = _Unbound()


def local_or_unbound(frame_locals: dict, name: str):
    """A generated stub's local ``name``: its value, or UNBOUND.  ``frame_locals`` is the stub's
    ``locals()``; on 3.12 that is the frame's own f_locals dict, emptied here so that it does not
    keep the locals' values alive while they are handed on."""
    value = frame_locals.get(name, UNBOUND)
    frame_locals.clear()
    return value


_UNBOUND_LOCAL = "cannot access local variable {!r} where it is not associated with a value"


def cell_contents(cell, name: str):
    """LOAD_DEREF of the frame's own cell variable ``name`` where a resume function holds it
    as a free variable: an empty cell raises UnboundLocalError, as in the original frame
    (a free variable would raise NameError)."""
    try:
        return cell.cell_contents
    except ValueError:
        pass
    raise UnboundLocalError(_UNBOUND_LOCAL.format(name))


def cell_delete(cell, name: str) -> None:
    """DELETE_DEREF of a cell variable held as a free variable (see ``cell_contents``)."""
    try:
        del cell.cell_contents
        return
    except ValueError:
        pass
    raise UnboundLocalError(_UNBOUND_LOCAL.format(name))


class DrawRef:
    """In the arguments of a replayed random call: the result of an earlier call of the list."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self):
        return f"DrawRef({self.index})"


class InputRef:
    """In the arguments of a replayed call: the value of a frame input read when the frame runs
    (``inputs`` of ``random_draws``), not baked into the code (a numpy seed)."""

    __slots__ = ("index", "convert")

    def __init__(self, index: int, convert=None):
        self.index = index
        self.convert = convert  # applied to the value first (``int`` of a numpy integer), or None

    def __repr__(self):
        return f"InputRef({self.index}, {getattr(self.convert, '__name__', None)})"

    def value(self, inputs: tuple):
        value = inputs[self.index]
        return value if self.convert is None else self.convert(value)


class Draws(list):
    """The results of ``random_draws``; ``states_before``: (Random object, its state) of each
    generator the calls draw from, before them (restored when the frame's own code runs again
    from the start after the graph raised)."""

    __slots__ = ("states_before",)


def random_draws(calls: tuple, inputs: tuple = ()) -> list:
    """Make the calls of Python's random module a trace replays before its graph, in order:
    ``calls`` are ``(fn, args, kwargs)``; an argument that is a ``DrawRef`` is the result of an
    earlier call, an ``InputRef`` the value of a frame input.  Returns the results (what the graph
    and the rebuilt values read)."""
    out = Draws()
    seen: dict = {}
    for fn, _, _ in calls:
        owner = getattr(fn, "__self__", None)
        if isinstance(owner, random.Random) and id(owner) not in seen:
            seen[id(owner)] = (owner, owner.getstate())
    out.states_before = list(seen.values())
    for fn, args, kwargs in calls:
        args = [out[a.index] if type(a) is DrawRef else a.value(inputs) if type(a) is InputRef else a for a in args]
        out.append(fn(*args, **kwargs))
    return out


def generator_draw(fn, generator, args: tuple, kwargs: dict):
    """``fn(*args, generator=generator, **kwargs)``: a draw from a torch.Generator made in the
    frame, made before the graph (variables/torch_vars.GeneratorVariable)."""
    return fn(*args, generator=generator, **kwargs)


def undo_random_draws(draws: Draws) -> None:
    """Put the generators back in the state they had before ``draws`` were made."""
    for owner, state in draws.states_before:
        owner.setstate(state)


def make_random(state: tuple):
    """A ``random.Random`` in ``state`` (a Random object made in the trace, rebuilt)."""
    rng = random.Random()
    rng.setstate(state)
    return rng


def nth_value(d: dict, index: int):
    """The value at position ``index`` of a dict (a module's hook at its place in the hook dict,
    whatever its hook id)."""
    return list(d.values())[index]


def float_tensor(value: float) -> torch.Tensor:
    """A Python float as the 0-d float64 tensor a graph takes it as (exact: a float is a double)."""
    return torch.tensor(value, dtype=torch.float64)


# Classes made by build_class, with what they were made from (body code, globals, name, bases),
# and the plain functions of their bodies: a class statement in compiled code makes a new class
# (and new methods) on every call, so code that receives an instance (a resume function) guards
# that its class was made from the same statement, and its methods' code, instead of identities
# (variables/builder.py, user_objects.guard_function).
MADE_CLASSES: "weakref.WeakKeyDictionary[type, tuple]" = weakref.WeakKeyDictionary()
MADE_FUNCTIONS: "weakref.WeakSet[types.FunctionType]" = weakref.WeakSet()


def build_class(body: types.CodeType, f_globals: dict, name: str, *bases):
    """``class name(*bases): <body>`` as the statement makes it (the body function is made from
    its code with the frame's globals, as MAKE_FUNCTION would); recorded in MADE_CLASSES."""
    cls = builtins.__build_class__(types.FunctionType(body, f_globals, body.co_name), name, *bases)
    if isinstance(cls, type):
        MADE_CLASSES[cls] = (body, f_globals, name, bases)
        for value in vars(cls).values():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if type(value) is types.FunctionType:
                MADE_FUNCTIONS.add(value)
    return cls
