"""Codegen round-trips at scale: real library code through our bytecode layer.

Every code object (functions, methods, lambdas, comprehensions, class and
module bodies) of torch.nn (all of torch/nn/**/*.py, torch.nn.functional
included) and of transformers' GPT-2 and Llama model files goes through

1. ``bytecode.Bytecode.from_code(code).to_code()``, the layer all of
   dynamo_lite's code generation stands on: the result must be the same
   program after normalisation (``normalised``: real instructions with their
   resolved arguments and source positions, jumps as instruction indices,
   the exception table as instruction ranges with depth and lasti, argument
   and cell/free layout, flags, nested code recursively), and its stack size
   must be the original's.  Differences that are not behaviour are
   normalised away: CACHE entries, EXTENDED_ARG prefixes (constants are
   renumbered), the order of non-argument local names, line-table encoding.
2. our transform path, ``codegen.resume.make_resume_code`` at two points of
   every function of torch.nn.functional, torch/nn/modules and the transformers
   files (a statement boundary and a call with a non-empty stack):
   it must assemble, keep every instruction from the resume point on (the
   entry prologue becomes NOPs, cells become free variables), keep the
   exception table, and declare a stack big enough for an independent
   max-depth analysis that follows exception handlers.
3. behaviour on samples: torch.nn.functional functions, nn.Module forwards and
   tiny GPT-2 / Llama models run with every function of their files swapped
   for its round-tripped code, and give the same results.
"""
from __future__ import annotations

import contextlib
import dis
import functools
import glob
import inspect
import os
import types

import pytest
import torch
from bytecode import Bytecode

from dynamo_lite import bytecode_compat, cache
from dynamo_lite.codegen import resume
from dynamo_lite.testing import assert_same

_NN_DIR = os.path.dirname(torch.nn.__file__)


def _transformers_files() -> list:
    """The model files, found without importing transformers (slow) at collection."""
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = list(spec.submodule_search_locations)[0]
    files = [os.path.join(root, "models", "gpt2", "modeling_gpt2.py"),
             os.path.join(root, "models", "llama", "modeling_llama.py")]
    return [f for f in files if os.path.exists(f)]


FILES = sorted(glob.glob(os.path.join(_NN_DIR, "**", "*.py"), recursive=True))
HF_FILES = _transformers_files()


def _walk(code: types.CodeType):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _walk(c)


@functools.lru_cache(maxsize=None)
def _file_code(path: str) -> types.CodeType:
    with open(path) as fh:
        return compile(fh.read(), path, "exec")


# --------------------------------------------------------------------------
# normalisation
# --------------------------------------------------------------------------

_JUMPS = set(dis.hasjrel) | set(dis.hasjabs)


def _offset_to_index(insts: list) -> dict:
    """Every code-unit offset -> index of the real instruction at or after it."""
    mapping = {}
    real = [i for i in insts if i.opname != "EXTENDED_ARG"]
    j = 0
    for inst in insts:
        while real[j].offset < inst.offset:
            j += 1
        mapping[inst.offset] = j
    return mapping, real


def _const_key(value):
    if isinstance(value, types.CodeType):
        return ("code", normalised(value))
    if isinstance(value, (tuple, frozenset)):
        return (type(value).__name__, tuple(_const_key(v) for v in value))
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    return (type(value).__name__, repr(value))


