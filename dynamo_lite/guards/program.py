"""Guard expressions -> a ``_C.GuardProgram`` (the check the hook runs on every call).

``GuardSet.compile`` (guards/__init__.py) produces, for each guard, the Python
expressions that state it; those stay the specification (the Python check,
failure explanations and the guards log use them).  ``build_program``
translates the same expressions into the register program of csrc/guards.c:

    guards, in evaluation order (order_guards)
      -> for each guard: ``guard.emit(builder)`` (guards/kinds.py): the kind writes its
         checks on the registers of its sources, loaded by walking the Source tree
         (LOAD_ITEM from ___G, LOAD_ATTR, LOAD_ITEM, LOAD_CELL from ___F,
         LOAD_TYPE...), each distinct source loaded once (``s._modules['fc1']`` is
         read once for all its params)
      -> ExprGuard / GlobalStateGuard only: its expression parsed with ``ast``
         (value expressions -> LOAD_* ops, boolean expressions -> CHECK_* ops)
      -> anything not translated -> the residual: a Python function of the
         leftover expressions, run after every C check passed; each residual is
         logged on the ``guards`` artifact with the guard that caused it

Evaluation order (order_guards): guards on the frame's own arguments first
(type/identity/constant, then tensor metadata: they are cheap and they are
what changes between calls), then global state (grad mode), then everything
else in GuardSet order, with one rule on top: a guard that reads through a
source (``s._modules['fc1']``) runs after the type/identity guards of every
source it reads through (``s``), so no attribute of an unverified object is
read before the check that says what the object is.
Tested by tests/unit/test_guards.py.
"""
from __future__ import annotations

import ast
import builtins
import functools
import logging
import re
import sys
import types
from typing import Any, Callable, Optional

from .. import _C, static
import torch

from ..source import (AttrSource, BuiltinSource, ClosureSource, DictItemSource, DictValueSource, GenericAttrSource,
                      GlobalSource, ItemSource, LocalSource, TupleItemSource,
                      ModuleGlobalSource, TensorSizeSource, TensorStrideSource, TypeSource)
from . import tensor_api
from .kinds import EXPR_CODES, ExprGuard

guards_log = logging.getLogger("dynamo_lite.guards")


# Nodes ast.literal_eval may accept (anything else: not a constant).
# modules whose C state queries a guard reads bind at build time (_Builder._torch_function)
_FIXED_ROOTS = ("___torch", "___torch_compat")
_LITERAL_NODES = (ast.Constant, ast.UnaryOp, ast.BinOp, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.USub,
                  ast.UAdd, ast.Add, ast.Sub, ast.Load)


class Untranslatable(Exception):
    """This expression goes to the residual Python check."""


# register keys naming another register or a constant of the check's own namespace (not a value
# another program could share) and the checks whose second operand is a register (_Builder.inline)
_REG_KEY = re.compile(r"=(attr|call) \d|.*___c\d")
_TWO_REGS = ("CHECK_SAME", "CHECK_INT_EQ")
_BLOCK_NAME = re.compile(r"(?<![\w.])___block(?!\w)")


# ---- ordering --------------------------------------------------------------------
# Expressions are keyed by their text: every guard expression embeds its sources as
# ``source.name()``, so the same source is the same substring everywhere.
_PARSED: dict[str, ast.AST] = {}


def _parse(text: str) -> ast.AST:
    tree = _PARSED.get(text)
    if tree is None:
        tree = ast.parse(text, mode="eval").body
        if len(_PARSED) > 20000:
            _PARSED.clear()
        _PARSED[text] = tree
    return tree


def _segment(text: str, node: ast.AST) -> str:
    """The source text of ``node`` (a sub-expression of the one-line ``text``)."""
    if getattr(node, "lineno", 1) == getattr(node, "end_lineno", 1) == 1:
        return text[node.col_offset:node.end_col_offset]
    return ast.dump(node)


