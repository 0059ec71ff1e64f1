"""bytecode_compat.instructions decodes code as dis.get_instructions does, field by field.

The interpreter steps over ``bytecode_compat.instructions(code)``, a one-pass decoder with the
argument rules tabled by opcode; here every field it fills is compared with what the running
Python's dis gives (EXTENDED_ARG prefixes dropped, a jump to a prefix moved to its instruction)
over every code object of some large modules, and over code made to need EXTENDED_ARG.
"""
from __future__ import annotations

import dis
import types

import pytest

from dynamo_lite import bytecode_compat


def _codes(obj, seen):
    if isinstance(obj, types.CodeType):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        yield obj
        for c in obj.co_consts:
            yield from _codes(c, seen)


def _module_codes(module):
    import importlib.util

    spec = importlib.util.find_spec(module)
    source = spec.loader.get_source(module)
    return list(_codes(compile(source, spec.origin, "exec"), set()))


def _expected(code):
    """dis's instructions without EXTENDED_ARG, jump targets moved off the prefixes (the contract)."""
    out, prefixed, pending = [], {}, []
    for i in dis.get_instructions(code):
        if i.opname == "EXTENDED_ARG":
            pending.append(i.offset)
            continue
        for off in pending:
            prefixed[off] = i.offset
        pending = []
        out.append(i)
    jumps = set(dis.hasjrel) | set(dis.hasjabs)
    return [i._replace(argval=prefixed[i.argval]) if i.opcode in jumps and i.argval in prefixed else i
            for i in out]


def _same(a, b):
    return a is b or (type(a) is type(b) and a == b)


def _check(code):
    got = bytecode_compat._decode(code)  # noqa: SLF001 - the decoder itself, not the cache
    want = _expected(code)
    assert len(got) == len(want), code
    for g, w in zip(got, want):
        for field in bytecode_compat.Instruction._fields:
            assert _same(getattr(g, field), getattr(w, field)), (code, w, field, getattr(g, field))


@pytest.mark.parametrize("module", ["dis", "inspect", "typing", "dataclasses", "argparse", "asyncio.tasks",
                                    "torch.nn.modules.module", "torch._tensor", "torch.fx.graph",
                                    "dynamo_lite.symbolic.translator"])
def test_decoded_instructions_match_dis(module):
    codes = _module_codes(module)
    assert len(codes) > 20
    for code in codes:
        _check(code)


def test_extended_args_and_long_jumps_match_dis():
    body = "\n".join(f"    v{i} = a + {i}\n    if v{i} > b:\n        a = v{i} * {i}.5" for i in range(300))
    src = (f"def f(a, b):\n    x = [1, 2]\n{body}\n    for i in range(3):\n        a += i\n"
           "    while a:\n        a -= 1\n    return f'{a!r:>4} {b}'\n")
    code = compile(src, "<many>", "exec").co_consts[0]
    assert any(i.opname == "EXTENDED_ARG" for i in dis.get_instructions(code))
    _check(code)
    insts = bytecode_compat.instructions(code)
    offsets = {i.offset for i in insts}
    assert all(i.argval in offsets for i in insts if i.opcode in set(dis.hasjrel) | set(dis.hasjabs))


def test_instructions_are_cached_copies():
    def f(x):
        return x + 1

    a = bytecode_compat.instructions(f.__code__)
    b = bytecode_compat.instructions(f.__code__)
    assert a == b and a is not b
    assert [i.opname for i in a] == [i.opname for i in _expected(f.__code__)]