@functools.lru_cache(maxsize=4096)
def normalised(code: types.CodeType) -> tuple:
    """The program of ``code`` with encoding details removed (see the module docstring)."""
    insts = list(dis.get_instructions(code))
    index, real = _offset_to_index(insts)
    end = len(code.co_code)
    body = []
    for inst in real:
        if inst.opcode in _JUMPS:
            arg = ("->", index.get(inst.argval, len(real)) if inst.argval < end else len(real))
        elif inst.opname == "LOAD_CONST":
            arg = _const_key(inst.argval)
        elif inst.opname == "KW_NAMES":
            arg = code.co_consts[inst.arg]
        elif inst.opname == "LOAD_GLOBAL":
            arg = (inst.argval, inst.arg & 1)
        elif inst.opname == "BINARY_OP":
            arg = inst.argrepr
        else:
            arg = inst.argval
        body.append((inst.opname, arg, tuple(inst.positions)))
    table = tuple((index[s], index.get(e, len(real)), index[t], d, lasti)
                  for s, e, t, d, lasti in bytecode_compat.exception_table(code))
    nargs = len(bytecode_compat.arg_names(code))
    layout = (code.co_name, code.co_qualname, code.co_filename, code.co_firstlineno, code.co_flags,
              code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
              code.co_varnames[:nargs], frozenset(code.co_varnames[nargs:]), code.co_cellvars,
              code.co_freevars)
    return layout, tuple(body), table


def first_difference(a: tuple, b: tuple) -> str:
    (la, ba, ta), (lb, bb, tb) = a, b
    if la != lb:
        return f"layout {la} != {lb}"
    for i, (x, y) in enumerate(zip(ba, bb)):
        if x != y:
            return f"instruction {i}: {x} != {y}"
    if len(ba) != len(bb):
        return f"{len(ba)} instructions != {len(bb)}"
    return f"exception table {ta} != {tb}"


# --------------------------------------------------------------------------
# stack depths (independent of the bytecode package)
# --------------------------------------------------------------------------

_NO_FALLTHROUGH = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                   "JUMP_BACKWARD_NO_INTERRUPT"}


def _effect(inst: dis.Instruction, jump: bool) -> int:
    if inst.opname == "RETURN_GENERATOR":
        return 1  # the value sent by the first resume, popped by the POP_TOP that follows
    arg = inst.arg if inst.opcode >= dis.HAVE_ARGUMENT else None
    return dis.stack_effect(inst.opcode, arg, jump=jump) if inst.opcode in _JUMPS else \
        dis.stack_effect(inst.opcode, arg)


def stack_depths(code: types.CodeType) -> dict:
    """offset -> stack depth before the instruction, for every reachable instruction
    (from the entry, and from the handler of every exception-table entry that
    protects a reachable instruction)."""
    insts = list(dis.get_instructions(code))
    by_offset = {i.offset: n for n, i in enumerate(insts)}
    depths: dict = {}
    work = [(0, 0)]
    table = bytecode_compat.exception_table(code)
    while work:
        _walk_from(code, insts, by_offset, depths, work)
        for entry in list(table):
            start, end, target, depth, lasti = entry
            if any(start <= off < end for off in depths):
                table.remove(entry)
                work.append((target, depth + lasti + 1))
    return depths


def _walk_from(code, insts, by_offset, depths, work) -> None:
    while work:
        offset, depth = work.pop()
        n = by_offset[offset]
        while True:
            inst = insts[n]
            seen = depths.get(inst.offset)
            if seen is not None:
                assert seen == depth, f"{code.co_qualname}: inconsistent depth at {inst.offset}: {seen} vs {depth}"
                break
            depths[inst.offset] = depth
            if inst.opcode in _JUMPS:
                work.append((inst.argval, depth + _effect(inst, jump=True)))
            if inst.opname in _NO_FALLTHROUGH:
                break
            depth += _effect(inst, jump=False)
            assert depth >= 0, f"{code.co_qualname}: negative stack at {inst.offset}"
            n += 1


def max_stack(code: types.CodeType) -> int:
    """Largest depth reached by any reachable instruction (after it runs)."""
    best = 0
    insts = {i.offset: i for i in dis.get_instructions(code)}
    for offset, depth in stack_depths(code).items():
        inst = insts[offset]
        after = depth + max(_effect(inst, jump=False), _effect(inst, jump=True))
        best = max(best, depth, after)
    return best


# --------------------------------------------------------------------------
# 1. Bytecode.from_code(code).to_code()
# --------------------------------------------------------------------------