@functools.lru_cache(maxsize=8192)
def _chain_keys(text: str) -> tuple[str, ...]:
    """Text of every load-chain prefix read by the expression ``text`` (for the ancestor rule)."""
    keys: list[str] = []
    stack = [_parse(text)]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Name)):
            keys.append(_segment(text, node))
            if isinstance(node, ast.Subscript):
                stack.append(node.slice)
            if not isinstance(node, ast.Name):
                stack.append(node.value)
        elif isinstance(node, ast.Compare):
            stack.append(node.left)
            stack.extend(node.comparators)
        elif isinstance(node, ast.BoolOp):
            stack.extend(node.values)
        elif isinstance(node, ast.UnaryOp):
            stack.append(node.operand)
        elif isinstance(node, ast.Call):
            if _is_generic_getattr(node):  # a load: reads through its object
                keys.append(_segment(text, node))
            stack.append(node.func)
            stack.extend(node.args)
            stack.extend(k.value for k in node.keywords)
        elif not isinstance(node, ast.Constant):
            stack.extend(ast.iter_child_nodes(node))
    return tuple(keys)


def _is_generic_getattr(node: ast.Call) -> bool:
    """``___object_getattribute(value, 'name')`` (source.GenericAttrSource)?"""
    return (isinstance(node.func, ast.Name) and node.func.id == "___object_getattribute" and len(node.args) == 2
            and not node.keywords and isinstance(node.args[1], ast.Constant) and type(node.args[1].value) is str)


def _source_keys(source) -> list[str]:
    """Names of ``source`` and of every source it is read through."""
    keys = []
    while source is not None:
        keys.append(source.name())
        source = getattr(source, "parent", None)
    return keys


def order_guards(guards: list, exprs_of: Callable[[Any], list[str]]) -> list:
    """``guards`` (GuardSet order) reordered for evaluation; see the module docstring."""
    ranked = sorted(range(len(guards)), key=lambda i: (guards[i].priority(), i))
    establishing: dict[str, list[int]] = {}
    for i, g in enumerate(guards):
        if g.source is not None and g.establishes:
            establishing.setdefault(g.source.name(), []).append(i)
    reads: dict[int, list[str]] = {}
    for i, g in enumerate(guards):
        keys = [k for src in g.reads() for k in _source_keys(src)]
        if isinstance(g, ExprGuard):  # free text: the sources it reads are in its expressions
            for text in exprs_of(g):
                try:
                    keys.extend(_chain_keys(text))
                except SyntaxError:
                    pass
        own = g.source.name() if g.source is not None else None
        reads[i] = [k for k in dict.fromkeys(keys) if k != own and k in establishing]
    out: list[int] = []
    done: set[int] = set()
    active: set[int] = set()

    def emit(i: int) -> None:
        if i in done or i in active:
            return
        active.add(i)
        for key in reads[i]:
            for j in establishing[key]:
                emit(j)
        active.discard(i)
        done.add(i)
        out.append(i)

    for i in ranked:
        emit(i)
    return [guards[i] for i in out]


