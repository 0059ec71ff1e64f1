"""Differential fuzzing of dynamo_lite against CPython: random programs, eager vs compiled.

Used by tests/robustness/test_fuzz.py (a few hundred programs, fixed seed, shrunk by
hypothesis on failure) and bench/fuzz.py (10,000+ programs in worker
processes, summary in bench/results/fuzz.json).

    programs()                 hypothesis strategy -> Program
      Gen                      typed expression/statement generator over a safe grammar:
                               tensor/int/float/bool arithmetic, comparisons, tuple/list/dict
                               build, index and unpack, `if` on Python and tensor values, `for`
                               over range/lists/dicts, bounded `while`, nested functions,
                               closures (incl. nonlocal), lambdas, comprehensions, module-level
                               helpers (inlined calls), print, .item(), in-place ops,
                               `with torch.no_grad()`, try/except/finally, early returns, raise,
                               global mutation, grad-mode changes.
    Program.source()           module text: globals G_LOG/G_COUNT, helpers, `def f(x, y, n, s, flag, lst)`
    run_program(prog)          -> Report: the module is written to a file (linecache and
                               tracebacks work), exec'd into two namespaces; f runs eagerly in
                               one and compiled in the other over every InputSpec in order
                               (same code objects: guards, recompiles and cache hits are
                               exercised); returns, exceptions (type+message), stdout, mutated
                               arguments, grad mode and the globals must match.
    minimise(prog, report)     statement-level reduction keeping the same failure signature.

The generator keeps programs well-typed (a name has one type; names bound in a
block are not used after it; inner functions never assign outer names), so most
programs run without error; the ones that raise (IndexError, ZeroDivisionError,
dtype errors on int64 inputs, in-place ops on leaves that require grad, explicit
`raise`) must raise identically when compiled.
"""
from __future__ import annotations

import collections
import copy
import dataclasses
import hashlib
import logging
import os
import sys
import tempfile
import traceback
from typing import Callable, Optional

import torch
from hypothesis import strategies as st

import dynamo_lite
from dynamo_lite import config
from dynamo_lite.report import events
from dynamo_lite.testing import assert_same, compare, run_both

# FakeTensorMode logs every failing meta kernel at ERROR level; failing ops are expected here
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)

_DL_DIR = os.path.dirname(os.path.abspath(dynamo_lite.__file__)) + os.sep

# --------------------------------------------------------------------------
# Program representation
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Node:
    """One statement.  ``body is None``: a simple statement (``head`` may hold
    several lines separated by newlines).  Otherwise a compound statement:
    ``head`` ends with ':' and ``clauses`` are (head, body) pairs (else/elif/
    except/finally)."""

    head: str
    body: Optional[list] = None
    clauses: list = dataclasses.field(default_factory=list)
    kind: str = "simple"  # simple / if / for / while / with / try / def

    def render(self, indent: int, out: list) -> None:
        pad = "    " * indent
        if self.body is None:
            for line in self.head.split("\n"):
                out.append(pad + line)
            return
        out.append(pad + self.head)
        _render_body(self.body, indent + 1, out)
        for head, body in self.clauses:
            out.append(pad + head)
            _render_body(body, indent + 1, out)


def _render_body(body: list, indent: int, out: list) -> None:
    if not body:
        out.append("    " * indent + "pass")
    for node in body:
        node.render(indent, out)


@dataclasses.dataclass
class InputSpec:
    """One call's arguments: f(x, y, n, s, flag, lst)."""

    shape: tuple = (3, 4)
    dtype: str = "float32"
    seed: int = 0
    n: int = 2
    s: float = 0.5
    flag: bool = True
    lst: tuple = (1, 2, 3)
    requires_grad: bool = False

    def make_args(self) -> tuple:
        g = torch.Generator().manual_seed(self.seed)
        dtype = getattr(torch, self.dtype)
        if dtype.is_floating_point:
            x = torch.randn(self.shape, generator=g).to(dtype)
            y = torch.randn(self.shape, generator=g).to(dtype)
        else:
            x = torch.randint(-3, 4, self.shape, generator=g).to(dtype)
            y = torch.randint(-3, 4, self.shape, generator=g).to(dtype)
        if self.requires_grad and dtype.is_floating_point:
            x.requires_grad_(True)
        return (x, y, self.n, self.s, self.flag, list(self.lst))

    def __repr__(self) -> str:
        fields = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)
                  if getattr(self, f.name) != f.default]
        return f"InputSpec({', '.join(fields)})"


PREAMBLE = '''import math
import torch

G_LOG = []
G_COUNT = 0


class Box:
    """A user object: attribute reads/writes, methods, new objects returned."""

    def __init__(self, v):
        self.v = v

    def get(self):
        return self.v

    def bump(self, d):
        self.v = self.v + d
        return self
'''
SIGNATURE = "def f(x, y, n, s, flag, lst):"


@dataclasses.dataclass
class Program:
    helpers: list  # module-level function definitions (Node, kind "def")
    body: list  # statements of f
    inputs: list  # InputSpec per call, in order

    def source(self) -> str:
        out = [PREAMBLE]
        for h in self.helpers:
            lines: list = []
            h.render(0, lines)
            out.append("\n".join(lines) + "\n")
        lines = [SIGNATURE, "    global G_COUNT"]
        _render_body(self.body, 1, lines)
        out.append("\n".join(lines) + "\n")
        return "\n".join(out)

    def __repr__(self) -> str:
        return f"Program(inputs={self.inputs!r}):\n{self.source()}"


# --------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------

# Ops with no CPU kernel for int64: FakeTensor cannot know, so the error comes from the
# compiled graph at run time (a known limitation shared with torch.compile); programs
# using them are not run on int64 inputs.
_NO_INT_KERNEL = ("softmax", "gelu")

TYPES = ("T", "S", "I", "F", "B", "LI", "LT", "D", "P", "O")
_EXC_TYPES = "(IndexError, ValueError, ZeroDivisionError, KeyError, RuntimeError, TypeError)"