def _check_roundtrip_file(path: str) -> int:
    failures = []
    count = 0
    for code in _walk(_file_code(path)):
        count += 1
        new = Bytecode.from_code(code).to_code()
        a, b = normalised(code), normalised(new)
        if a != b:
            failures.append(f"{code.co_qualname} (line {code.co_firstlineno}): {first_difference(a, b)}")
        elif new.co_stacksize != code.co_stacksize:
            failures.append(f"{code.co_qualname}: stack size {new.co_stacksize} != {code.co_stacksize}")
    assert not failures, f"{len(failures)} of {count} code objects differ:\n" + "\n".join(failures[:10])
    return count


def test_roundtrip_covers_torch_nn():
    """The file list is what it claims: all of torch.nn, functional.py and the module classes."""
    names = {os.path.relpath(f, _NN_DIR) for f in FILES}
    assert "functional.py" in names and os.path.join("modules", "linear.py") in names
    assert len(FILES) > 50
    total = sum(1 for f in FILES for _ in _walk(_file_code(f)))
    assert total > 1500


@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, _NN_DIR))
def test_bytecode_roundtrip_torch_nn(path):
    _check_roundtrip_file(path)


@pytest.mark.skipif(not HF_FILES, reason="transformers is not installed")
@pytest.mark.parametrize("path", HF_FILES, ids=os.path.basename)
def test_bytecode_roundtrip_transformers(path):
    assert _check_roundtrip_file(path) > 20


def test_normalisation_sees_real_differences():
    """A changed constant, a changed jump target or a changed line is a difference."""
    def f(a):
        if a:
            return a + 1
        return a - 2

    base = normalised(f.__code__)
    assert normalised(f.__code__.replace(co_consts=tuple(2 if c == 1 else c for c in f.__code__.co_consts))) != base
    assert normalised(f.__code__.replace(co_firstlineno=f.__code__.co_firstlineno + 1)) != base

    def g(a):
        if a:
            return a - 2
        return a + 1

    assert normalised(g.__code__)[1] != base[1]


def test_stack_analysis_matches_cpython():
    """The independent stack analysis agrees with the compiler on real code."""
    checked = 0
    for path in FILES[:40] + HF_FILES:
        for code in _walk(_file_code(path)):
            assert max_stack(code) <= code.co_stacksize, code.co_qualname
            checked += 1
    assert checked > 300


# --------------------------------------------------------------------------
# 2. resume functions at a few offsets
# --------------------------------------------------------------------------

_RESUME_PROLOGUE = ("COPY_FREE_VARS", "MAKE_CELL", "RESUME")