# ---- translation -------------------------------------------------------------------
class _Builder:
    """Accumulates ops; one register per distinct value expression."""

    def __init__(self, arg_names: tuple[str, ...], namespace: dict):
        self.nargs = len(arg_names) + 2
        self.regs: dict[str, int] = {name: i for i, name in enumerate(arg_names)}
        self.regs["___G"] = len(arg_names)
        self.regs["___F"] = len(arg_names) + 1
        self.nregs = self.nargs
        self.namespace = namespace
        self.ops: list[tuple] = []
        self.residual_texts: list[str] = []  # expressions the C program does not check
        self.residual_guards: list[tuple] = []  # (guard, text) for each, for the log
        self._exprs_of: Callable = lambda g: []
        self._text = ""  # the expression being translated (node keys are its substrings)

    def _new_reg(self) -> int:
        self.nregs += 1
        return self.nregs - 1

    def _load(self, key: str, name: str, src: int, n: int, obj) -> int:
        reg = self.regs.get(key)
        if reg is None:
            reg = self._new_reg()
            self.ops.append((name, reg, src, n, obj))
            self.regs[key] = reg
        return reg

    def constant(self, node: ast.AST):
        """(True, value) if ``node`` names a fixed object, else (False, None)."""
        if isinstance(node, ast.Constant):
            return True, node.value
        if isinstance(node, ast.Name) and node.id not in self.regs and node.id in self.namespace:
            return True, self.namespace[node.id]
        if not all(isinstance(sub, _LITERAL_NODES) for sub in ast.walk(node)):
            return False, None  # (a failing literal_eval is slow: it formats an error)
        try:
            return True, ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError):
            return False, None

    def value(self, node: ast.AST) -> int:
        """Register holding the value of a source expression."""
        key = "=" + _segment(self._text, node)  # "=": never an argument name
        reg = self.regs.get(key)
        if reg is not None:
            return reg
        if isinstance(node, ast.Name):
            if node.id in self.regs:
                return self.regs[node.id]
            if node.id in self.namespace:
                return self._load(key, "LOAD_CONST", 0, 0, self.namespace[node.id])
            raise Untranslatable(node.id)
        if isinstance(node, ast.Attribute):
            fixed = self._torch_function(node)
            if fixed is not None:  # loaded once, here, not by 1-3 getattrs at every check
                return self._load(key, "LOAD_CONST", 0, 0, fixed)
            cell = node.value
            if (node.attr == "cell_contents" and isinstance(cell, ast.Subscript)
                    and isinstance(cell.value, ast.Attribute) and cell.value.attr == "__closure__"
                    and isinstance(cell.slice, ast.Constant) and type(cell.slice.value) is int
                    and cell.slice.value >= 0):
                return self._load(key, "LOAD_CELL", self.value(cell.value.value), cell.slice.value, None)
            return self._load(key, "LOAD_ATTR", self.value(node.value), 0, node.attr)
        if isinstance(node, ast.Subscript):
            ok, k = self.constant(node.slice)
            if not ok:
                raise Untranslatable(ast.unparse(node))
            try:
                hash(k)
            except TypeError:
                raise Untranslatable(ast.unparse(node)) from None
            return self._load(key, "LOAD_ITEM", self.value(node.value), 0, k)
        if isinstance(node, ast.Call) and not node.keywords:
            if _is_generic_getattr(node):  # (GenericAttrSource)
                return self._load(key, "LOAD_ATTR", self.value(node.args[0]), 1, node.args[1].value)
            if _is_builtin_call(node, "type", 1, self):
                return self._load(key, "LOAD_TYPE", self.value(node.args[0]), 0, None)
            if not node.args:
                state = self._torch_state(node.func, "value")
                if state is not None:  # read in C++, no call (about 0.25 us less per state per check)
                    return self._load(key, "LOAD_TORCH_STATE", 0, state, None)
                return self._load(key, "LOAD_CALL0", self.value(node.func), 0, None)
        raise Untranslatable(ast.unparse(node))

    def _torch_function(self, node: ast.Attribute):
        """The C function (or frame-free partial) that ``node``, an attribute chain from
        ``___torch`` or ``___torch_compat`` such as ``___torch._C._get_tracing_state``, names;
        None for anything else.  State queries of torch's own: what they return changes, what
        they are does not (a user replacing ``torch.is_grad_enabled`` does not change grad mode)."""
        names = []
        while isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        if not (isinstance(node, ast.Name) and node.id in _FIXED_ROOTS and node.id in self.namespace):
            return None
        obj = self.namespace[node.id]
        for name in reversed(names):
            obj = getattr(obj, name, None)
        return obj if isinstance(obj, (types.BuiltinFunctionType, functools.partial)) else None

    def _torch_state(self, func: ast.AST, kind: str) -> Optional[int]:
        """The LOAD_TORCH_STATE code standing for a call of ``func`` (tensor_api.torch_state)."""
        fn = self._torch_function(func) if isinstance(func, ast.Attribute) else None
        return None if fn is None else tensor_api.torch_state(fn, kind)

    def check(self, node: ast.AST) -> None:
        """Ops that pass iff ``node`` is truthy (as one operand of an ``and`` chain)."""
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            for v in node.values:
                self.check(v)
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = node.operand
            if (_is_builtin_call(inner, "hasattr", 2, self) and isinstance(inner.args[1], ast.Constant)
                    and type(inner.args[1].value) is str):
                self.ops.append(("CHECK_NOT_HASATTR", self.value(inner.args[0]), 0, 0, inner.args[1].value))
                return
            self.ops.append(("CHECK_FALSY", self.value(node.operand), 0, 0, None))
            return
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            self._compare(node.left, node.ops[0], node.comparators[0])
            return
        self.ops.append(("CHECK_TRUTHY", self.value(node), 0, 0, None))

    def _compare(self, left: ast.AST, op: ast.cmpop, right: ast.AST) -> None:
        is_const, const = self.constant(right)
        if (isinstance(op, ast.Is) and is_const and type(const) is bool and isinstance(left, ast.Compare)
                and len(left.ops) == 1 and isinstance(left.ops[0], (ast.In, ast.NotIn))):
            # ``(k in d) is False``: ``in`` gives a bool, so this is ``k not in d``
            inner = left.ops[0] if const else (ast.NotIn() if isinstance(left.ops[0], ast.In) else ast.In())
            self._compare(left.left, inner, left.comparators[0])
            return
        if (isinstance(op, (ast.Is, ast.IsNot)) and is_const and const is None and isinstance(left, ast.Call)
                and not left.args and not left.keywords):
            state = self._torch_state(left.func, "presence")
            if state is not None:  # another tracer: None or True, read in C++
                reg = self._load(f"=state {state}", "LOAD_TORCH_STATE", 0, state, None)
                self.ops.append(("CHECK_ID" if isinstance(op, ast.Is) else "CHECK_NOT_ID", reg, 0, 0, None))
                return
        if isinstance(op, ast.Is):
            if is_const:
                if _is_builtin_call(left, "type", 1, self):
                    self.ops.append(("CHECK_TYPE", self.value(left.args[0]), 0, 0, const))
                else:
                    self.ops.append(("CHECK_ID", self.value(left), 0, 0, const))
            else:
                a = self.value(left)
                self.ops.append(("CHECK_SAME", a, self.value(right), 0, None))
            return
        if isinstance(op, ast.IsNot) and is_const:
            self.ops.append(("CHECK_NOT_ID", self.value(left), 0, 0, const))
            return
        if isinstance(op, ast.Eq) and is_const:
            if _is_builtin_call(left, "len", 1, self) and type(const) is int:
                self.ops.append(("CHECK_LEN", self.value(left.args[0]), 0, const, None))
                return
            inner = left.args[0] if _is_builtin_call(left, "list", 1, self) else None
            if (type(const) is list and isinstance(inner, ast.Call) and not inner.args and not inner.keywords
                    and isinstance(inner.func, ast.Attribute) and inner.func.attr == "keys"):
                self.ops.append(("CHECK_KEYS", self.value(inner.func.value), 0, 0, const))
                return
            if (type(const) is list and isinstance(inner, ast.Call) and not inner.args and not inner.keywords
                    and isinstance(inner.func, ast.Attribute) and inner.func.attr == "items"
                    and all(type(p) is tuple and len(p) == 2 for p in const)):
                self._items_equal(inner.func.value, const)
                return
            self.ops.append(("CHECK_EQ", self.value(left), 0, 0, const))
            return
        if isinstance(op, ast.NotEq) and is_const:
            self.ops.append(("CHECK_NE", self.value(left), 0, 0, const))
            return
        left_const, key = self.constant(left)
        if isinstance(op, (ast.In, ast.NotIn)) and left_const:
            name = "CHECK_IN" if isinstance(op, ast.In) else "CHECK_NOT_IN"
            self.ops.append((name, self.value(right), 0, 0, key))
            return
        raise Untranslatable(ast.unparse(ast.Compare(left, [op], [right])))

    def _items_equal(self, node: ast.AST, pairs: list) -> None:
        """``list(<node>.items()) == pairs`` for an exact dict (the TypeGuard before it): its keys
        in order (CHECK_KEYS compares them as list ``==`` does), then each value as the tuples'
        ``==`` compares it: by identity for a function or a class with type's ``==``, else ``==``."""
        d = self.value(node)
        self.ops.append(("CHECK_KEYS", d, 0, 0, [k for k, _ in pairs]))
        for i, (k, v) in enumerate(pairs):
            try:
                hash(k)
            except TypeError:
                raise Untranslatable("an unhashable key") from None
            reg = self._load(f"={ast.unparse(node)}.items()[{i}]", "LOAD_ITEM", d, 0, k)
            by_identity = isinstance(v, types.FunctionType) or (
                isinstance(v, type) and type(v).__eq__ is type.__eq__)
            self.ops.append(("CHECK_ID" if by_identity else "CHECK_EQ", reg, 0, 0, v))

    def add_expr(self, guard, text: str) -> None:
        """Translate one expression of an ExprGuard, or send it (whole) to the residual."""
        mark_ops, mark_regs, mark_n = len(self.ops), dict(self.regs), self.nregs
        try:
            self._text = text
            self.check(_parse(text))
        except (Untranslatable, SyntaxError):
            del self.ops[mark_ops:]
            self.regs, self.nregs = mark_regs, mark_n
            self.residual(guard, text)

    # ---- the interface guard kinds emit through (guards/kinds.py) ----------------
    def op(self, name: str, a: int, b: int = 0, *, n: int = 0, obj=None) -> None:
        """Append one CHECK_* op (see csrc/guards.c)."""
        if not _fits_c_int(n) or (name in ("CHECK_INT_RANGE", "CHECK_INT_EXPR") and not _fits_c_int(obj)):
            raise Untranslatable(f"{name}: an integer beyond 64 bits")  # (checked in Python)
        self.ops.append((name, a, b, n, obj))

    def residual(self, guard, text: str) -> None:
        """Check ``text`` (one of ``guard``'s expressions, or a part of one) in Python."""
        self.residual_texts.append(text)
        self.residual_guards.append((guard, text))

    def exprs_of(self, guard) -> list[str]:
        return self._exprs_of(guard)

    def globals_reg(self) -> int:
        return self.regs["___G"]

    def const(self, obj) -> int:
        """Register holding the fixed object ``obj``."""
        return self._load(f"=const {id(obj)}", "LOAD_CONST", 0, 0, obj)

    def attr(self, reg: int, name: str) -> int:
        """Register holding ``getattr(<reg>, name)``."""
        return self._load(f"=attr {reg}.{name}", "LOAD_ATTR", reg, 0, name)

    def call0(self, reg: int) -> int:
        """Register holding ``<reg>()``."""
        return self._load(f"=call {reg}()", "LOAD_CALL0", reg, 0, None)

    def reg(self, source) -> int:
        """Register holding the value at ``source`` (what ``source.name()`` evaluates to),
        loaded by walking the Source tree; Untranslatable for a source it cannot load."""
        key = "=" + source.name()
        reg = self.regs.get(key)
        if reg is not None:
            return reg
        kind = type(source)
        if kind is LocalSource:
            if source.name() in self.regs:
                return self.regs[source.name()]
            raise Untranslatable(source.name())  # not an argument of the frame
        if kind is GlobalSource:
            return self._load(key, "LOAD_ITEM", self.regs["___G"], 0, source.global_name)
        if kind is AttrSource:
            return self._load(key, "LOAD_ATTR", self.reg(source.parent), 0, source.attr)
        if kind is GenericAttrSource:  # (n=1: object.__getattribute__, never the class's own)
            return self._load(key, "LOAD_ATTR", self.reg(source.parent), 1, source.attr)
        if kind is ItemSource and _faithful_key(source.key):
            return self._load(key, "LOAD_ITEM", self.reg(source.parent), 0, source.key)
        if kind is DictItemSource and type(source.key) in (int, str):  # (n=1: dict's own lookup)
            return self._load(key, "LOAD_ITEM", self.reg(source.parent), 1, source.key)
        if kind is TupleItemSource and type(source.index) is int:  # (n=1: tuple's own lookup)
            return self._load(key, "LOAD_ITEM", self.reg(source.parent), 1, source.index)
        if kind is DictValueSource:  # the keys guard makes parent[key] the value at index
            return self._load(key, "LOAD_ITEM", self.reg(source.parent), 0, source.key)
        if kind is ClosureSource and source.index >= 0:
            return self._load(key, "LOAD_CELL", self.regs["___F"], source.index, None)
        if kind is TypeSource:
            return self._load(key, "LOAD_TYPE", self.reg(source.parent), 0, None)
        if kind is BuiltinSource:
            return self._load(key, "LOAD_ATTR", self.const(builtins), 0, source.builtin_name)
        if kind is ModuleGlobalSource:
            mods = self._load("=___sys.modules", "LOAD_ATTR", self.const(sys), 0, "modules")
            mod = self._load(f"=___sys.modules[{source.module!r}]", "LOAD_ITEM", mods, 0, source.module)
            d = self._load(f"=___sys.modules[{source.module!r}].__dict__", "LOAD_ATTR", mod, 0, "__dict__")
            return self._load(key, "LOAD_ITEM", d, 0, source.global_name)
        raise Untranslatable(source.name())

    def int_reg(self, source) -> int:
        """Register holding the int at ``source``: a tensor's size or stride (LOAD_SIZE /
        LOAD_STRIDE, read from the TensorImpl for plain tensors), or any other source."""
        kind = type(source)
        if kind in (TensorSizeSource, TensorStrideSource):
            name = "LOAD_SIZE" if kind is TensorSizeSource else "LOAD_STRIDE"
            return self._load("=" + source.name(), name, self.reg(source.parent), source.dim, torch.Tensor)
        return self.reg(source)

    def inline(self, check, source) -> None:
        """The ops of ``check`` (a CompiledGuard over ``("___block", *frame args)``: a repeated
        block's template, guards/kinds.py BlockGuard) about the value at ``source``: its
        registers renamed, each value it loads shared with this program's load of the same value
        (``___block`` read as ``source``).  Untranslatable when it has a residual Python part or
        names an argument this program does not have."""
        plan = _inline_plan(check)
        if plan is None:
            raise Untranslatable(source.name())
        names = check.arg_names
        rename = {0: self.reg(source)}
        for i, name in enumerate(names[1:], 1):
            if name not in self.regs:
                raise Untranslatable(name)
            rename[i] = self.regs[name]
        rename[len(names)] = self.regs["___G"]
        rename[len(names) + 1] = self.regs["___F"]
        root = source.name()
        regs, ops = self.regs, self.ops
        for name, a, b, n, obj, parts in plan:
            if parts is False:  # a check
                ops.append((name, rename[a], rename[b] if name in _TWO_REGS else b, n, obj))
                continue
            shared = None if parts is None else root.join(parts)
            reg = regs.get(shared) if shared is not None else None
            if reg is None:
                reg = self._new_reg()
                ops.append((name, reg, 0 if name == "LOAD_CONST" else rename[b], n, obj))
                if shared is not None:
                    regs[shared] = reg
            rename[a] = reg

    def add_guard(self, guard) -> None:
        """The ops of one guard (its ``emit``), or, when it cannot be emitted, its
        expressions translated one by one (what is left goes to the residual)."""
        mark_ops, mark_regs, mark_n = len(self.ops), dict(self.regs), self.nregs
        mark_res = len(self.residual_texts)
        try:
            guard.emit(self)
        except (Untranslatable, SyntaxError):
            del self.ops[mark_ops:]
            del self.residual_texts[mark_res:]
            del self.residual_guards[mark_res:]
            self.regs, self.nregs = mark_regs, mark_n
            for text in self.exprs_of(guard):
                self.add_expr(guard, text)