class Env:
    """Names visible at a point of the program: name -> (type, assignable)."""

    def __init__(self, vars=None, funcs=None, counters=None):
        self.vars: dict = dict(vars or {})
        self.funcs: dict = dict(funcs or {})  # name -> kind ("TT": T->T, "TIT": (T, I)->T, "II": I->I)
        self.counters: dict = dict(counters or {})  # nonlocal counters usable by bump functions

    def child(self) -> "Env":
        return Env(self.vars, self.funcs, self.counters)

    def function_child(self) -> "Env":
        """Scope of a nested function: outer names are readable, not assignable."""
        return Env({k: (t, False) for k, (t, _) in self.vars.items()}, self.funcs, {})

    def of_type(self, ty: str, assignable: bool = False) -> list:
        return sorted(k for k, (t, a) in self.vars.items() if t == ty and (a or not assignable))


@dataclasses.dataclass
class Ctx:
    """Where a statement is generated."""

    in_loop: bool = False
    loop_kind: str = ""
    func: str = "f"  # "f", "helper" or "nested"
    depth: int = 0


class Gen:
    """Draws one program.  ``draw`` is hypothesis' draw function."""

    def __init__(self, draw):
        self.draw = draw
        self.count = 0

    # ---- drawing primitives -----------------------------------------------
    def pick(self, options):
        return self.draw(st.sampled_from(options))

    def intr(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def coin(self, p_true_in_8: int = 4) -> bool:
        return self.draw(st.integers(0, 7)) < p_true_in_8

    def fresh(self, prefix: str = "v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    # ---- expressions -------------------------------------------------------
    def expr(self, ty: str, env: Env, d: int) -> str:
        return getattr(self, "e_" + ty)(env, max(d, 0))

    def var(self, env: Env, ty: str) -> Optional[str]:
        names = env.of_type(ty)
        return self.pick(names) if names else None

    def e_T(self, env: Env, d: int) -> str:
        v = self.var(env, "T")
        if d == 0 or self.coin(3):
            return v
        T = lambda: self.e_T(env, d - 1)  # noqa: E731
        options = [
            lambda: f"({T()} + {T()})",
            lambda: f"({T()} * {T()})",
            lambda: f"({T()} - {T()})",
            lambda: f"({T()} * {self.e_F(env, d - 1)})",
            lambda: f"({T()} + {self.e_I(env, d - 1)})",
            lambda: f"torch.{self.pick(['relu', 'sin', 'cos', 'tanh', 'sigmoid', 'abs', 'neg', 'exp'])}({T()})",
            lambda: f"{T()}.{self.pick(['relu', 'abs', 'neg', 'clone', 'detach', 'float', 'contiguous'])}()",
            lambda: f"torch.clamp({T()}, -1.0, 1.0)",
            lambda: f"torch.where({T()} > {self.e_F(env, 0)}, {T()}, {T()})",
            lambda: f"({T()} / ({T()}.abs() + 1))",
            lambda: f"({T()} + {self.e_S(env, d - 1)})",
            lambda: f"({T()}.sum({self.pick([0, 1, -1])}, keepdim=True) + {T()})",
            lambda: f"({T()} * {T()}[{self.intr(0, 1)}])",
            lambda: f"({T()} if {self.e_B(env, d - 1)} else {T()})",
            lambda: f"torch.{self.pick(['ones_like', 'zeros_like'])}({T()})",
            lambda: f"{T()}.masked_fill({T()} > 0, {self.e_F(env, 0)})",
            lambda: f"{T()}.softmax(-1)",
            lambda: f"torch.nn.functional.gelu({T()})",
            lambda: f"({T()} ** 2)",
            lambda: f"{T()}.t().t()",
            lambda: f"{T()}.reshape(-1).view_as({v})",
        ]
        for name, kind in sorted(env.funcs.items()):
            if kind == "TT":
                options.append(lambda name=name: f"{name}({T()})")
            elif kind == "TIT":
                options.append(lambda name=name: f"{name}({T()}, {self.e_I(env, 0)})")
        for name in env.of_type("LT"):
            options.append(lambda name=name: f"{name}[{self.pick([0, -1])}]")
        for name in env.of_type("D"):
            options.append(lambda name=name: f"{name}['a']")
        for name in env.of_type("P"):
            options.append(lambda name=name: f"{name}[0]")
        for name in env.of_type("O"):
            options.append(lambda name=name: f"{name}.{self.pick(['v', 'get()'])}")
        return self.pick(options)()

    def e_S(self, env: Env, d: int) -> str:
        v = self.var(env, "S")
        if v is not None and (d == 0 or self.coin(3)):
            return v
        T = lambda: self.e_T(env, max(d - 1, 0))  # noqa: E731
        options = [
            lambda: f"{T()}.sum()",
            lambda: f"{T()}.mean()",
            lambda: f"{T()}.max()",
            lambda: f"{T()}.min()",
            lambda: f"{T()}[{self.intr(0, 1)}, {self.intr(0, 3)}]",
            lambda: f"({T()} * {T()}).sum()",
            lambda: f"{T()}.abs().sum()",
            lambda: f"{T()}[:, 1:].sum()",
            lambda: f"{T()}[..., -1].sum()",
            lambda: f"{T()}[{T()} > 0].sum()",
            lambda: f"torch.stack([{T()}, {T()}]).sum()",
            lambda: f"torch.cat([{T()}, {T()}], {self.intr(0, 1)}).max()",
        ]
        if d > 0:
            options += [
                lambda: f"({self.e_S(env, d - 1)} + {self.e_S(env, d - 1)})",
                lambda: f"({self.e_S(env, d - 1)} * {self.e_F(env, d - 1)})",
            ]
        return self.pick(options)()

    def e_I(self, env: Env, d: int) -> str:
        leaves = [str(self.pick([0, 1, 2, 3, -1, 5]))] + env.of_type("I")
        if d == 0 or self.coin(3):
            return self.pick(leaves)
        I = lambda: self.e_I(env, d - 1)  # noqa: E731
        X = lambda: self.var(env, "T")  # noqa: E731
        options = [
            lambda: f"({I()} + {I()})",
            lambda: f"({I()} - {I()})",
            lambda: f"({I()} * {I()})",
            lambda: f"({I()} // (abs({I()}) + 1))",
            lambda: f"({I()} % 3)",
            lambda: f"{X()}.shape[{self.intr(0, 1)}]",
            lambda: f"{X()}.size({self.intr(0, 1)})",
            lambda: f"{X()}.dim()",
            lambda: f"{X()}.numel()",
            lambda: f"max({I()}, {I()})",
            lambda: f"min({I()}, {I()})",
            lambda: f"abs({I()})",
            lambda: f"len({self.e_LI(env, d - 1)})",
            lambda: f"({I()} if {self.e_B(env, d - 1)} else {I()})",
            lambda: f"sum({self.e_LI(env, d - 1)})",
            lambda: f"sum(v * 2 for v in {self.e_LI(env, d - 1)})",
            lambda: f"({self.e_LI(env, d - 1)}[{self.pick([0, -1, 1])}])",
            lambda: f"int({self.e_F(env, d - 1)})",
            lambda: "G_COUNT",
            lambda: f"int({X()}.argmax())",
            lambda: f"len({X()}.tolist())",
            lambda: f"{X()}.shape[-1] * {X()}.shape[0]",
            lambda: f"len({self.var(env, 'LT') or '[x]'})",
        ]
        for name, kind in sorted(env.funcs.items()):
            if kind == "II":
                options.append(lambda name=name: f"{name}({I()})")
        return self.pick(options)()

    def e_F(self, env: Env, d: int) -> str:
        leaves = [self.pick(["0.5", "-1.25", "2.0", "0.0"])] + env.of_type("F")
        if d == 0 or self.coin(3):
            return self.pick(leaves)
        F = lambda: self.e_F(env, d - 1)  # noqa: E731
        options = [
            lambda: f"({F()} + {F()})",
            lambda: f"({F()} * {F()})",
            lambda: f"({F()} - {self.e_I(env, d - 1)})",
            lambda: f"float({self.e_I(env, d - 1)})",
            lambda: f"{self.e_S(env, d - 1)}.item()",
            lambda: f"({F()} / 2)",
            lambda: f"abs({F()})",
            lambda: f"round({F()}, 2)",
            lambda: f"({self.e_I(env, d - 1)} / (abs({self.e_I(env, d - 1)}) + 1))",
            lambda: f"math.sqrt(abs({F()}))",
            lambda: f"float({self.e_S(env, d - 1)})",
            lambda: f"({F()} if {self.e_B(env, d - 1)} else {F()})",
        ]
        return self.pick(options)()

    def e_B(self, env: Env, d: int) -> str:
        leaves = ["True", "False"] + env.of_type("B")
        if d == 0 or self.coin(2):
            return self.pick(leaves)
        I = lambda: self.e_I(env, d - 1)  # noqa: E731
        B = lambda: self.e_B(env, d - 1)  # noqa: E731
        X = lambda: self.var(env, "T")  # noqa: E731
        options = [
            lambda: f"({I()} < {I()})",
            lambda: f"({I()} == {I()})",
            lambda: f"({self.e_F(env, d - 1)} > {self.e_F(env, d - 1)})",
            lambda: f"(not {B()})",
            lambda: f"({B()} and {B()})",
            lambda: f"({B()} or {B()})",
            lambda: f"({I()} in {self.e_LI(env, d - 1)})",
            lambda: f"(len({self.e_LI(env, d - 1)}) > {self.intr(0, 3)})",
            lambda: f"({X()}.dtype == torch.float32)",
            lambda: f"{X()}.is_floating_point()",
            lambda: "torch.is_grad_enabled()",
            lambda: f"{X()}.requires_grad",
            lambda: f"({X()}.shape[0] == 3)",
            lambda: f"isinstance({self.pick(sorted(env.vars))}, {self.pick(['int', 'float', 'list'])})",
            lambda: f"bool({self.e_S(env, d - 1)} > 0)",
            lambda: f"({self.e_S(env, d - 1)}.item() > 0)",
        ]
        return self.pick(options)()

    def e_LI(self, env: Env, d: int) -> str:
        leaves = env.of_type("LI")
        if leaves and (d == 0 or self.coin(4)):
            return self.pick(leaves)
        I = lambda: self.e_I(env, max(d - 1, 0))  # noqa: E731
        options = [
            lambda: f"[{I()}, {I()}]",
            lambda: f"list(range({self.intr(0, 4)}))",
            lambda: f"[{I()}]",
        ]
        if leaves:
            L = lambda: self.pick(leaves)  # noqa: E731
            options += [
                lambda: f"({L()} + [{I()}])",
                lambda: f"sorted({L()})",
                lambda: f"([v * 2 for v in {L()}])",
                lambda: f"{L()}[1:]",
                lambda: f"([v for v in {L()} if v > {I()}])",
            ]
        return self.pick(options)()

    def e_LT(self, env: Env, d: int) -> str:
        leaves = env.of_type("LT")
        if leaves and (d == 0 or self.coin(4)):
            return self.pick(leaves)
        T = lambda: self.e_T(env, max(d - 1, 0))  # noqa: E731
        options = [
            lambda: f"[{T()}, {T()}]",
            lambda: f"([{T()} * k for k in range({self.intr(1, 3)})])",
            lambda: f"[{T()}]",
            lambda: f"list(({T()}, {T()}))",
        ]
        return self.pick(options)()

    def e_D(self, env: Env, d: int) -> str:
        leaves = env.of_type("D")
        if leaves and (d == 0 or self.coin(4)):
            return self.pick(leaves)
        T = lambda: self.e_T(env, max(d - 1, 0))  # noqa: E731
        options = [
            lambda: f"{{'a': {T()}, 'b': {T()}}}",
            lambda: f"dict(a={T()})",
            lambda: f"({{k: {T()} * i for i, k in enumerate('ab')}})",
        ]
        return self.pick(options)()

    def e_O(self, env: Env, d: int) -> str:
        leaves = env.of_type("O")
        if leaves and (d == 0 or self.coin(4)):
            return self.pick(leaves)
        return f"Box({self.e_T(env, max(d - 1, 0))})"

    def e_P(self, env: Env, d: int) -> str:
        leaves = env.of_type("P")
        if leaves and (d == 0 or self.coin(4)):
            return self.pick(leaves)
        return f"({self.e_T(env, max(d - 1, 0))}, {self.e_I(env, max(d - 1, 0))})"

    # ---- statements --------------------------------------------------------
    def block(self, env: Env, ctx: Ctx, lo: int, hi: int) -> list:
        n = self.intr(lo, hi)
        out = []
        for _ in range(n):
            out.append(self.stmt(env, ctx))
        return out

    def stmt(self, env: Env, ctx: Ctx) -> Node:
        simple = [self.s_assign, self.s_assign, self.s_reassign, self.s_augassign, self.s_inplace, self.s_object,
                  self.s_print, self.s_item, self.s_list_op, self.s_dict_op, self.s_unpack,
                  self.s_global, self.s_call, self.s_lambda]
        compound = [self.s_if, self.s_if_tensor, self.s_for_range, self.s_for_list, self.s_while,
                    self.s_with_no_grad, self.s_try, self.s_def, self.s_counter, self.s_for_dict]
        rare = [self.s_early_return, self.s_raise, self.s_grad_mode, self.s_break, self.s_assert]
        if ctx.depth >= 2:
            kinds = simple + rare
        else:
            kinds = simple + compound + rare
        return self.pick(kinds)(env, ctx)

    def s_assign(self, env: Env, ctx: Ctx) -> Node:
        ty = self.pick(["T", "I", "F", "B", "S", "LI", "LT", "D", "P", "T", "T"])
        name = self.fresh()
        value = self.expr(ty, env, 2)
        env.vars[name] = (ty, True)
        return Node(f"{name} = {value}")

    def s_reassign(self, env: Env, ctx: Ctx) -> Node:
        names = sorted(k for k, (t, a) in env.vars.items() if a and t in ("T", "I", "F", "B", "S"))
        if not names:
            return self.s_assign(env, ctx)
        name = self.pick(names)
        return Node(f"{name} = {self.expr(env.vars[name][0], env, 2)}")

    def s_augassign(self, env: Env, ctx: Ctx) -> Node:
        names = sorted(k for k, (t, a) in env.vars.items() if a and t in ("T", "I", "F", "LI"))
        if not names:
            return self.s_assign(env, ctx)
        name = self.pick(names)
        ty = env.vars[name][0]
        if ty == "T":
            return Node(f"{name} {self.pick(['+=', '*=', '-='])} {self.pick([self.e_T(env, 1), self.e_F(env, 0)])}")
        if ty == "I":
            return Node(f"{name} {self.pick(['+=', '-=', '*='])} {self.e_I(env, 1)}")
        if ty == "F":
            return Node(f"{name} {self.pick(['+=', '*='])} {self.e_F(env, 1)}")
        return Node(f"{name} += [{self.e_I(env, 1)}]")

    def s_inplace(self, env: Env, ctx: Ctx) -> Node:
        t = self.var(env, "T")
        options = [
            lambda: f"{t}.add_({self.e_T(env, 1)})",
            lambda: f"{t}.mul_({self.e_F(env, 0)})",
            lambda: f"{t}.clamp_(-2.0, 2.0)",
            lambda: f"{t}[{self.intr(0, 1)}] = {self.e_F(env, 1)}",
            lambda: f"{t}[{self.intr(0, 1)}] = {self.e_T(env, 1)}[0]",
            lambda: f"{t}.relu_()",
            lambda: f"{t}.zero_()",
        ]
        return Node(self.pick(options)())

    def s_print(self, env: Env, ctx: Ctx) -> Node:
        tag = self.fresh("p")
        options = [
            lambda: f"print({tag!r}, {self.e_I(env, 1)}, {self.e_B(env, 1)})",
            lambda: f"print(f'{tag} {{{self.e_F(env, 1)}:.3f}}')",
            lambda: f"print({tag!r}, {self.var(env, 'T')}.shape)",
            lambda: f"print({tag!r}, {self.e_T(env, 1)})",
            lambda: f"print({tag!r}, {self.e_LI(env, 1)}, sep='|')",
        ]
        return Node(self.pick(options)())

    def s_item(self, env: Env, ctx: Ctx) -> Node:
        name = self.fresh()
        env.vars[name] = ("F", True)
        return Node(f"{name} = {self.e_S(env, 1)}.item()")

    def s_list_op(self, env: Env, ctx: Ctx) -> Node:
        lists = env.of_type("LI")
        tlists = env.of_type("LT")
        options = []
        for name in lists:
            options += [
                lambda name=name: f"{name}.append({self.e_I(env, 1)})",
                lambda name=name: f"{name}.extend([{self.e_I(env, 0)}, {self.e_I(env, 0)}])",
                lambda name=name: f"{name}.insert(0, {self.e_I(env, 0)})",
                lambda name=name: f"{name}[{self.pick([0, -1])}] = {self.e_I(env, 1)}",
                lambda name=name: f"{name}.reverse()",
            ]
        for name in tlists:
            options += [
                lambda name=name: f"{name}.append({self.e_T(env, 1)})",
                lambda name=name: f"{name}[0] = {self.e_T(env, 1)}",
            ]
        options.append(lambda: f"G_LOG.append({self.pick([self.e_I(env, 1), self.e_T(env, 1)])})")
        return Node(self.pick(options)())

    def s_dict_op(self, env: Env, ctx: Ctx) -> Node:
        dicts = env.of_type("D")
        if not dicts:
            return self.s_assign(env, ctx)
        d = self.pick(dicts)
        options = [
            lambda: f"{d}['{self.pick('abc')}'] = {self.e_T(env, 1)}",
            lambda: f"{d}.update(c={self.e_T(env, 1)})",
        ]
        if self.coin(3):
            name = self.fresh()
            value = f"{d}.get('{self.pick('abz')}', {self.e_T(env, 1)})"
            env.vars[name] = ("T", True)
            return Node(f"{name} = {value}")
        return Node(self.pick(options)())

    def s_object(self, env: Env, ctx: Ctx) -> Node:
        boxes = env.of_type("O")
        if not boxes or self.coin(3):
            name = self.fresh("b")
            value = self.e_O(env, 2)
            env.vars[name] = ("O", True)
            return Node(f"{name} = {value}")
        b = self.pick(boxes)
        return Node(self.pick([
            lambda: f"{b}.v = {self.e_T(env, 1)}",
            lambda: f"{b}.bump({self.pick([self.e_T(env, 1), self.e_F(env, 0)])})",
            lambda: f"{b}.extra = {self.e_I(env, 1)}",
            lambda: f"G_LOG.append({b})",
        ])())

    def s_unpack(self, env: Env, ctx: Ctx) -> Node:
        a, b = self.fresh(), self.fresh()
        form = self.pick(["pair", "tuple", "star", "shape"])
        if form == "shape":
            value = f"{self.var(env, 'T')}.shape"
            env.vars[a], env.vars[b] = ("I", True), ("I", True)
            return Node(f"{a}, {b} = {value}")
        if form == "pair":
            text = f"{a}, {b} = {self.e_P(env, 1)}"
            env.vars[a], env.vars[b] = ("T", True), ("I", True)
        elif form == "tuple":
            text = f"{a}, {b} = {self.e_T(env, 1)}, {self.e_T(env, 1)}"
            env.vars[a], env.vars[b] = ("T", True), ("T", True)
        elif form == "star":
            text = f"{a}, *{b} = {self.e_LI(env, 1)}"
            env.vars[a], env.vars[b] = ("I", True), ("LI", True)
        return Node(text)

    def s_global(self, env: Env, ctx: Ctx) -> Node:
        if ctx.func == "nested":
            return Node(f"G_LOG.append({self.e_I(env, 1)})")
        return Node(f"G_COUNT += {self.e_I(env, 1)}")

    def s_call(self, env: Env, ctx: Ctx) -> Node:
        counters = [k for k, v in env.funcs.items() if v == "II"]
        if counters and self.coin(5):
            return Node(f"{self.pick(sorted(counters))}({self.e_I(env, 0)})")
        name = self.fresh()
        value = self.e_T(env, 2)
        env.vars[name] = ("T", True)
        return Node(f"{name} = {value}")

    def s_lambda(self, env: Env, ctx: Ctx) -> Node:
        name = self.fresh("g")
        inner = env.function_child()
        inner.vars["a"] = ("T", True)
        body = self.e_T(inner, 2)
        env.funcs[name] = "TT"
        return Node(f"{name} = lambda a: {body}")

    def s_if(self, env: Env, ctx: Ctx) -> Node:
        sub = Ctx(ctx.in_loop, ctx.loop_kind, ctx.func, ctx.depth + 1)
        node = Node(f"if {self.e_B(env, 2)}:", self.block(env.child(), sub, 1, 3), kind="if")
        if self.coin(3):
            node.clauses.append((f"elif {self.e_B(env, 1)}:", self.block(env.child(), sub, 1, 2)))
        if self.coin(4):
            node.clauses.append(("else:", self.block(env.child(), sub, 1, 3)))
        return node

    def s_if_tensor(self, env: Env, ctx: Ctx) -> Node:
        sub = Ctx(ctx.in_loop, ctx.loop_kind, ctx.func, ctx.depth + 1)
        cond = self.pick([
            lambda: f"{self.e_S(env, 1)} > 0",
            lambda: f"({self.e_T(env, 1)} > 0).any()",
            lambda: f"{self.e_S(env, 1)}",
            lambda: f"{self.e_S(env, 1)}.item() > {self.e_F(env, 0)}",
        ])()
        node = Node(f"if {cond}:", self.block(env.child(), sub, 1, 3), kind="if")
        if self.coin(4):
            node.clauses.append(("else:", self.block(env.child(), sub, 1, 2)))
        return node

    def s_for_range(self, env: Env, ctx: Ctx) -> Node:
        i = self.fresh("i")
        bound = self.pick([str(self.intr(0, 4)), "n", f"min({self.e_I(env, 1)}, 3)", "len(lst)",
                           f"{self.intr(0, 1)}, {self.intr(2, 4)}"])
        inner = env.child()
        inner.vars[i] = ("I", True)
        sub = Ctx(True, "for", ctx.func, ctx.depth + 1)
        # range(n) with n up to 4, nested at most twice: bounded work
        if bound == "n":
            bound = "min(n, 4)"
        return Node(f"for {i} in range({bound}):", self.block(inner, sub, 1, 3), kind="for")

    def s_for_list(self, env: Env, ctx: Ctx) -> Node:
        e = self.fresh("e")
        inner = env.child()
        sub = Ctx(True, "for", ctx.func, ctx.depth + 1)
        # iterate over a copy: the body may append to the very list (an endless loop in eager too)
        if self.coin(4):
            it = f"{self.pick(['list', 'tuple'])}({self.e_LI(env, 1)})"
            inner.vars[e] = ("I", True)
        else:
            it = f"{self.pick(['list', 'tuple'])}({self.e_LT(env, 1)})"
            inner.vars[e] = ("T", True)
        if self.coin(2):
            k = self.fresh("k")
            inner.vars[k] = ("I", True)
            return Node(f"for {k}, {e} in enumerate({it}):", self.block(inner, sub, 1, 3), kind="for")
        node = Node(f"for {e} in {it}:", self.block(inner, sub, 1, 3), kind="for")
        if self.coin(2):
            node.clauses.append(("else:", self.block(env.child(), Ctx(ctx.in_loop, ctx.loop_kind, ctx.func,
                                                                       ctx.depth + 1), 1, 1)))
        return node

    def s_for_dict(self, env: Env, ctx: Ctx) -> Node:
        k, v = self.fresh("k"), self.fresh("e")
        inner = env.child()
        inner.vars[v] = ("T", True)
        sub = Ctx(True, "for", ctx.func, ctx.depth + 1)
        body = self.block(inner, sub, 1, 2)
        body.insert(0, Node(f"print('key', {k})"))
        return Node(f"for {k}, {v} in {self.e_D(env, 1)}.items():", body, kind="for")

    def s_while(self, env: Env, ctx: Ctx) -> Node:
        c = self.fresh("c")
        limit = self.intr(0, 4)
        inner = env.child()
        inner.vars[c] = ("I", False)
        sub = Ctx(True, "while", ctx.func, ctx.depth + 1)
        body = [Node(f"{c} += 1")] + self.block(inner, sub, 1, 3)
        cond = f"{c} < {limit}"
        if self.coin(3):
            cond += f" and {self.e_B(env, 1)}"
        # the counter is bound just before the loop
        return _Seq([Node(f"{c} = 0"), Node(f"while {cond}:", body, kind="while")])

    def s_with_no_grad(self, env: Env, ctx: Ctx) -> Node:
        sub = Ctx(ctx.in_loop, ctx.loop_kind, ctx.func, ctx.depth + 1)
        mgr = self.pick(["torch.no_grad()", "torch.no_grad()", "torch.enable_grad()",
                         "torch.set_grad_enabled(False)"])
        return Node(f"with {mgr}:", self.block(env.child(), sub, 1, 3), kind="with")

    def s_try(self, env: Env, ctx: Ctx) -> Node:
        sub = Ctx(ctx.in_loop, ctx.loop_kind, ctx.func, ctx.depth + 1)
        body = self.block(env.child(), sub, 1, 3)
        risky = self.pick([
            lambda: f"{self.fresh('r')} = {self.e_LI(env, 1)}[{self.e_I(env, 1)}]",
            lambda: f"{self.fresh('r')} = {self.e_I(env, 1)} // {self.e_I(env, 0)}",
            lambda: f"raise ValueError('boom ' + str({self.e_I(env, 1)}))",
            lambda: f"{self.fresh('r')} = {self.e_D(env, 1)}['zz']",
            lambda: f"{self.fresh('r')} = {self.e_T(env, 1)} + torch.ones(7)",
            lambda: f"{self.fresh('r')} = int('x' + str({self.e_I(env, 0)}))",
        ])()
        body.insert(self.intr(0, len(body)), Node(risky))
        e = self.fresh("err")
        handler = [Node(f"print('caught', type({e}).__name__, {e})")] + self.block(env.child(), sub, 0, 2)
        if self.coin(1):
            handler.append(Node(f"raise RuntimeError('wrapped ' + type({e}).__name__) from {e}"))
        node = Node("try:", body, kind="try")
        node.clauses.append((f"except {_EXC_TYPES} as {e}:", handler))
        if self.coin(2):
            node.clauses.append(("else:", self.block(env.child(), sub, 1, 1)))
        if self.coin(3):
            final = [Node(f"print('finally', {self.e_I(env, 0)})")]
            if self.coin(1) and ctx.func == "f":
                final.append(Node(f"if {self.e_B(env, 1)}:", [Node(f"return {self.ret_expr(env)}")], kind="if"))
            node.clauses.append(("finally:", final))
        return node

    def s_def(self, env: Env, ctx: Ctx) -> Node:
        name = self.fresh("g")
        inner = env.function_child()
        inner.vars["a"] = ("T", True)
        inner.vars["b"] = ("I", True)
        sub = Ctx(False, "", "nested", ctx.depth + 1)
        body = self.block(inner, sub, 0, 3)
        body.append(Node(f"return {self.e_T(inner, 2)}"))
        env.funcs[name] = "TIT"
        return Node(f"def {name}(a, b={self.intr(0, 3)}):", body, kind="def")

    def s_counter(self, env: Env, ctx: Ctx) -> Node:
        if ctx.func == "nested":
            return self.s_assign(env, ctx)
        c, g = self.fresh("cnt"), self.fresh("bump")
        env.vars[c] = ("I", True)
        env.funcs[g] = "II"
        return _Seq([Node(f"{c} = 0"),
                     Node(f"def {g}(k):", [Node(f"nonlocal {c}"), Node(f"{c} += k"), Node(f"return {c}")],
                          kind="def")])

    def s_early_return(self, env: Env, ctx: Ctx) -> Node:
        if ctx.func == "nested":
            return Node(f"if {self.e_B(env, 1)}:", [Node(f"return {self.e_T(env, 1)}")], kind="if")
        return Node(f"if {self.e_B(env, 1)}:", [Node(f"return {self.ret_expr(env)}")], kind="if")

    def s_raise(self, env: Env, ctx: Ctx) -> Node:
        exc = self.pick(["ValueError", "RuntimeError", "KeyError"])
        return Node(f"if {self.e_B(env, 2)}:", [Node(f"raise {exc}(f'bad {{{self.e_I(env, 1)}}}')")], kind="if")

    def s_assert(self, env: Env, ctx: Ctx) -> Node:
        return Node(f"assert {self.e_B(env, 2)}, f'assert {{{self.e_I(env, 1)}}}'")

    def s_grad_mode(self, env: Env, ctx: Ctx) -> Node:
        return Node(f"torch.set_grad_enabled({self.e_B(env, 0)})")

    def s_break(self, env: Env, ctx: Ctx) -> Node:
        if not ctx.in_loop:
            return self.s_print(env, ctx)
        word = "break" if ctx.loop_kind == "while" else self.pick(["break", "continue"])
        return Node(f"if {self.e_B(env, 1)}:", [Node(word)], kind="if")

    def ret_expr(self, env: Env) -> str:
        return self.pick([
            lambda: self.e_T(env, 2),
            lambda: f"({self.e_T(env, 1)}, {self.e_I(env, 1)}, {self.e_F(env, 1)})",
            lambda: f"[{self.e_T(env, 1)}, {self.e_B(env, 1)}]",
            lambda: f"{{'out': {self.e_T(env, 1)}, 'n': {self.e_I(env, 1)}}}",
            lambda: self.e_LI(env, 1),
            lambda: self.e_S(env, 1),
            lambda: "None",
            lambda: self.e_LT(env, 1),
            lambda: self.e_O(env, 1),
        ])()

    # ---- whole program -----------------------------------------------------
    def helper(self, env: Env, index: int) -> Node:
        name = f"h{index}"
        inner = Env({"t": ("T", True), "k": ("I", True)}, {k: v for k, v in env.funcs.items()})
        ctx = Ctx(False, "", "helper", 1)
        body = [Node("global G_COUNT")] + self.block(inner, ctx, 0, 3)
        if self.coin(2):  # bounded recursion: the body may grow k (k *= k), so depth is counted apart
            body.append(Node("if k > 0 and _depth < 3:", [Node(f"return {name}(t * 0.5, k - 1, _depth + 1)")],
                             kind="if"))
        body.append(Node(f"return {self.e_T(inner, 2)}"))
        return Node(f"def {name}(t, k=1, _depth=0):", body, kind="def")

    def program(self) -> Program:
        env = Env({"x": ("T", True), "y": ("T", True), "n": ("I", True), "s": ("F", True),
                   "flag": ("B", True), "lst": ("LI", True)})
        helpers = []
        for i in range(self.intr(0, 2)):
            helpers.append(self.helper(env, i))
            env.funcs[f"h{i}"] = "TIT"
        body = self.block(env, Ctx(), 1, 9)
        body.append(Node(f"return {self.ret_expr(env)}"))
        prog = Program(_flatten(helpers), _flatten(body), self.inputs())
        if any(op in prog.source() for op in _NO_INT_KERNEL):
            prog.inputs = [dataclasses.replace(i, dtype="float64") if i.dtype == "int64" else i
                           for i in prog.inputs]
        return prog

    def inputs(self) -> list:
        base = InputSpec(seed=self.intr(0, 3))
        specs = [base]
        variants = [
            lambda: dataclasses.replace(base, seed=base.seed + 10),
            lambda: dataclasses.replace(base, shape=(2, 5), seed=base.seed + 1),
            lambda: dataclasses.replace(base, dtype="float64"),
            lambda: dataclasses.replace(base, n=self.pick([0, 1, 3, -1]), s=-1.5, flag=False),
            lambda: dataclasses.replace(base, lst=self.pick([(), (4,), (0, 5, 2, 7)])),
            lambda: dataclasses.replace(base, requires_grad=True),
            lambda: dataclasses.replace(base, dtype="int64"),
            lambda: dataclasses.replace(base, shape=(4, 4), dtype="float64", n=1, flag=False),
        ]
        for _ in range(self.intr(1, 3)):
            specs.append(self.pick(variants)())
        if self.coin(2):
            specs.append(base)  # back to the first variant: a cache hit after recompiles
        return specs


class _Seq(Node):
    """Several statements generated together (flattened into the enclosing body)."""

    def __init__(self, nodes):
        super().__init__("", None)
        self.nodes = nodes


def _flatten(body: list) -> list:
    out = []
    for node in body:
        if isinstance(node, _Seq):
            out.extend(_flatten(node.nodes))
            continue
        if node.body is not None:
            node.body = _flatten(node.body)
            node.clauses = [(h, _flatten(b)) for h, b in node.clauses]
        out.append(node)
    return out


@st.composite
def programs(draw) -> Program:
    """The hypothesis strategy of random programs."""
    return Gen(draw).program()


# --------------------------------------------------------------------------
# Running a program eagerly and compiled
# --------------------------------------------------------------------------

_SOURCE_DIR: Optional[str] = None


def source_file(source: str) -> str:
    """Write ``source`` to a file named by its hash (so linecache and tracebacks see it)."""
    global _SOURCE_DIR
    if _SOURCE_DIR is None:
        _SOURCE_DIR = tempfile.mkdtemp(prefix="dl_fuzz_")
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    path = os.path.join(_SOURCE_DIR, f"prog_{digest}.py")
    if not os.path.exists(path):
        with open(path, "w") as fh:
            fh.write(source)
    return path


@dataclasses.dataclass
class Report:
    """What happened to one program."""

    kind: str  # "ok", "mismatch", "internal_error", "guard_error", "invalid" (does not compile)
    message: str = ""
    input_index: int = -1
    breaks: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    graphs: int = 0
    recompiles: int = 0
    eager_raised: int = 0  # input sets for which eager raised

    @property
    def signature(self) -> tuple:
        """Identifies the kind of failure (used to keep minimisation on the same bug)."""
        first = self.message.splitlines()[0] if self.message else ""
        head = first.split(":")[0] if self.kind == "mismatch" else first[:80]
        return (self.kind, head)


_NOT_INTERNAL = tuple(os.path.join(_DL_DIR, name) for name in ("api.py", "testing.py", "eval_frame.py"))


def internal_frames(exc: BaseException) -> list:
    """Frames of dynamo_lite's machinery in the traceback of ``exc`` (empty: a user error).
    The compile() wrapper and the testing helpers are on every path and do not count."""
    tb = traceback.extract_tb(exc.__traceback__)
    return [f for f in tb if f.filename.startswith(_DL_DIR) and not f.filename.startswith(_NOT_INTERNAL)]


def run_program(prog: Program, backend="eager") -> Report:
    source = prog.source()
    filename = source_file(source)
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as e:
        return Report("invalid", f"SyntaxError: {e}")
    ns_eager = {"__name__": "dl_fuzz_prog", "__file__": filename}
    ns_comp = {"__name__": "dl_fuzz_prog", "__file__": filename}
    exec(code, ns_eager)
    exec(code, ns_comp)
    for name, value in ns_eager.items():  # one Box class, so results compare by type
        if isinstance(value, type):
            ns_comp[name] = value
    dynamo_lite.reset()
    report = Report("ok")

    def sink(ev):
        if isinstance(ev, (events.GraphBreakEvent, events.FallbackEvent)):
            report.breaks[ev.break_id] += 1
        elif isinstance(ev, events.GraphEvent):
            report.graphs += 1
        elif isinstance(ev, events.RecompileEvent):
            report.recompiles += 1

    unraisable = []

    def hook(info):
        unraisable.append(f"{info.exc_type.__name__}: {info.exc_value} (in {info.object!r})")

    compiled = dynamo_lite.compile(ns_comp["f"], backend=backend)
    grad = torch.is_grad_enabled()
    old_hook = sys.unraisablehook
    sys.unraisablehook = hook
    try:
        with events.collecting(sink), config.patch(raise_internal_errors=True):
            for i, spec in enumerate(prog.inputs):
                args = spec.make_args()
                eager, comp = run_both(ns_eager["f"], *args, compiled_fn=compiled)
                report.eager_raised += eager.exception is not None
                if comp.exception is not None and internal_frames(comp.exception) and (
                        eager.exception is None or type(eager.exception) is not type(comp.exception)
                        or str(eager.exception) != str(comp.exception)):
                    exc = comp.exception
                    report.kind, report.input_index = "internal_error", i
                    report.message = f"{type(exc).__name__}: {exc}\n" + "".join(
                        traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:])
                    return report
                try:
                    compare(eager, comp)
                    if eager.exception is not None:  # explicit chaining (raise ... from ...) too
                        ec, cc = eager.exception.__cause__, comp.exception.__cause__
                        assert (type(ec), str(ec)) == (type(cc), str(cc)), \
                            f"exception __cause__ differs: {ec!r} vs {cc!r}"
                    assert_same(ns_eager["G_LOG"], ns_comp["G_LOG"], "global G_LOG")
                    assert_same(ns_eager["G_COUNT"], ns_comp["G_COUNT"], "global G_COUNT")
                except AssertionError as e:
                    report.kind, report.input_index = "mismatch", i
                    report.message = str(e)
                    if comp.exception is not None:
                        report.message += "\ncompiled raised:\n" + "".join(traceback.format_exception(
                            type(comp.exception), comp.exception, comp.exception.__traceback__)[-8:])
                    return report
                if unraisable:  # a guard (or other callback) raised: counted as a miss by C
                    report.kind, report.input_index = "guard_error", i
                    report.message = unraisable[0]
                    return report
    finally:
        sys.unraisablehook = old_hook
        torch.set_grad_enabled(grad)
        dynamo_lite.reset()
    return report


def failure_text(prog: Program, report: Report) -> str:
    return (f"{report.kind} on input set {report.input_index} "
            f"({prog.inputs[report.input_index] if report.input_index >= 0 else ''}):\n"
            f"{report.message}\n--- program ---\n{prog.source()}\ninputs: {prog.inputs!r}")


# --------------------------------------------------------------------------
# Minimisation
# --------------------------------------------------------------------------

def _candidates(body: list):
    """Smaller variants of a statement list (each a new list; nodes are copied on write)."""
    for i in range(len(body)):
        yield body[:i] + body[i + 1:]
    for i, node in enumerate(body):
        if node.body is None:
            continue
        if node.kind in ("if", "for", "while", "with", "try"):
            yield body[:i] + node.body + body[i + 1:]
            for head, clause in node.clauses:
                yield body[:i] + clause + body[i + 1:]
        for j in range(len(node.clauses)):
            new = dataclasses.replace(node, clauses=node.clauses[:j] + node.clauses[j + 1:])
            yield body[:i] + [new] + body[i + 1:]
        for sub in _candidates(node.body):
            yield body[:i] + [dataclasses.replace(node, body=sub)] + body[i + 1:]
        for j, (head, clause) in enumerate(node.clauses):
            for sub in _candidates(clause):
                clauses = list(node.clauses)
                clauses[j] = (head, sub)
                yield body[:i] + [dataclasses.replace(node, clauses=clauses)] + body[i + 1:]


def minimise(prog: Program, report: Report, run: Callable = run_program, budget: int = 400) -> Program:
    """Greedy statement-level reduction of ``prog`` keeping ``report.signature``."""
    target = report.signature
    tries = 0

    def same(p: Program) -> bool:
        nonlocal tries
        tries += 1
        try:
            r = run(p)
        except Exception:  # noqa: BLE001 - a candidate that breaks the harness is not smaller
            return False
        return r.signature == target

    # fewer input sets first
    if report.input_index >= 0:
        for keep in ([report.input_index], list(range(report.input_index + 1))):
            cand = dataclasses.replace(prog, inputs=[prog.inputs[i] for i in keep])
            if cand.inputs != prog.inputs and same(cand):
                prog = cand
                break
    changed = True
    while changed and tries < budget:
        changed = False
        for i in range(len(prog.helpers)):
            cand = dataclasses.replace(prog, helpers=prog.helpers[:i] + prog.helpers[i + 1:])
            if same(cand):
                prog, changed = cand, True
                break
        if changed:
            continue
        for i, h in enumerate(prog.helpers):
            for sub in _candidates(h.body):
                if tries >= budget:
                    break
                helpers = list(prog.helpers)
                helpers[i] = dataclasses.replace(h, body=sub)
                cand = dataclasses.replace(prog, helpers=helpers)
                if same(cand):
                    prog, changed = cand, True
                    break
            if changed:
                break
        if changed:
            continue
        for sub in _candidates(prog.body):
            if tries >= budget:
                break
            cand = dataclasses.replace(prog, body=sub)
            if same(cand):
                prog, changed = cand, True
                break
    return prog


__all__ = ["Program", "InputSpec", "Node", "Gen", "programs", "run_program", "Report", "minimise",
           "failure_text", "source_file", "internal_frames"]