def _resume_points(code: types.CodeType) -> list:
    """(offset, depth): statement starts at depth 0 (first, middle, last) and a CALL with a stack."""
    depths = stack_depths(code)
    insts = bytecode_compat.instructions(code)
    starts = [i.offset for i in insts if bytecode_compat.starts_line(i) and depths.get(i.offset) == 0
              and i.opname not in _RESUME_PROLOGUE and i.offset > 0]
    points = []
    if starts:
        points = [starts[len(starts) // 2]]
    calls = [i.offset for i in insts if i.opname == "CALL" and depths.get(i.offset, 0) > 0]
    if calls:
        points.append(calls[len(calls) // 2])
    return [(p, depths[p]) for p in points]


def _check_resume(code: types.CodeType, offset: int, depth: int) -> None:
    nulls = (False,) * depth
    live = tuple(n for n in code.co_varnames if n not in code.co_cellvars)
    k = next(i for i, inst in enumerate(bytecode_compat.instructions(code)) if inst.offset == offset)
    new = resume.make_resume_code(code, k, nulls, live)  # codegen numbers instructions, not offsets
    where = f"{code.co_qualname} at {offset}"
    assert new.co_freevars == code.co_cellvars + code.co_freevars, where
    assert new.co_cellvars == (), where
    assert new.co_argcount == len(live) + depth, where
    # the stack size covers every path, exception handlers included
    assert new.co_stacksize >= max_stack(new), f"{where}: stack size {new.co_stacksize} < {max_stack(new)}"
    # the original program from the resume point on is intact
    _, orig_body, orig_table = normalised(code)
    _, new_body, new_table = normalised(new)
    shift = len(new_body) - len(orig_body)
    assert shift > 0, where
    prologue = new_body[:shift]
    assert prologue[-1][0] == "JUMP_FORWARD" and prologue[-1][1] == ("->", shift + k), where

    def strip(inst):
        name, arg, pos = inst
        if name in _RESUME_PROLOGUE:
            return ("NOP",)
        return (name, arg)

    for i in range(k, len(orig_body)):
        a, b = strip(orig_body[i]), strip(new_body[i + shift])
        if a[0] in _JUMPS_BY_NAME:
            a = (a[0], ("->", a[1][1] + shift))
        assert a == b, f"{where}: instruction {i}: {a} != {b}"
    shifted = tuple((s + shift, e + shift, t + shift, d, lasti) for s, e, t, d, lasti in orig_table)
    live_entries = tuple(e for e in shifted if e[1] > shift + k)
    assert all(e in new_table for e in live_entries), f"{where}: exception table {new_table} lacks {live_entries}"


_JUMPS_BY_NAME = {dis.opname[op] for op in _JUMPS}


def _function_codes(path: str):
    for code in _walk(_file_code(path)):
        if code.co_flags & inspect.CO_OPTIMIZED and not code.co_flags & bytecode_compat.GENERATOR_LIKE:
            yield code


RESUME_FILES = [p for p in FILES if os.path.relpath(p, _NN_DIR) == "functional.py" or
                os.path.dirname(os.path.relpath(p, _NN_DIR)) == "modules"] + HF_FILES


@pytest.mark.parametrize("path", RESUME_FILES,
                         ids=lambda p: os.path.relpath(p, _NN_DIR) if p.startswith(_NN_DIR) else os.path.basename(p))
def test_resume_code_assembles(path):
    checked = 0
    codes = list(_function_codes(path))
    for code in codes:
        for offset, depth in _resume_points(code):
            _check_resume(code, offset, depth)
            checked += 1
    cache._DERIVED.clear()
    assert checked >= len(codes) // 2


def test_resume_code_runs():
    """Resume functions made at every statement boundary finish the original function."""
    def f(a, b):
        c = a * 2
        d = c + b
        try:
            e = [c, d][b]
        except IndexError:
            e = -1
        return c, d, e

    def state_before(line: int, a, b) -> dict:
        """f's locals when it reaches the statement on relative line ``line``."""
        env = {"a": a, "b": b}
        if line > 1:
            env["c"] = a * 2
        if line > 2:
            env["d"] = env["c"] + b
        if line > 6:
            env["e"] = f(a, b)[2]
        return env

    code = f.__code__
    depths = stack_depths(code)
    starts = [i for i in bytecode_compat.instructions(code)
              if bytecode_compat.starts_line(i) and depths.get(i.offset) == 0 and i.opname not in _RESUME_PROLOGUE]
    lines = sorted({bytecode_compat.starts_line(i) - code.co_firstlineno for i in starts})
    assert lines == [1, 2, 3, 4, 7]  # each statement, the `try:` NOP included
    number = {inst.offset: n for n, inst in enumerate(bytecode_compat.instructions(code))}
    for inst in starts:
        line = bytecode_compat.starts_line(inst) - code.co_firstlineno
        for a, b in [(1, 0), (2, 1), (3, 5)]:
            env = state_before(line, a, b)
            live = tuple(env)
            fn = types.FunctionType(resume.make_resume_code(code, number[inst.offset], (), live), f.__globals__)
            assert fn(*env.values()) == f(a, b), (line, a, b)


# --------------------------------------------------------------------------
# 3. behaviour on samples
# --------------------------------------------------------------------------

@contextlib.contextmanager
def roundtripped(functions):
    """Swap each function's code for its Bytecode round-trip inside the block."""
    saved = []
    try:
        for fn in functions:
            saved.append((fn, fn.__code__))
            fn.__code__ = Bytecode.from_code(fn.__code__).to_code()
        yield len(saved)
    finally:
        for fn, code in reversed(saved):
            fn.__code__ = code


def functions_of_module(module) -> list:
    """Every Python function defined in ``module``'s file (module level and in its classes)."""
    path = module.__file__
    found = {}

    def add(obj):
        obj = inspect.unwrap(obj) if callable(obj) else obj
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if isinstance(obj, property):
            for f in (obj.fget, obj.fset, obj.fdel):
                if f is not None:
                    add(f)
            return
        if isinstance(obj, types.FunctionType) and obj.__code__.co_filename == path:
            found[id(obj)] = obj

    for value in list(vars(module).values()):
        add(value)
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attr in vars(value).values():
                add(attr)
    return list(found.values())


def _nn_samples():
    F = torch.nn.functional
    x = torch.randn(2, 3, 8, 8)
    v = torch.randn(4, 10)
    return [
        lambda: F.relu(v), lambda: F.gelu(v), lambda: F.softmax(v, -1), lambda: F.log_softmax(v, dim=1),
        lambda: F.linear(v, torch.randn(5, 10), torch.randn(5)),
        lambda: F.layer_norm(v, (10,)), lambda: F.dropout(v, 0.5, training=False),
        lambda: F.conv2d(x, torch.randn(4, 3, 3, 3), padding=1), lambda: F.max_pool2d(x, 2),
        lambda: F.avg_pool2d(x, 2), lambda: F.interpolate(x, scale_factor=2, mode="nearest"),
        lambda: F.cross_entropy(v, torch.tensor([1, 2, 3, 4])), lambda: F.mse_loss(v, v * 2),
        lambda: F.pad(v, (1, 2)), lambda: F.normalize(v), lambda: F.embedding(torch.tensor([1, 2]), v),
        lambda: F.scaled_dot_product_attention(v[None, None], v[None, None], v[None, None]),
        lambda: F.multi_head_attention_forward(
            v[:, None, :8], v[:, None, :8], v[:, None, :8], 8, 2, torch.randn(24, 8), torch.randn(24),
            None, None, False, 0.0, torch.randn(8, 8), torch.randn(8), training=False)[0],
        lambda: F.batch_norm(x, torch.zeros(3), torch.ones(3), training=False),
        lambda: F.group_norm(x, 3), lambda: F.silu(v), lambda: F.hardtanh(v), lambda: F.elu(v),
    ]


def _module_samples():
    nn = torch.nn
    x = torch.randn(2, 3, 8, 8)
    seq = torch.randn(5, 2, 16)
    return [
        (nn.Linear(10, 4), torch.randn(3, 10)), (nn.Conv2d(3, 4, 3), x), (nn.BatchNorm2d(3).eval(), x),
        (nn.LayerNorm(16), seq), (nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 2)), seq),
        (nn.LSTM(16, 8), seq), (nn.GRU(16, 8), seq), (nn.Embedding(10, 4), torch.tensor([[1, 2], [3, 4]])),
        (nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0).eval(), seq),
        (nn.MultiheadAttention(16, 2), (seq, seq, seq)), (nn.MaxPool2d(2), x), (nn.Dropout(0.3).eval(), seq),
        (nn.ModuleList([nn.Linear(2, 2)]).append(nn.ReLU()), None), (nn.GELU(), seq), (nn.Softmax(-1), seq),
    ]


def test_roundtripped_torch_nn_behaves_the_same():
    import torch.nn.functional as F

    modules = [F] + [m for name, m in sorted(vars(torch.nn.modules).items())
                     if isinstance(m, types.ModuleType) and getattr(m, "__file__", "").startswith(_NN_DIR)]
    functions = [fn for m in modules for fn in functions_of_module(m)]
    assert len(functions) > 500
    torch.manual_seed(0)
    samples = _nn_samples()
    module_samples = _module_samples()

    def run_all():
        out = []
        for s in samples:
            torch.manual_seed(1)
            out.append(s())
        for mod, inp in module_samples:
            torch.manual_seed(1)
            if inp is None:
                out.append([type(m).__name__ for m in mod])
            elif isinstance(inp, tuple):
                out.append(mod(*inp))
            else:
                out.append(mod(inp))
        return out

    expected = run_all()
    with roundtripped(functions) as n:
        assert n == len(functions)
        got = run_all()
    assert_same(expected, got, "roundtripped", rtol=0, atol=0)


@pytest.mark.skipif(not HF_FILES, reason="transformers is not installed")
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_roundtripped_transformers_models_behave_the_same(family):
    import transformers

    if family == "gpt2":
        from transformers.models.gpt2 import modeling_gpt2 as modeling
        config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=32)
        model = transformers.GPT2LMHeadModel(config).eval()
    else:
        from transformers.models.llama import modeling_llama as modeling
        config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                          num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
                                          max_position_embeddings=32)
        model = transformers.LlamaForCausalLM(config).eval()
    functions = functions_of_module(modeling)
    assert len(functions) > 15
    ids = torch.randint(0, 64, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model(ids).logits
        with roundtripped(functions):
            got = model(ids).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


# --------------------------------------------------------------------------
# 4. version knowledge in one place; the emitters and flow facts
# --------------------------------------------------------------------------

_PACKAGE_DIR = os.path.dirname(os.path.abspath(bytecode_compat.__file__))


def _version_offences(source: str, in_handlers: bool) -> list:
    """(line, what) for each piece of version knowledge in ``source`` (a module other than
    bytecode_compat): ``sys.version_info``; a string naming an opcode that exists in only some
    supported Pythons (``VERSION_SPECIFIC_OPNAMES``; allowed in the handler modules of
    symbolic/opcodes, ``in_handlers``, whose registration is by version); and an instruction
    *form* built literally, ``Instr("LOAD_ATTR", ...)`` / ``cg.emit("LOAD_CLOSURE", ...)`` of an
    opcode whose argument form differs between versions (``VERSION_SPECIFIC_FORMS``: generated
    code builds those through bytecode_compat's emitters)."""
    import ast

    names = bytecode_compat.VERSION_SPECIFIC_OPNAMES
    forms = bytecode_compat.VERSION_SPECIFIC_FORMS
    out = [(n, "version_info") for n, line in enumerate(source.splitlines(), 1) if "version_info" in line]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names \
                and not in_handlers:
            out.append((node.lineno, f"opcode name {node.value}"))
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            fn = node.func
            called = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            if called in ("Instr", "emit") and node.args[0].value in forms:
                out.append((node.lineno, f"instruction form {called}({node.args[0].value!r}, ...)"))
    return sorted(out)


def test_version_knowledge_check_sees_names_and_forms():
    """The check below is not vacuous: it flags each kind of offence, and passes emitter calls."""
    assert _version_offences("import sys\nV = sys.version_info\n", False) == [(2, "version_info")]
    assert _version_offences("ok = x.name == 'PRECALL'\n", False) == [(1, "opcode name PRECALL")]
    assert _version_offences("ok = x.name == 'POP_JUMP_IF_TRUE'\n", True) == []
    assert _version_offences("i = Instr('LOAD_ATTR', 'value', lineno=1)\n", False) == \
        [(1, "instruction form Instr('LOAD_ATTR', ...)")]
    assert _version_offences("cg.emit('MAKE_FUNCTION', 8)\n", False) == \
        [(1, "instruction form emit('MAKE_FUNCTION', ...)")]
    assert _version_offences("cg.emit('LOAD_CLOSURE', cell)\n", False) == \
        [(1, "instruction form emit('LOAD_CLOSURE', ...)"), (1, "opcode name LOAD_CLOSURE")]
    assert _version_offences("cg.instrs.extend(bytecode_compat.load_attr('value', lineno=1))\n"
                             "cg.emit('LOAD_FAST', 'x')\n", False) == []


def test_version_knowledge_stays_in_bytecode_compat():
    """No module but bytecode_compat reads sys.version_info, spells an opcode of only some
    versions (handlers aside) or builds a version-dependent instruction form literally."""
    names = bytecode_compat.VERSION_SPECIFIC_OPNAMES
    assert {"PRECALL", "KW_NAMES", "LOAD_METHOD", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_IF_FALSE",
            "POP_JUMP_BACKWARD_IF_TRUE", "JUMP_BACKWARD_NO_INTERRUPT", "RETURN_CONST", "END_FOR"} <= names
    assert names <= bytecode_compat.KNOWN_OPNAMES
    assert {"LOAD_ATTR", "LOAD_GLOBAL", "LOAD_CLOSURE", "CALL"} <= bytecode_compat.VERSION_SPECIFIC_FORMS
    files = glob.glob(os.path.join(_PACKAGE_DIR, "**", "*.py"), recursive=True)
    assert len(files) > 30
    handlers = os.path.join(_PACKAGE_DIR, "symbolic", "opcodes")
    offenders = []
    for path in files:
        if os.path.basename(path) == "bytecode_compat.py":
            continue
        with open(path, encoding="utf-8") as f:
            source = f.read()
        for n, what in _version_offences(source, os.path.dirname(path) == handlers):
            offenders.append(f"{os.path.relpath(path, _PACKAGE_DIR)}:{n}: {what}")
    assert offenders == []


def test_codegen_does_not_import_the_interpreter():
    import ast

    for path in glob.glob(os.path.join(_PACKAGE_DIR, "codegen", "*.py")):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert "symbolic" not in (node.module or ""), path
            elif isinstance(node, ast.Import):
                assert not any("symbolic" in a.name for a in node.names), path


def _assemble(instrs, argnames=("x",)):
    bc = Bytecode(bytecode_compat.frame_prologue(lineno=1) + instrs)
    bc.argnames = list(argnames)
    bc.argcount = len(argnames)
    bc.first_lineno = 1
    return types.FunctionType(bc.to_code(), {})


def test_emitters_make_calls_methods_jumps_and_functions():
    from bytecode import Instr, Label

    # sorted(x, key=abs) through the callable's NULL (before it until 3.12, after it in 3.13) +
    # call with a keyword name
    body = bytecode_compat.null_before_callable(1) + [Instr("LOAD_CONST", sorted, lineno=1)] + \
        bytecode_compat.null_after_callable(1) + [Instr("LOAD_FAST", "x", lineno=1), Instr("LOAD_CONST", abs, lineno=1)]
    body += bytecode_compat.call(2, ("key",), lineno=1) + [Instr("RETURN_VALUE", lineno=1)]
    assert _assemble(body)([3, -5, 1]) == [1, 3, -5]
    # x.count(1) through load_method + call_method
    body = [Instr("LOAD_FAST", "x", lineno=1)] + bytecode_compat.load_method("count", lineno=1)
    body += [Instr("LOAD_CONST", 1, lineno=1)] + bytecode_compat.call_method(1, lineno=1)
    body += [Instr("RETURN_VALUE", lineno=1)]
    assert _assemble(body)([1, 2, 1]) == 2
    # jumps by truth, popping and keeping the value
    for truth in (True, False):
        for pop in (True, False):
            taken = Label()
            body = [Instr("LOAD_FAST", "x", lineno=1)] + bytecode_compat.jump_if(truth, taken, pop, lineno=1)
            body += [Instr("LOAD_CONST", "fell through", lineno=1), Instr("RETURN_VALUE", lineno=1), taken]
            if pop:
                body += [Instr("LOAD_CONST", "jumped", lineno=1)]
            body += [Instr("RETURN_VALUE", lineno=1)]
            fn = _assemble(body)
            for x in (0, 3):
                jumped = bool(x) == truth
                assert fn(x) == (("jumped" if pop else x) if jumped else "fell through"), (truth, pop, x)
    # an unconditional backward jump: count down to zero
    top, done = Label(), Label()
    body = [top, Instr("LOAD_FAST", "x", lineno=1)] + bytecode_compat.jump_if(False, done, lineno=1)
    body += [Instr("LOAD_FAST", "x", lineno=1), Instr("LOAD_CONST", 1, lineno=1), Instr("BINARY_OP", 10, lineno=1),
             Instr("STORE_FAST", "x", lineno=1)] + bytecode_compat.jump(top, backward=True, lineno=1)
    body += [done, Instr("LOAD_FAST", "x", lineno=1), Instr("RETURN_VALUE", lineno=1)]
    assert _assemble(body)(4) == 0
    # make_function with named flags: defaults and kw-only defaults
    def template(a, b=1, *, c=2):
        return a + b + c
    body = [Instr("LOAD_CONST", (10,), lineno=1), Instr("LOAD_CONST", "c", lineno=1),
            Instr("LOAD_CONST", 20, lineno=1), Instr("BUILD_MAP", 1, lineno=1),
            Instr("LOAD_CONST", template.__code__, lineno=1)]
    body += bytecode_compat.make_function(defaults=True, kwdefaults=True, lineno=1) + [Instr("RETURN_VALUE", lineno=1)]
    made = _assemble(body)(None)
    assert made(1) == 31 and made.__defaults__ == (10,) and made.__kwdefaults__ == {"c": 20}


def test_stack_effects_and_nulls_after_come_from_dis():
    from bytecode import Instr

    from dynamo_lite.codegen.liveness import flow_info

    def f(a, b):
        c = len(a) + b
        for i in range(c):
            b = b * i
        return b

    flow = flow_info(f.__code__)
    names = [x.name for x in flow.instrs]
    assert names == [i.opname for i in bytecode_compat.instructions(f.__code__)]
    call = names.index("CALL")
    assert flow.depth[call] is not None
    checked = 0
    for i, d in enumerate(bytecode_compat.instructions(f.__code__)):  # depths follow dis.stack_effect
        if flow.depth[i] is not None and flow.falls_through(i) and flow.target[i] is None \
                and i + 1 not in flow.target:
            effect = dis.stack_effect(d.opcode, d.arg) if d.opcode >= dis.HAVE_ARGUMENT else dis.stack_effect(d.opcode)
            assert flow.depth[i + 1] == flow.depth[i] + effect, d
            checked += 1
    assert checked > 10
    # a call consumes its NULL and pushes one result; a binary op replaces two values by one
    assert bytecode_compat.nulls_after(Instr("CALL", 1), (False, True, False, False)) == (False, False)
    assert bytecode_compat.nulls_after(Instr("BINARY_OP", 0), (True, False, False, False)) == (True, False, False)
    assert bytecode_compat.nulls_after(Instr("LOAD_GLOBAL", (True, "len")), ()) is None


def _where_called() -> tuple:
    """(function, line) of the caller, through inspect.stack(), which raises TypeError when any
    frame on the stack is at an instruction without a line number (3.11 to 3.13)."""
    caller = inspect.stack()[1]
    return caller.function, caller.lineno


def test_generated_code_has_line_numbers_where_user_code_looks():
    """Generated code gives each instruction it makes a line: code called from it (logging,
    warnings, inspect.stack()) reads its frame's line, and a frame at an instruction without one
    makes inspect.stack() raise.  Called at a graph break (run natively by the transformed frame,
    then the resume function's stub below it), inside a loop (the loop-body function and its
    caller's dispatch), after a break at a test of truth (3.13: TO_BOOL before re-entering), and in
    cleanup code of an except clause."""
    from dynamo_lite.testing import check

    def f(x, n):
        y = x + 1
        a = _where_called()
        z = y * 2
        for i in range(n):
            b = _where_called()
            z = z + i
        if (z.sum() > 0) == (n > 1):  # a tensor's truth: a graph break at the test
            c = _where_called()
        else:
            c = None
        try:
            raise KeyError(n)
        except KeyError:
            d = _where_called()
        return z, a, b, c, d

    check(f, torch.ones(2), 2)
    check(f, -torch.ones(2), 3)