def _fits_c_int(v) -> bool:
    """Every int in ``v`` (an int, or tuples of them and other values) fits the C ops' 64 bits."""
    if type(v) is int:
        return -(1 << 63) <= v < (1 << 63)
    if type(v) is tuple:
        return all(map(_fits_c_int, v))
    return True


def _inline_plan(check) -> Optional[list]:
    """``check``'s ops for ``_Builder.inline``, made once: (op..., parts) with parts False for a
    check, else the key of the loaded value split at ``___block`` (None: a value no other
    program shares); None when the check cannot be copied into another program."""
    plan = getattr(check, "_inline_plan", False)
    if plan is not False:
        return plan
    ops, keys = check.program_ops, check.program_regs
    plan = None
    if ops is not None and keys is not None and check.residual_source is None \
            and not any(op[0] in ("CHECK_INT_EXPR", "CHECK_DISTINCT") for op in ops):  # (registers in obj)
        key_of = {reg: key for key, reg in keys.items() if reg >= len(check.arg_names) + 2}
        plan = []
        for name, a, b, n, obj in ops:
            parts: Any = False
            if name.startswith("LOAD_"):
                key = key_of.get(a)
                parts = None if key is None or _REG_KEY.match(key) else tuple(_BLOCK_NAME.split(key))
            plan.append((name, a, b, n, obj, parts))
    check._inline_plan = plan
    return plan


