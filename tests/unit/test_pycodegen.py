"""codegen/pycodegen.py: the disassembly cache and the stack-size pass that make building code cheap.

``original_instructions`` disassembles a code object once and hands out fresh copies (rewrites
change them); ``stack_size`` gives ``assemble`` the stack size without the `bytecode` package's
control-flow graph.  Both must be invisible: the same program as a fresh disassembly, the same
stack size as the compiler's.  (Generated code is checked against an independent stack analysis
in test_codegen_roundtrip.py; behaviour by tests/breaks.)
"""
from __future__ import annotations

import gc
import glob
import os
import types

import torch
from bytecode import Instr, Label, TryBegin, TryEnd

import dynamo_lite
from dynamo_lite import bytecode_compat
from dynamo_lite.codegen import pycodegen
from dynamo_lite.testing import assert_same


def _sample(x):
    try:
        y = x + 1
    except ValueError:
        y = 0
    for i in range(3):
        if i == 1:
            continue
        y += i
    return y


def _describe(items) -> list:
    """The items as plain data: labels and try blocks by position in the list."""
    pos = {id(x): n for n, x in enumerate(items)}
    out = []
    for x in items:
        if isinstance(x, Instr):
            arg = ("->", pos[id(x.arg)]) if isinstance(x.arg, Label) else x.arg
            out.append((x.name, repr(arg), x.location))
        elif isinstance(x, Label):
            out.append(("label",))
        elif isinstance(x, TryBegin):
            out.append(("try", pos[id(x.target)], bool(x.push_lasti), x.stack_depth))
        elif isinstance(x, TryEnd):
            out.append(("end", pos[id(x.entry)]))
    return out


def test_original_instructions_are_fresh_copies_of_one_disassembly():
    code = _sample.__code__
    a = pycodegen.original_instructions(code)
    b = pycodegen.original_instructions(code)
    assert any(isinstance(x, TryBegin) for x in a) and any(isinstance(x, Label) for x in a)
    assert _describe(a) == _describe(pycodegen._disassemble(code)) == _describe(b)
    # nothing shared: every jump and try block refers to items of its own list
    assert not {id(x) for x in a} & {id(x) for x in b}
    own = {id(x) for x in a}
    for x in a:
        if isinstance(x, Instr) and isinstance(x.arg, Label):
            assert id(x.arg) in own
        elif isinstance(x, TryBegin):
            assert id(x.target) in own
        elif isinstance(x, TryEnd):
            assert id(x.entry) in own
    # a rewrite changing its copy leaves the next copy as it was
    before = _describe(b)
    for x in a:
        if isinstance(x, Instr) and x.name == "LOAD_FAST":
            x.arg = "changed"
        elif isinstance(x, TryBegin):
            x.stack_depth = 99
    assert _describe(pycodegen.original_instructions(code)) == before


def test_a_frame_and_its_recompiles_disassemble_each_code_once(monkeypatch):
    seen: list = []
    real = pycodegen._disassemble

    def counting(code):
        seen.append(code)
        return real(code)

    monkeypatch.setattr(pycodegen, "_disassemble", counting)

    def f(x, y):
        a = x * 2 + y
        dynamo_lite.graph_break()
        b = a.sin()
        if b.sum() > 0:
            b = b + 1
        return b - a

    compiled = dynamo_lite.compile(f, backend="eager")
    for dtype in (torch.float32, torch.float64, torch.float32):
        x, y = torch.randn(3, dtype=dtype), torch.randn(3, dtype=dtype)
        assert_same(f(x, y), compiled(x, y))
    assert f.__code__ in seen  # (the frame and its resume functions were built)
    assert len(seen) >= 2
    assert len(seen) == len({id(c) for c in seen}), [c.co_name for c in seen]


def test_the_cache_does_not_keep_code_alive():
    namespace: dict = {}
    exec("def g(x):\n    return x + 1\n", namespace)
    code = namespace["g"].__code__
    key = id(code)
    pycodegen.original_instructions(code)
    assert key in pycodegen._ORIGINAL
    del namespace, code
    gc.collect()
    assert key not in pycodegen._ORIGINAL


def _walk(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _walk(c)


def test_stack_size_is_the_compilers():
    """On real code (torch.nn, generators and handlers of the standard library) the pass gives the
    compiler's own co_stacksize (3.13 declares at least 1 for code that pushes nothing)."""
    import collections
    import contextlib
    import json.decoder
    nn = sorted(glob.glob(os.path.join(os.path.dirname(torch.nn.__file__), "**", "*.py"), recursive=True))[:60]
    paths = nn + [collections.__file__, contextlib.__file__, json.decoder.__file__]
    checked = generators = handlers = 0
    for path in paths:
        with open(path) as fh:
            top = compile(fh.read(), path, "exec")
        for code in _walk(top):
            items = pycodegen.original_items(code)
            size = pycodegen.stack_size(items, code.co_flags)
            assert size == code.co_stacksize or (size == 0 and code.co_stacksize == 1), \
                f"{code.co_qualname} ({path}): {size} != {code.co_stacksize}"
            checked += 1
            generators += bool(code.co_flags & bytecode_compat.GENERATOR_LIKE)
            handlers += any(isinstance(x, TryBegin) for x in items)
    assert checked > 1000 and generators > 20 and handlers > 50, (checked, generators, handlers)


def test_inconsistent_flow_is_left_to_the_bytecode_package():
    """Two depths at one label (no compiler makes that): stack_size declines, assemble still
    builds the code with a stack size covering the deeper path."""
    from bytecode import Bytecode

    label = Label()
    items = [Instr("RESUME", 0, lineno=1), Instr("LOAD_CONST", 1, lineno=1), Instr("LOAD_CONST", True, lineno=1),
             *bytecode_compat.jump_if(True, label, lineno=1),
             Instr("LOAD_CONST", 2, lineno=1), label, Instr("RETURN_VALUE", lineno=1)]
    assert pycodegen.stack_size(items) is None
    bc = Bytecode(items)
    bc.first_lineno = 1
    code = pycodegen.assemble(bc, (lambda: None).__code__, len(items))
    assert code.co_stacksize >= 2