def _faithful_key(key) -> bool:
    """``key`` is what ``repr(key)`` evaluates to in the Python check (so C may use the object)."""
    if type(key) in (int, str, bool, type(None)):
        return True
    try:
        value = ast.literal_eval(repr(key))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    try:
        hash(key)
        return type(value) is type(key) and value == key
    except Exception:  # noqa: BLE001
        return False


def _is_builtin_call(node: ast.AST, name: str, nargs: int, b: _Builder) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
            and name not in b.regs and name not in b.namespace and len(node.args) == nargs
            and not node.keywords and getattr(builtins, name, None) is not None)


def build_program(ordered: list, exprs_of: Callable, arg_names: tuple[str, ...], namespace: dict):
    """A ``_C.GuardProgram`` checking exactly what the guards' expressions say.

    ``ordered``: guards in evaluation order; ``exprs_of(guard)`` -> its
    expressions (names resolved in ``namespace``).  Returns (program, residual
    source text or None).
    """
    b = _Builder(arg_names, namespace)
    b._exprs_of = exprs_of
    for guard in ordered:
        b.add_guard(guard)
    residual = None
    residual_src = None
    if b.residual_texts:
        params = ", ".join([*arg_names, "___G", "___F"])
        body = " and ".join(f"({t})" for t in b.residual_texts)
        residual_src = f"def ___residual({params}):\n    return bool({body})\n"
        scope = dict(namespace)
        exec(compile(residual_src, "<dynamo_lite residual guards>", "exec"), scope)  # noqa: S102
        residual = scope["___residual"]
        for guard, text in b.residual_guards:
            guards_log.info("Residual Python guard check (not in the C program): %s guard %s: %s",
                            guard.kind, guard.describe(), text)
    program = _C.GuardProgram(b.nargs, b.nregs, b.ops, residual)
    guards_log.debug("C guard program:\n%s", _Lazy(render_program, b.ops, arg_names, residual_src))
    return program, residual_src, b.ops, b.regs


class _Lazy:
    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __str__(self):
        return self.fn(*self.args)


def render_program(ops: list, arg_names: tuple[str, ...], residual_src: Optional[str] = None) -> str:
    """The register program as text, one op a line (the ``+guards`` log; docs/how-it-works.md)::

        r0 = x  r1 = ___G  r2 = ___F
        r3 = LOAD_ATTR r0 .training
        CHECK_ID r3 True
    """
    names = [*arg_names, "___G", "___F"]
    lines = ["  ".join(f"r{i} = {n}" for i, n in enumerate(names))]
    for name, a, b, n, obj in ops:
        if n == 1 and name in ("CHECK_ID", "LOAD_CONST"):  # (held weakly)
            obj = obj()
        if name == "LOAD_CONST":
            lines.append(f"r{a} = LOAD_CONST {_short_obj(obj)}")
        elif name == "LOAD_ATTR":
            lines.append(f"r{a} = LOAD_ATTR r{b} .{obj}" + (" (generic)" if n == 1 else ""))
        elif name == "LOAD_ITEM":
            lines.append(f"r{a} = LOAD_ITEM r{b} [{obj!r}]" + (" (own lookup)" if n == 1 else ""))
        elif name == "LOAD_CELL":
            lines.append(f"r{a} = LOAD_CELL r{b} [{n}]")
        elif name in ("LOAD_TYPE", "LOAD_CALL0"):
            lines.append(f"r{a} = {name} r{b}")
        elif name in ("LOAD_SIZE", "LOAD_STRIDE"):
            lines.append(f"r{a} = {name} r{b} {n}")
        elif name == "LOAD_TORCH_STATE":
            lines.append(f"r{a} = LOAD_TORCH_STATE {tensor_api.STATE_NAMES[n]}")
        elif name == "CHECK_INT_RANGE":
            lines.append(f"CHECK_INT_RANGE r{a} {n}..{obj}")
        elif name == "CHECK_INT_EXPR":
            lines.append(f"CHECK_INT_EXPR {_render_postfix(obj)}")
        elif name in ("CHECK_SAME", "CHECK_INT_EQ"):
            lines.append(f"{name} r{a} r{b}")
        elif name == "CHECK_DISTINCT":
            lines.append(f"CHECK_DISTINCT {' '.join(f'r{r}' for r in obj[0])}"
                         + (f" not in {len(obj[1])} fixed" if obj[1] else ""))
        elif name == "CHECK_LEN":
            lines.append(f"CHECK_LEN r{a} {n}")
        elif name == "CHECK_TENSOR":
            spec = obj
            lines.append(f"CHECK_TENSOR r{a} {spec[0].__name__} {str(spec[1]).replace('torch.', '')} {spec[2]} "
                         f"shape={list(spec[3])} stride={list(spec[4])} requires_grad={spec[5]}")
        elif name in ("CHECK_TRUTHY", "CHECK_FALSY"):
            lines.append(f"{name} r{a}")
        else:
            lines.append(f"{name} r{a} {_short_obj(obj)}")
    if residual_src:
        lines.append("then the residual Python check:")
        lines.extend("    " + line for line in residual_src.splitlines())
    return "\n".join(lines)


def _render_postfix(program) -> str:
    names = {v: k for k, v in EXPR_CODES.items()}
    out = []
    for code, arg in program:
        name = names.get(code, "?")
        out.append(f"r{arg}" if name == "reg" else str(arg) if name == "int" else
                   name if name == "not" or arg == 2 else f"{name}/{arg}")
    return " ".join(out)


def _short_obj(obj) -> str:
    if isinstance(obj, type):
        return obj.__qualname__
    if isinstance(obj, type(sys)):
        return f"<module {obj.__name__}>"
    if obj is None or isinstance(obj, (bool, int, float, str, list, tuple, set, frozenset)):
        return repr(obj)
    # a C function by its name (a pybind11 one's qualname names its record type); a named
    # partial (torch_compat.is_fx_tracing) the same way
    if isinstance(obj, types.BuiltinFunctionType) or (
            isinstance(obj, functools.partial) and isinstance(getattr(obj, "__name__", None), str)):
        return f"<{obj.__name__}>"
    return f"<{static.qualname(obj)}>"  # (no attribute read on a user object)
