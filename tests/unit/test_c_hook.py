"""Tests of the C layer (dynamo_lite._C) with plain Python callbacks.

No dynamo_lite Python machinery is used: callbacks, guards and replacement
code objects are written here by hand (replacement code with the `bytecode`
package). Every test restores this thread's callback (fixture `hook`), and
clears the co_extra caches it touched, so no hook leaks between tests.
"""
import asyncio
import copy
import gc
import os
import pickle
import sys
import threading
import weakref

import pytest
from bytecode import Bytecode, CompilerFlags, FreeVar, Instr

from dynamo_lite import _C, bytecode_compat

SKIP = _C.SKIP
RUN_EAGER = _C.RUN_EAGER
Entry = _C.CacheEntry


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def call(nargs):
    """This Python's instructions for a call of the callable loaded (with its NULL) by
    ``LOAD_GLOBAL (True, name)``, over ``nargs`` arguments pushed after it."""
    return bytecode_compat.call(nargs, lineno=None)


def nargs_of(code):
    """Number of argument slots, as the hook counts them."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & CompilerFlags.VARARGS)
    n += bool(code.co_flags & CompilerFlags.VARKEYWORDS)
    return n


def make_code(orig, body, *, name=None):
    """A replacement code object for function `orig`, as the Python side
    generates it: argcount = nargs, all arguments positional, no varargs
    flags, the original free variables; marked SKIP in the cache.

    `body` is a list of instructions after RESUME (COPY_FREE_VARS is added
    when the original has free variables).
    """
    code = orig.__code__
    n = nargs_of(code)
    instrs = []
    if code.co_freevars:
        instrs.append(Instr("COPY_FREE_VARS", len(code.co_freevars)))
    instrs.append(Instr("RESUME", 0))
    instrs.extend(body)
    for instr in instrs:  # every instruction has a line (3.13 tracebacks show None otherwise)
        if isinstance(instr, Instr) and not isinstance(instr.lineno, int):
            instr.lineno = code.co_firstlineno
    bc = Bytecode(instrs)
    bc.argnames = list(code.co_varnames[:n])
    bc.argcount = n
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.freevars = list(code.co_freevars)
    bc.name = name or f"__transformed_{code.co_name}"
    bc.filename = code.co_filename
    bc.first_lineno = code.co_firstlineno
    bc.flags = CompilerFlags.OPTIMIZED | CompilerFlags.NEWLOCALS
    if not code.co_freevars:
        bc.flags |= CompilerFlags.NOFREE
    new = bc.to_code()
    _C.set_cache(new, SKIP)
    return new


def return_const(orig, value):
    return make_code(orig, [Instr("LOAD_CONST", value), Instr("RETURN_VALUE")])


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Hook:
    """Routes the thread's callback to per-code handlers and records calls.

    Codes without a handler get None (run normally), so stray frames (pytest,
    stdlib) are never marked or cached.
    """

    def __init__(self):
        self.handlers = {}
        self.calls = []  # (code, f_locals, func) for handled codes
        self.codes = set()
        self.record = True  # False: count only (keeps no references)
        self.unrecorded = 0

    def on(self, fn, handler):
        code = fn.__code__
        self.handlers[code] = handler
        self.codes.add(code)
        _C.set_cache(code, None)
        return fn

    def __call__(self, code, f_locals, func):
        handler = self.handlers.get(code)
        if handler is None:
            return RUN_EAGER
        if self.record:
            self.calls.append((code, f_locals, func))
        else:
            self.unrecorded += 1
        return handler(code, f_locals, func)

    def count(self, fn):
        return sum(1 for c, _, _ in self.calls if c is fn.__code__)

    def run(self, fn, *args, **kwargs):
        """Call fn with the hook active for this thread, then turn it off."""
        prev = _C.set_callback(self)
        try:
            return fn(*args, **kwargs)
        finally:
            _C.set_callback(prev)


@pytest.fixture
def hook():
    prev = _C.set_callback(None)
    h = Hook()
    try:
        yield h
    finally:
        _C.set_callback(prev)
        for code in h.codes:
            _C.set_cache(code, None)


def always(*_):
    return True


def never(*_):
    return False


# --------------------------------------------------------------------------
# module surface and cache storage
# --------------------------------------------------------------------------

def test_import_and_skip_sentinel():
    assert _C.SKIP is SKIP
    assert repr(SKIP) == "<dynamo_lite._C.SKIP>"
    with pytest.raises(TypeError):
        type(SKIP)()
    assert copy.copy(SKIP) is SKIP
    assert copy.deepcopy(SKIP) is SKIP
    assert pickle.loads(pickle.dumps(SKIP)) is SKIP
    assert _C.get_callback() is None


def test_cache_roundtrip_refcounts():
    def f():
        return 1

    code = f.__code__
    assert _C.get_cache(code) is None
    entry = Entry(always)
    base = sys.getrefcount(entry)
    cache = [entry]
    _C.set_cache(code, cache)
    assert sys.getrefcount(entry) == base + 2  # our list and C's copy
    got = _C.get_cache(code)
    assert got == [entry] and got is not cache  # a copy: C's list is its own
    del got
    cache.append(42)  # changing ours does not reach C's
    assert _C.cache_entries(code) == [entry]
    del cache
    assert sys.getrefcount(entry) == base + 1
    # replacing releases the old value
    skip_base = sys.getrefcount(SKIP)
    _C.set_cache(code, SKIP)
    assert sys.getrefcount(entry) == base
    assert sys.getrefcount(SKIP) == skip_base + 1
    assert _C.get_cache(code) is SKIP
    assert _C.cache_entries(code) == []
    _C.set_cache(code, [entry])
    assert sys.getrefcount(SKIP) == skip_base
    _C.set_cache(code, None)
    assert sys.getrefcount(entry) == base
    assert _C.get_cache(code) is None
    assert _C.cache_entries(code) == []
    _C.set_cache(code, None)  # clearing twice is fine


def test_cache_released_with_code():
    ns = {}
    exec("def g():\n    return 1\n", ns)
    entry = Entry(always)
    base = sys.getrefcount(entry)
    _C.set_cache(ns["g"].__code__, [entry])
    assert sys.getrefcount(entry) == base + 1
    del ns
    gc.collect()
    assert sys.getrefcount(entry) == base


def test_cache_argument_checks():
    code = test_cache_argument_checks.__code__
    with pytest.raises(TypeError):
        _C.set_cache(code, (always, None))
    with pytest.raises(TypeError, match="must be _C.CacheEntry objects, not tuple"):
        _C.set_cache(code, [Entry(always), (always, None)])
    with pytest.raises(TypeError, match="must be _C.CacheEntry objects, not tuple"):
        _C.insert_entry(code, (always, None))
    with pytest.raises(TypeError):
        _C.set_cache("not code", [])
    with pytest.raises(TypeError):
        _C.get_cache(len)
    with pytest.raises(TypeError):
        _C.set_cache(code)
    with pytest.raises(TypeError):
        _C.set_callback(42)
    assert _C.get_cache(code) is None


def test_set_callback_returns_previous_and_installs():
    def cb1(*a):
        return RUN_EAGER

    def cb2(*a):
        return RUN_EAGER

    prev = _C.set_callback(None)
    try:
        assert _C.set_callback(cb1) is None
        assert _C._is_installed()
        assert _C.get_callback() is cb1
        assert _C.set_callback(cb2) is cb1
        assert _C.set_callback(None) is cb2
        assert _C.get_callback() is None
    finally:
        _C.set_callback(prev)


def test_uninstall_and_reinstall(hook):
    def f(x):
        return x

    hook.on(f, lambda *a: RUN_EAGER)
    prev = _C.set_callback(hook)
    try:
        assert _C._is_installed()
        _C.uninstall()
        assert not _C._is_installed()
        f(1)  # callback set, but our function is not installed
        assert hook.count(f) == 0
        _C.set_callback(hook)  # re-installs
        assert _C._is_installed()
        f(1)
        assert hook.count(f) == 1
    finally:
        _C.set_callback(prev)


# --------------------------------------------------------------------------
# the callback
# --------------------------------------------------------------------------

def test_callback_receives_code_args_and_func(hook):
    def f(a, b=2, *args, c, d=4, **kw):
        return (a, b, args, c, d, kw)

    hook.on(f, lambda *a: RUN_EAGER)
    result = hook.run(f, 1, 5, 6, 7, c=3, e=9)
    assert result == (1, 5, (6, 7), 3, 4, {"e": 9})
    (code, f_locals, func), = hook.calls
    assert code is f.__code__
    assert func is f
    assert f_locals == {"a": 1, "b": 5, "args": (6, 7), "c": 3, "d": 4,
                        "kw": {"e": 9}}
    assert list(f_locals) == ["a", "b", "c", "d", "args", "kw"]


def test_callback_sees_raw_values_of_cell_arguments(hook):
    def f(a, b):
        return lambda: a + b  # a and b become cells after MAKE_CELL

    hook.on(f, lambda *a: RUN_EAGER)
    g = hook.run(f, 1, 2)
    assert g() == 3
    assert hook.calls[0][1] == {"a": 1, "b": 2}


def test_none_runs_original_every_time(hook):
    def f(x):
        return x * 2

    hook.on(f, lambda *a: RUN_EAGER)
    assert hook.run(f, 3) == 6
    assert hook.run(f, 4) == 8
    assert hook.count(f) == 2
    assert _C.get_cache(f.__code__) is None


def test_skip_marks_code(hook):
    def f(x):
        return x + 1

    hook.on(f, lambda *a: SKIP)
    assert hook.run(f, 1) == 2
    assert _C.get_cache(f.__code__) is SKIP
    assert hook.run(f, 2) == 3
    assert hook.count(f) == 1


def test_callback_exception_propagates(hook):
    def f(x):
        return x

    def boom(*a):
        raise ValueError("from callback")

    hook.on(f, boom)
    prev = _C.set_callback(hook)
    try:
        with pytest.raises(ValueError, match="from callback"):
            f(1)
        assert _C.get_callback() is hook  # restored after the error
        with pytest.raises(ValueError):
            f(1)
    finally:
        _C.set_callback(prev)
    assert hook.count(f) == 2
    assert _C.get_cache(f.__code__) is None


@pytest.mark.parametrize("bad", [None, 42, (always,), (always, None), (always, 1), (1, None),
                                 [always, None]])
def test_callback_bad_result_is_type_error(hook, bad):
    def f(x):
        return x

    hook.on(f, lambda *a: bad)
    with pytest.raises(TypeError):
        hook.run(f, 1)
    assert _C.get_cache(f.__code__) is None


def test_hook_is_off_inside_callback(hook):
    def f(x):
        return x

    seen_inside = []

    def handler(code, f_locals, func):
        seen_inside.append(_C.get_callback())
        assert func(f_locals["x"]) == f_locals["x"]  # no recursion
        return RUN_EAGER

    hook.on(f, handler)
    prev = _C.set_callback(hook)
    try:
        assert f(5) == 5
        assert _C.get_callback() is hook
    finally:
        _C.set_callback(prev)
    assert seen_inside == [None]
    assert hook.count(f) == 1


def test_set_callback_inside_callback_is_scoped(hook):
    def f(x):
        return x

    def other(*a):
        return None

    hook.on(f, lambda *a: (_C.set_callback(other), RUN_EAGER)[1])
    prev = _C.set_callback(hook)
    try:
        f(1)
        assert _C.get_callback() is hook
    finally:
        _C.set_callback(prev)


def test_generators_and_coroutines_never_reach_callback(hook):
    def gen(n):
        yield from range(n)

    async def coro(x):
        return x

    async def agen():
        yield 1

    def genexpr_user(n):
        return sum(i for i in range(n))

    for fn in (gen, coro, agen):
        hook.on(fn, lambda *a: pytest.fail("generator reached callback"))
    hook.on(genexpr_user, lambda *a: RUN_EAGER)

    def body():
        assert list(gen(3)) == [0, 1, 2]
        assert asyncio.run(coro(7)) == 7

        async def drain():
            return [v async for v in agen()]

        assert asyncio.run(drain()) == [1]
        assert genexpr_user(4) == 6

    hook.run(body)
    assert {c.co_name for c, _, _ in hook.calls} == {"genexpr_user"}


# --------------------------------------------------------------------------
# cache entries
# --------------------------------------------------------------------------

def test_entry_runs_new_code(hook):
    def f(a, b=2, *args, c, **kw):
        return "original"

    new = return_const(f, "new")
    guard_calls = []

    def check(*args):
        guard_calls.append(args)
        return True

    hook.on(f, lambda *a: Entry(check, new))
    assert hook.run(f, 1, c=3) == "new"
    assert hook.count(f) == 1
    assert guard_calls == []  # a fresh entry runs without its guard
    entry, = _C.get_cache(f.__code__)
    assert (entry.check, entry.code, entry.owner) == (check, new, None)

    assert hook.run(f, 1, 5, 6, c=3, d=4) == "new"
    assert hook.count(f) == 1  # hit: no callback
    (args,) = guard_calls
    # argument slot order: positional, keyword-only, *args, **kwargs
    assert args[:5] == (1, 5, 3, (6,), {"d": 4})
    assert args[5] is f.__globals__
    assert args[6] is f
    assert len(args) == 7


def test_new_code_receives_all_arguments_positionally(hook):
    def f(a, *args, k, **kw):
        return None

    new = make_code(f, [
        Instr("LOAD_FAST", "a"),
        Instr("LOAD_FAST", "args"),
        Instr("LOAD_FAST", "k"),
        Instr("LOAD_FAST", "kw"),
        Instr("BUILD_TUPLE", 4),
        Instr("RETURN_VALUE"),
    ])
    hook.on(f, lambda *a: Entry(always, new))
    assert hook.run(f, 1, 2, k=3, z=4) == (1, (2,), 3, {"z": 4})
    assert hook.run(f, 5, k=6) == (5, (), 6, {})


def test_failing_guard_calls_callback_again_and_hit_moves_to_front(hook):
    def f(x):
        return "original"

    new_int = return_const(f, "int")
    new_str = return_const(f, "str")

    def is_int(x, g, fn):
        return type(x) is int

    def is_str(x, g, fn):
        return type(x) is str

    def handler(code, f_locals, func):
        x = f_locals["x"]
        return Entry(is_int, new_int) if type(x) is int else Entry(is_str, new_str)

    hook.on(f, handler)
    assert hook.run(f, 1) == "int"
    assert hook.run(f, "a") == "str"  # guard fails -> callback again
    assert hook.count(f) == 2
    cache = _C.get_cache(f.__code__)
    assert [e.check for e in cache] == [is_str, is_int]  # newest first
    assert hook.run(f, 2) == "int"  # hit on the second entry
    assert hook.count(f) == 2
    assert [e.check for e in _C.get_cache(f.__code__)] == [is_int, is_str]


def test_only_true_is_a_hit(hook):
    def f(x):
        return "original"

    new = return_const(f, "new")
    hook.on(f, lambda *a: Entry(lambda *g: 1, new))
    assert hook.run(f, 1) == "new"
    assert hook.run(f, 1) == "new"
    assert hook.count(f) == 2  # 1 is truthy but not True: miss
    assert len(_C.get_cache(f.__code__)) == 2


def test_entry_with_code_none_runs_original(hook):
    def f(x):
        return x * 10

    hook.on(f, lambda *a: Entry(always, None))
    assert hook.run(f, 2) == 20
    assert hook.run(f, 3) == 30
    assert hook.count(f) == 1


def test_check_fn_raising_is_a_miss(hook, monkeypatch):
    def f(x):
        return "original"

    new = return_const(f, "new")
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)

    def bad_check(*a):
        raise RuntimeError("guard failed hard")

    entries = iter([Entry(bad_check, new), Entry(never, None)])
    hook.on(f, lambda *a: next(entries))
    assert hook.run(f, 1) == "new"  # fresh entry runs without its guard
    assert hook.run(f, 1) == "original"  # guard raised -> miss -> callback
    assert hook.count(f) == 2
    assert len(reported) == 1
    assert isinstance(reported[0].exc_value, RuntimeError)
    assert reported[0].object is bad_check


def test_guard_runs_with_hook_off(hook):
    def f(x):
        return "original"

    def helper():
        return 1

    seen = []

    def check(x, g, fn):
        seen.append(_C.get_callback())
        helper()  # would reach the callback if the hook were on
        return True

    new = return_const(f, "new")
    hook.on(f, lambda *a: Entry(check, new))
    hook.on(helper, lambda *a: pytest.fail("hook on inside guard"))
    hook.run(f, 1)
    assert hook.run(f, 1) == "new"
    assert seen == [None]


def test_many_arguments_use_heap_buffer(hook):
    names = [f"a{i}" for i in range(40)]
    ns = {}
    exec(f"def f({', '.join(names)}):\n    return 'original'\n", ns)
    f = ns["f"]
    got = []

    def check(*args):
        got.append(args)
        return True

    new = return_const(f, "new")
    hook.on(f, lambda *a: Entry(check, new))
    hook.run(f, *range(40))
    assert hook.run(f, *range(40)) == "new"
    assert got[0][:40] == tuple(range(40))
    assert got[0][40] is ns and got[0][41] is f


def test_closure_is_passed_to_new_code(hook):
    def outer():
        x = 10

        def f(a):
            return ("original", a, x)

        return f

    f = outer()
    new = make_code(f, [
        Instr("LOAD_CONST", "new"),
        Instr("LOAD_FAST", "a"),
        Instr("LOAD_DEREF", FreeVar("x")),
        Instr("BUILD_TUPLE", 3),
        Instr("RETURN_VALUE"),
    ])
    hook.on(f, lambda *a: Entry(always, new))
    assert hook.run(f, 1) == ("new", 1, 10)
    assert hook.run(f, 2) == ("new", 2, 10)
    g = outer()  # same code, another closure cell
    g.__closure__[0].cell_contents = 99
    assert hook.run(g, 3) == ("new", 3, 99)


def test_new_code_runs_with_hook_active(hook):
    def g(x):
        return x + 1

    def f(x):
        return "original"

    new = make_code(f, [
        Instr("LOAD_GLOBAL", (True, "g")),
        Instr("LOAD_FAST", "x"),
        *call(1),
        Instr("RETURN_VALUE"),
    ])
    globals()["g"] = g
    try:
        hook.on(f, lambda *a: Entry(always, new))
        hook.on(g, lambda *a: RUN_EAGER)
        assert hook.run(f, 1) == 2
        assert hook.run(f, 2) == 3
    finally:
        del globals()["g"]
    assert hook.count(f) == 1
    assert hook.count(g) == 2  # reached from the new code both times


def test_new_code_exception_propagates(hook):
    def f(x):
        return "original"

    new = make_code(f, [
        Instr("LOAD_FAST", "x"),
        Instr("LOAD_CONST", 0),
        Instr("BINARY_OP", 11),  # x / 0
        Instr("RETURN_VALUE"),
    ])
    hook.on(f, lambda *a: Entry(always, new))
    with pytest.raises(ZeroDivisionError):
        hook.run(f, 1)
    with pytest.raises(ZeroDivisionError):
        hook.run(f, 1)


# --------------------------------------------------------------------------
# call scopes: CallWithHookOff, CallWithCallback
# --------------------------------------------------------------------------

def test_call_with_hook_off_turns_hook_off_and_restores(hook):
    def f(x):
        return x

    seen = []

    def inner(a, *, k):
        seen.append(_C.get_callback())
        return f(a) + k

    hook.on(f, lambda *a: RUN_EAGER)
    d = _C.CallWithHookOff(inner)
    assert d.__wrapped__ is inner
    assert "CallWithHookOff" in repr(d)
    prev = _C.set_callback(hook)
    try:
        assert d(1, k=2) == 3
        assert _C.get_callback() is hook
        assert hook.count(f) == 0
        f(1)
        assert hook.count(f) == 1
    finally:
        _C.set_callback(prev)
    assert seen == [None]


def test_call_with_callback_sets_it_for_the_call_only():
    seen = []

    def cb(*args):
        return RUN_EAGER

    def inner(a):
        seen.append(_C.get_callback())
        if a < 0:
            raise KeyError("x")
        return a + 1

    d = _C.CallWithCallback(inner, cb)
    assert "compiled" in repr(d) and d.callback is cb
    before = sys.getrefcount(cb)
    prev = _C.set_callback(None)
    try:
        for _ in range(1000):
            assert d(1) == 2
        with pytest.raises(KeyError):
            d(-1)
        assert _C.get_callback() is None
    finally:
        _C.set_callback(prev)
    assert seen[0] is cb and seen[-1] is cb
    seen.clear()
    assert sys.getrefcount(cb) == before
    with pytest.raises(TypeError):
        _C.CallWithCallback(inner, 5)
    with pytest.raises(TypeError):
        _C.CallWithCallback(inner)
    with pytest.raises(TypeError):
        _C.CallWithHookOff(inner, cb)


def test_call_with_hook_off_restores_on_exception(hook):
    def boom():
        raise KeyError("x")

    prev = _C.set_callback(hook)
    try:
        with pytest.raises(KeyError):
            _C.CallWithHookOff(boom)()
        assert _C.get_callback() is hook
    finally:
        _C.set_callback(prev)


def test_call_with_hook_off_misc():
    with pytest.raises(TypeError):
        _C.CallWithHookOff(1)
    with pytest.raises(TypeError):
        _C.CallWithHookOff()
    with pytest.raises(TypeError):
        _C.CallWithHookOff(len, fn=len)

    class C:
        @_C.CallWithHookOff
        def m(self, y):
            return (self, y)

    c = C()
    assert c.m(2) == (c, 2)
    assert isinstance(C.__dict__["m"], _C.CallWithHookOff)

    import functools

    def target(x):
        """doc"""
        return x

    d = functools.update_wrapper(_C.CallWithHookOff(target), target)
    assert d.__name__ == "target" and d.__wrapped__ is target
    assert d(4) == 4


def test_call_with_hook_off_is_gc_tracked():
    class Holder:
        pass

    h = Holder()
    d = _C.CallWithHookOff(lambda: h)
    h.d = d  # cycle: d -> lambda -> cell -> h -> d
    ref = weakref.ref(d)
    del d, h
    gc.collect()
    assert ref() is None


# --------------------------------------------------------------------------
# threads
# --------------------------------------------------------------------------

def test_threads_see_only_their_own_callback(hook):
    def f(x):
        return x

    barrier = threading.Barrier(2)
    results = {}
    errors = []

    def worker(name):
        seen = []

        def cb(code, f_locals, func):
            if code is f.__code__:
                seen.append((name, threading.get_ident()))
            return RUN_EAGER

        prev = _C.set_callback(cb)
        try:
            barrier.wait()  # both callbacks set now
            for i in range(100):
                f(i)
            barrier.wait()  # both done calling
            results[name] = (seen, _C.get_callback() is cb, threading.get_ident())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            _C.set_callback(prev)

    threads = [threading.Thread(target=worker, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for name, (seen, own, ident) in results.items():
        assert own
        assert seen == [(name, ident)] * 100
    assert _C.get_callback() is None  # main thread untouched
    f(1)


# --------------------------------------------------------------------------
# reference counts and memory
# --------------------------------------------------------------------------

N_CALLS = 100_000


def _calls_keep_refcounts_flat(hook, fn, arg, extra_objects=()):
    watched = [arg, fn, *extra_objects]
    hook.record = False
    prev = _C.set_callback(hook)
    try:
        for _ in range(1000):  # warm up caches, specialisation, arenas
            fn(arg)
        before = [sys.getrefcount(o) for o in watched]
        rss_before = rss_bytes()
        for _ in range(N_CALLS):
            fn(arg)
        rss_after = rss_bytes()
        after = [sys.getrefcount(o) for o in watched]
    finally:
        _C.set_callback(prev)
        hook.record = True
    assert after == before
    # one leaked small object per call would be >= 3 MB
    assert rss_after - rss_before < 2 * 1024 * 1024


def test_refcounts_flat_on_hit_failed_and_raising_guards(hook, monkeypatch):
    monkeypatch.setattr(sys, "unraisablehook", lambda u: None)
    arg, other = object(), object()

    def outer():
        y = object()

        def f(x):
            return ("original", y)

        return f

    f = outer()
    new_a = make_code(f, [Instr("LOAD_DEREF", FreeVar("y")),
                          Instr("RETURN_VALUE")])
    new_b = return_const(f, "b")

    def check_a(x, g, fn):
        if x is other:
            raise ValueError("guard error")
        return x is arg

    def check_b(x, g, fn):
        return x is other

    entry_a, entry_b = Entry(check_a, new_a), Entry(check_b, new_b)
    entries = iter([entry_a, entry_b])
    hook.on(f, lambda *a: next(entries))

    def drive(x):
        # alternating: each call fails (or raises in) the first guard,
        # hits the second entry and moves it to the front
        f(arg)
        return f(other)

    hook.on(drive, lambda *a: RUN_EAGER)
    y = f.__closure__[0].cell_contents
    assert hook.run(f, arg) is y
    assert hook.run(f, other) == "b"
    assert hook.count(f) == 2

    def no_more_misses(*a):
        raise AssertionError("cache miss")

    hook.handlers[f.__code__] = no_more_misses
    _calls_keep_refcounts_flat(
        hook, drive, arg,
        [other, y, check_a, check_b, new_a, new_b, entry_a, entry_b])


def test_refcounts_flat_on_miss_and_skip(hook):
    def f(x):
        return x

    def g(x):
        return x

    hook.on(f, lambda *a: RUN_EAGER)
    hook.on(g, lambda *a: SKIP)
    arg = object()
    _calls_keep_refcounts_flat(hook, f, arg)
    hook.unrecorded = 0
    _calls_keep_refcounts_flat(hook, g, arg)
    assert hook.unrecorded == 1
    assert _C.get_cache(g.__code__) is SKIP


def test_refcounts_flat_when_callback_raises(hook):
    def boom(*a):
        raise ValueError

    def h(x):
        return x

    def call_h(x):
        try:
            h(x)
        except ValueError:
            pass

    hook.on(h, boom)
    hook.on(call_h, lambda *a: RUN_EAGER)
    arg = object()
    _calls_keep_refcounts_flat(hook, call_h, arg, [boom, h])


def test_refcounts_flat_through_call_with_hook_off(hook):
    def boom(x):
        raise KeyError(x)

    d = _C.CallWithHookOff(boom)

    def call(x):
        try:
            d(x)
        except KeyError:
            pass

    hook.on(call, lambda *a: RUN_EAGER)
    arg = object()
    _calls_keep_refcounts_flat(hook, call, arg, [boom, d])


# --------------------------------------------------------------------------
# moving arguments into the callee (call_moving; a hit's frame arguments)
# --------------------------------------------------------------------------

class Probe:
    pass


def probe_and_ref():
    obj = Probe()
    return obj, weakref.ref(obj)


def test_call_moving_leaves_the_callee_the_only_holder(hook):
    def f(x, y):
        del x
        return ref() is None, y

    hook.on(f, lambda *a: RUN_EAGER)
    hook.record = False  # a recorded call keeps its arguments
    obj, ref = probe_and_ref()
    args = [obj, "y"]
    del obj
    assert hook.run(_C.call_moving, f, args) == (True, "y")  # dead at `del x`, as in an inlined call
    assert args == [] and ref() is None


def test_call_moving_without_callback_still_moves(hook):
    def f(x):
        del x
        return ref() is None

    _C.set_callback(hook)  # installs the hook; no callback for the call itself
    _C.set_callback(None)
    obj, ref = probe_and_ref()
    args = [obj]
    del obj
    assert _C.call_moving(f, args) is True


def test_hit_moves_frame_arguments_into_new_code(hook):
    # the original frame is cleared unevaluated: it must not keep the arguments while the
    # entry's code runs (resume functions drop objects the user's code drops)
    def f(x):
        return "original"

    new = make_code(f, [
        Instr("DELETE_FAST", "x"),
        Instr("LOAD_GLOBAL", (True, "_arg_was_freed")),
        *call(0),
        Instr("RETURN_VALUE"),
    ])
    ref = None
    globals()["_arg_was_freed"] = lambda: ref() is None
    hook.on(f, lambda *a: Entry(always, new))
    hook.record = False  # a recorded call keeps its arguments
    for _ in range(2):  # miss, then hit
        obj, ref = probe_and_ref()
        args = [obj]
        del obj
        assert hook.run(_C.call_moving, f, args) is True


def test_call_moving_other_callables_and_errors(hook):
    class C:
        def m(self, x):
            return x

    hook.on(C.m, lambda *a: RUN_EAGER)
    obj = object()
    assert hook.run(_C.call_moving, C().m, [obj]) is obj  # a bound method: no move, same result
    assert hook.run(_C.call_moving, len, [[1, 2]]) == 2
    with pytest.raises(TypeError):
        _C.call_moving(len, ([1],))
    with pytest.raises(TypeError):
        _C.call_moving(len)

    def one(x):
        return x

    args = [obj, obj]
    before = sys.getrefcount(obj)
    with pytest.raises(TypeError):  # the frame is never made: nothing moved, nothing leaked
        hook.run(_C.call_moving, one, args)
    assert args == [] and sys.getrefcount(obj) == before - 2
    many = [object() for _ in range(20)]  # past the small buffer
    assert hook.run(_C.call_moving, lambda *a: len(a), list(many)) == 20


def test_refcounts_flat_through_call_moving(hook):
    def f(x, y):
        del x
        return y

    new = make_code(f, [Instr("LOAD_FAST", "y"), Instr("RETURN_VALUE")])
    hook.on(f, lambda *a: Entry(always, new))

    def call(x):
        _C.call_moving(f, [x, x])
        _C.call_moving(f, [x])  # TypeError before any frame runs

    def drive(x):
        try:
            call(x)
        except TypeError:
            pass

    hook.on(drive, lambda *a: RUN_EAGER)
    hook.on(call, lambda *a: RUN_EAGER)
    _calls_keep_refcounts_flat(hook, drive, object(), [f, new])


# --------------------------------------------------------------------------
# another PEP 523 user
# --------------------------------------------------------------------------

def test_coexists_with_torch_compile(hook):
    torch = pytest.importorskip("torch")

    def user(x):
        return x + 1

    hook.on(user, lambda *a: RUN_EAGER)

    def body(t):
        return t * 2

    compiled = torch.compile(body, backend="eager")
    prev = _C.set_callback(hook)
    try:
        assert user(1) == 2
        assert torch.equal(compiled(torch.ones(2)), torch.full((2,), 2.0))
        _C.set_callback(hook)  # re-install if torch replaced us
        assert _C._is_installed()
        assert user(2) == 3
    finally:
        _C.set_callback(prev)
    assert hook.count(user) == 2


# --------------------------------------------------------------------------
# the ALWAYS fallback entry
# --------------------------------------------------------------------------

def test_always_sentinel_surface():
    assert repr(_C.ALWAYS) == "<dynamo_lite._C.ALWAYS>"
    assert _C.ALWAYS() is True and _C.ALWAYS(1, x=2) is True
    assert copy.copy(_C.ALWAYS) is _C.ALWAYS
    assert pickle.loads(pickle.dumps(_C.ALWAYS)) is _C.ALWAYS


def test_always_entry_stays_last_and_stops_callbacks(hook):
    def f(x):
        return "original"

    new_int = return_const(f, "int")

    def is_int(x, g, fn):
        return type(x) is int

    def handler(code, f_locals, func):
        if type(f_locals["x"]) is int:
            return Entry(is_int, new_int)
        return Entry(_C.ALWAYS, None)  # everything else: run the original, never ask again

    hook.on(f, handler)
    assert hook.run(f, 1) == "int"
    assert hook.run(f, "a") == "original"
    assert hook.count(f) == 2
    assert [e.check for e in _C.get_cache(f.__code__)] == [is_int, _C.ALWAYS]
    assert hook.run(f, 2.5) == "original"  # hits ALWAYS: no callback
    assert hook.run(f, 3) == "int"  # the int entry is still found first
    assert hook.count(f) == 2
    assert [e.check for e in _C.get_cache(f.__code__)] == [is_int, _C.ALWAYS]


def test_always_entry_added_once_and_new_entries_go_before_it(hook):
    def f(x):
        return "original"

    new = return_const(f, "new")
    hook.on(f, lambda *a: Entry(_C.ALWAYS, None))
    assert hook.run(f, 1) == "original"
    assert len(_C.get_cache(f.__code__)) == 1
    _C.insert_entry(f.__code__, Entry(never, new))  # in front
    _C.insert_entry(f.__code__, Entry(_C.ALWAYS, None))  # same owner (None): not added again
    _C.insert_entry(f.__code__, Entry(_C.ALWAYS, None, hook))  # another owner's: added last
    hook.handlers[f.__code__] = lambda *a: Entry(always, new)
    # a miss cannot happen any more (ALWAYS matches): the callback is not called
    assert hook.run(f, 2) == "original"
    assert hook.count(f) == 1
    cache = _C.get_cache(f.__code__)
    assert [(e.check, e.owner) for e in cache] == [(never, None), (_C.ALWAYS, None), (_C.ALWAYS, hook)]


# --------------------------------------------------------------------------
# CacheEntry: validated once, read back, the function that runs its code
# --------------------------------------------------------------------------

def test_cache_entry_fields_and_validation():
    def f(x):
        return x

    new = return_const(f, "new")
    owner = object()
    e = Entry(always, new, owner, compile_id="3/1", guard="g", graph_module="gm")
    assert (e.check, e.code, e.owner, e.compile_id, e.guard, e.graph_module) == \
        (always, new, owner, "3/1", "g", "gm")
    assert e._function is None  # made on the first run
    d = Entry(never)
    assert (d.code, d.owner, d.compile_id, d.guard, d.graph_module) == (None,) * 5
    assert d.serial > e.serial  # creation order
    assert "3/1" in repr(e) and "CacheEntry" in repr(e)
    with pytest.raises(AttributeError):
        e.code = None  # read-only: validated once, trusted on every lookup
    with pytest.raises(TypeError, match="check must be a GuardProgram, ALWAYS or a callable, not int"):
        Entry(1)
    with pytest.raises(TypeError, match="code must be a code object or None, not str"):
        Entry(always, "code")
    with pytest.raises(TypeError, match="compile_id must be a str or None, not int"):
        Entry(always, compile_id=3)
    with pytest.raises(TypeError):
        Entry()
    with pytest.raises(TypeError):
        class Sub(Entry):  # noqa: F811 - not a base type: the hook trusts the exact type
            pass


def test_markers_are_distinct_constants():
    assert len({id(SKIP), id(RUN_EAGER), id(_C.ALWAYS)}) == 3
    assert repr(RUN_EAGER) == "<dynamo_lite._C.RUN_EAGER>"
    assert pickle.loads(pickle.dumps(RUN_EAGER)) is RUN_EAGER
    assert copy.copy(RUN_EAGER) is RUN_EAGER
    with pytest.raises(TypeError):
        type(RUN_EAGER)()
    assert not callable(SKIP) and not callable(RUN_EAGER) and callable(_C.ALWAYS)


def test_entries_read_back_through_C(hook):
    def f(x):
        return "original"

    new = return_const(f, "int")

    def is_int(x, g, fn):
        return type(x) is int

    owner = object()
    hook.on(f, lambda code, f_locals, func: Entry(is_int, new, owner, compile_id="0/0")
            if type(f_locals["x"]) is int else Entry(_C.ALWAYS, None, owner))
    assert _C.cache_entries(f.__code__) == []
    hook.run(f, 1)
    hook.run(f, "a")
    entries = _C.cache_entries(f.__code__)
    assert [(e.check, e.code, e.owner, e.compile_id) for e in entries] == \
        [(is_int, new, owner, "0/0"), (_C.ALWAYS, None, owner, None)]
    assert entries == _C.get_cache(f.__code__) and entries is not _C.cache_entries(f.__code__)
    entries.clear()  # a copy: the cache is unchanged
    assert len(_C.cache_entries(f.__code__)) == 2
    _C.set_cache(f.__code__, SKIP)
    assert _C.cache_entries(f.__code__) == []


def test_replacing_a_cache_runs_finalizers_with_the_new_cache_in_place():
    """Releasing the old entries may run code (a check's finalizer) that reads the same code's
    cache: it sees the new value, never the list being freed."""
    def f(x):
        return x

    seen = []

    class Check:
        def __call__(self, *args):
            return False

        def __del__(self):
            seen.append(_C.cache_entries(f.__code__))

    _C.set_cache(f.__code__, [Entry(Check(), None, None)])
    _C.set_cache(f.__code__, None)
    gc.collect()
    assert seen == [[]]
    _C.set_cache(f.__code__, [Entry(Check(), None, None)])
    _C.set_cache(f.__code__, SKIP)
    assert seen == [[], []] and _C.get_cache(f.__code__) is SKIP
    _C.set_cache(f.__code__, None)


def test_hits_reuse_one_function(hook):
    def f(x):
        return "original"

    new = make_code(f, [Instr("LOAD_FAST", "x"), Instr("RETURN_VALUE")])
    hook.on(f, lambda *a: Entry(always, new))
    assert hook.run(f, 1) == 1
    entry, = _C.cache_entries(f.__code__)
    fn = entry._function
    assert type(fn).__name__ == "function" and fn.__code__ is new
    assert fn.__closure__ is None and fn.__globals__ == {}  # parked: holds no frame's objects
    ref = weakref.ref(fn)
    del fn  # (a function someone else holds is not reused)
    for i in range(5):
        assert hook.run(f, i) == i
        assert entry._function is ref()  # the same function on every hit


def _closure_case():
    """(make(value) -> a function of one code with its own cell, new code reading the cell)."""
    def make(value):
        y = value

        def f(x):
            return ("original", x, y)

        return f

    new = make_code(make(0), [
        Instr("LOAD_CONST", "new"),
        Instr("LOAD_FAST", "x"),
        Instr("LOAD_DEREF", FreeVar("y")),
        Instr("BUILD_TUPLE", 3),
        Instr("RETURN_VALUE"),
    ])
    return make, new


def test_same_code_different_closures_and_globals(hook):
    make, new = _closure_case()
    f, g = make("f"), make("g")
    assert f.__code__ is g.__code__
    hook.on(f, lambda *a: Entry(always, new))
    for i in range(3):  # alternating closures of one code: each call sees its own cell
        assert hook.run(f, i) == ("new", i, "f")
        assert hook.run(g, i) == ("new", i, "g")
    entry, = _C.cache_entries(f.__code__)
    assert entry._function is not None and entry._function.__closure__ is None

    # one code under two globals dicts (and builtins)
    def h(x):
        return "original"

    reader = make_code(h, [Instr("LOAD_GLOBAL", (True, "len")), Instr("LOAD_GLOBAL", (False, "WHERE")),
                           *call(1), Instr("RETURN_VALUE")])
    ns1 = {"WHERE": "one", "__builtins__": {"len": lambda s: ("len1", s)}}
    ns2 = {"WHERE": "two!", "__builtins__": {"len": lambda s: ("len2", s)}}
    h1 = type(h)(h.__code__, ns1)
    h2 = type(h)(h.__code__, ns2)
    hook.on(h, lambda *a: Entry(always, reader))
    for _ in range(3):
        assert hook.run(h1, 0) == ("len1", "one")
        assert hook.run(h2, 0) == ("len2", "two!")


def test_parked_function_keeps_no_closure_alive(hook):
    class Big:
        pass

    make, new = _closure_case()
    hook.on(make(None), lambda *a: Entry(always, new))
    value = Big()
    ref = weakref.ref(value)
    f = make(value)
    del value
    hook.record = False  # (recorded calls would hold f)
    result = hook.run(f, 1)
    assert result[2] is ref()
    del f, result
    gc.collect()
    assert ref() is None  # the entry's parked function does not hold the last closure


def test_recursive_hits_and_raising_code(hook):
    def f(n):
        return "original"

    # new code: n and f(n - 1) or 0 -> a recursive hit while the outer run has the function out
    new = make_code(f, [
        Instr("LOAD_FAST", "n"),
        *bytecode_compat.jump_if(False, label := __import__("bytecode").Label(), lineno=None),
        Instr("LOAD_FAST", "n"),
        Instr("LOAD_GLOBAL", (True, "_recurse")),
        Instr("LOAD_FAST", "n"),
        *call(1),
        Instr("BINARY_OP", 0),
        Instr("RETURN_VALUE"),
        label,
        Instr("LOAD_CONST", 0),
        Instr("RETURN_VALUE"),
    ])
    globals()["_recurse"] = lambda n: f(n - 1)
    try:
        hook.on(f, lambda *a: Entry(always, new))
        assert hook.run(f, 5) == 15
        assert hook.run(f, 5) == 15
        entry, = _C.cache_entries(f.__code__)
        fn = entry._function
        assert fn is not None
        del fn
        # a raising run: the traceback's frame may keep the function; later hits still work
        with pytest.raises(TypeError):
            hook.run(f, "x")
        assert hook.run(f, 3) == 6
    finally:
        del globals()["_recurse"]


def test_refcounts_flat_on_hits_with_changing_closures(hook):
    make, new = _closure_case()
    f, g = make(object()), make(object())
    hook.on(f, lambda *a: Entry(always, new))
    arg = object()

    def drive(x):
        f(x)
        return g(x)

    hook.on(drive, lambda *a: RUN_EAGER)
    hook.run(f, arg)
    entry, = _C.cache_entries(f.__code__)
    hook.handlers[f.__code__] = lambda *a: pytest.fail("cache miss")
    _calls_keep_refcounts_flat(hook, drive, arg, [f.__closure__[0].cell_contents,
                                                   g.__closure__[0].cell_contents, new, entry, f.__globals__])
    import tracemalloc
    hook.record = False
    prev = _C.set_callback(hook)
    try:
        tracemalloc.start()
        for _ in range(1000):
            drive(arg)
        gc.collect()
        before, objects = tracemalloc.get_traced_memory()[0], len(gc.get_objects())
        for _ in range(100_000):
            drive(arg)
        gc.collect()
        after, objects_after = tracemalloc.get_traced_memory()[0], len(gc.get_objects())
        tracemalloc.stop()
    finally:
        _C.set_callback(prev)
    assert after - before < 64 * 1024 and objects_after - objects < 100


# --------------------------------------------------------------------------
# dynamo_lite/cache.py: the Python view of the cache
# --------------------------------------------------------------------------

def test_cache_module_entries_newest_first_per_owner():
    import torch

    import dynamo_lite
    from dynamo_lite import cache

    def f(x):
        return x + 1

    dynamo_lite.reset()
    eager = dynamo_lite.compile(f, backend="eager")
    other = dynamo_lite.compile(f, backend="aot_eager")
    eager(torch.ones(2))
    eager(torch.ones(3))
    other(torch.ones(2))
    every = cache.entries(f.__code__)
    assert len(every) == 3 and [e.serial for e in every] == sorted((e.serial for e in every), reverse=True)
    mine = cache.entries(f.__code__, eager._dl_converter)
    assert len(mine) == 2 and all(e.owner is eager._dl_converter for e in mine)
    assert [e.compile_id.split("/")[1] for e in mine] == ["1", "0"]
    assert all(e.guard is not None and e.code is not None for e in every)
    assert mine[0].graph_module is not None
    eager(torch.ones(2))  # a hit moves the entry to the front of C's list; entries() stays newest first
    assert cache.entries(f.__code__, eager._dl_converter) == mine
    dynamo_lite.reset()
    assert cache.entries(f.__code__) == [] and _C.get_cache(f.__code__) is None


def test_cache_module_reset_leaves_nothing_alive():
    import torch

    import dynamo_lite
    from dynamo_lite import cache

    refs = []
    for i in range(3):
        ns = {}
        exec("def f(x, n):\n    y = x * 2\n    print('mid') if n > 5 else None\n    return y + n\n", ns)
        fn = ns["f"]
        dynamo_lite.compile(fn, backend="eager")(torch.ones(2), i)
        dynamo_lite.compile(fn, backend="eager")(torch.ones(3), 1.5)
        assert len(cache.entries(fn.__code__)) >= 1
        refs.append(weakref.ref(fn.__code__))
        del fn, ns
    dynamo_lite.reset()
    for _ in range(3):
        gc.collect()
    assert [r() for r in refs] == [None, None, None]
    assert len(cache._TOUCHED) == 0 and len(cache._NOT_CAPTURED) == 0


def test_resume_functions_and_loop_bodies_do_not_keep_their_code_alive():
    import torch

    import dynamo_lite
    from dynamo_lite import cache

    src = ("import dynamo_lite\n"
           "def f(x):\n    y = x * 2\n    dynamo_lite.graph_break()\n    for i in range(2):\n"
           "        y = y + i\n        dynamo_lite.graph_break()\n    return y + 1\n")
    refs = []
    for _ in range(3):
        ns = {}
        exec(src, ns)
        fn = ns["f"]
        dynamo_lite.compile(fn, backend="eager")(torch.ones(2))
        assert "resume" in {key[0] for key in cache._DERIVED.get(fn.__code__, {})}
        # (the loop body is made from the resume function's code, where the loop's break is met)
        assert any(key[0] == "loop body" for table in cache._DERIVED.values() for key in table)
        refs.append(weakref.ref(fn.__code__))
        del fn, ns
    dynamo_lite.reset()
    for _ in range(3):
        gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_cache_module_display_names_and_limits():
    from dynamo_lite import cache

    def f():
        pass

    def g():
        pass

    cache.register_generated(g.__code__, "resume", "resumed at line 7")
    assert cache.display_name(f.__code__) == "f"
    assert cache.display_name(g.__code__) == "g (resumed at line 7)"
    assert cache.is_resume_code(g.__code__) and not cache.is_loop_body(g.__code__)
    try:
        assert [cache.count_not_captured(f.__code__) for _ in range(cache.MAX_NOT_CAPTURED + 1)] == \
            [True] * cache.MAX_NOT_CAPTURED + [False]
        assert cache.first_limit_hit(f.__code__) and not cache.first_limit_hit(f.__code__)
        assert cache.frame_id(f.__code__) == cache.frame_id(f.__code__) != cache.frame_id(g.__code__)
    finally:
        cache.reset()
    assert cache.count_not_captured(f.__code__) and cache.first_limit_hit(f.__code__)
    cache.reset()


# --------------------------------------------------------------------------
# frames run in place of: cleared and popped on every path (3.12+ pops them
# itself; 3.11's caller does), across data-stack chunks, on errors
# --------------------------------------------------------------------------

def _big_frame_recursion(hook):
    """f(n, payload) with a large frame, replaced by code computing
    n and _recurse(n, payload) + 1 or 0 (a recursive hit at each level)."""
    def f(n, payload):
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = n  # noqa: F841 - a large frame
        b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = b8 = b9 = n  # noqa: F841
        return "original"

    new = make_code(f, [
        Instr("LOAD_FAST", "n"),
        *bytecode_compat.jump_if(False, label := __import__("bytecode").Label(), lineno=None),
        Instr("LOAD_GLOBAL", (True, "_recurse_big")),
        Instr("LOAD_FAST", "n"),
        Instr("LOAD_FAST", "payload"),
        *call(2),
        Instr("LOAD_CONST", 1),
        Instr("BINARY_OP", 0),
        Instr("RETURN_VALUE"),
        label,
        Instr("LOAD_CONST", 0),
        Instr("RETURN_VALUE"),
    ])
    globals()["_recurse_big"] = lambda n, payload: f(n - 1, payload)
    hook.on(f, lambda *a: Entry(always, new))
    return f


def test_replaced_frames_cross_data_stack_chunks(hook):
    # each level pushes the original (unevaluated) frame, the new code's frame and the
    # lambda's: 300 levels outgrow the first data-stack chunk, so replaced frames open and
    # close chunks; every one is popped, the payload's references all come back
    f = _big_frame_recursion(hook)
    hook.record = False
    payload = object()
    base = sys.getrefcount(payload)
    try:
        for _ in range(3):
            assert hook.run(f, 300, payload) == 300
            assert sys.getrefcount(payload) == base
        def deeper():  # the same from a deeper Python stack
            return hook.run(f, 150, payload)
        assert deeper() == 150
        assert sys.getrefcount(payload) == base
    finally:
        del globals()["_recurse_big"]


def test_replaced_frames_release_arguments_on_error_paths(hook):
    def f(x):
        return "original"

    payload = object()
    base = sys.getrefcount(payload)

    def raising(*_):
        raise ValueError("callback failed")

    hook.record = False
    hook.on(f, raising)
    for _ in range(3):
        with pytest.raises(ValueError, match="callback failed"):
            hook.run(f, payload)
    assert sys.getrefcount(payload) == base

    hook.on(f, lambda *a: "not an entry")
    with pytest.raises(TypeError, match="must return a CacheEntry"):
        hook.run(f, payload)
    assert sys.getrefcount(payload) == base

    # the entry's code raises: the new frame and the unevaluated one both let go
    new = make_code(f, [Instr("LOAD_FAST", "x"), Instr("LOAD_CONST", 1), Instr("BINARY_OP", 0),
                        Instr("RETURN_VALUE")])
    hook.on(f, lambda *a: Entry(always, new))
    for _ in range(3):
        with pytest.raises(TypeError):
            hook.run(f, payload)
    assert sys.getrefcount(payload) == base

    assert sys.getrefcount(payload) == base


def test_frames_of_trace_callbacks_are_not_captured(hook):
    seen = []

    def tracer(frame, event, arg):
        seen.append(event)
        return None

    def traced(x):
        return x + 1

    def on_trace_event(frame, event, arg):
        # a Python frame run by the trace machinery itself
        return tracer(frame, event, arg)

    hook.on(tracer, lambda *a: Entry(always, return_const(tracer, None)))
    hook.on(traced, lambda *a: RUN_EAGER)
    old = sys.gettrace()
    sys.settrace(on_trace_event)
    try:
        assert hook.run(traced, 1) == 2
    finally:
        sys.settrace(old)
    assert seen, "the trace function ran"
    assert hook.count(tracer) == 0  # never handed to the callback
    assert hook.count(traced) == 1


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring (PEP 669) is new in 3.12")
def test_frames_of_monitoring_callbacks_are_not_captured(hook):
    mon = sys.monitoring
    tool = next(t for t in range(6) if mon.get_tool(t) is None)
    seen = []

    def on_call(code, offset, *rest):
        # a Python frame run by sys.monitoring
        seen.append(code.co_name)
        return callback_body()

    def callback_body():
        return None

    def monitored(x):
        return x + 1

    hook.on(on_call, lambda *a: Entry(always, return_const(on_call, None)))
    hook.on(callback_body, lambda *a: Entry(always, return_const(callback_body, "replaced")))
    hook.on(monitored, lambda *a: RUN_EAGER)
    mon.use_tool_id(tool, "dynamo_lite test")
    try:
        mon.register_callback(tool, mon.events.PY_START, on_call)
        mon.set_local_events(tool, monitored.__code__, mon.events.PY_START)
        assert hook.run(monitored, 1) == 2
    finally:
        mon.set_local_events(tool, monitored.__code__, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.free_tool_id(tool)
    assert seen == ["monitored"]
    assert hook.count(on_call) == 0 and hook.count(callback_body) == 0  # never handed to the callback
    assert hook.count(monitored) == 1


def test_call_with_hook_off_puts_the_default_evaluator_back_for_the_call(hook):
    # nothing a CallWithHookOff runs is captured: while no other callback needs the hook, the
    # previous eval-frame function is back for the call (CPython inlines Python-to-Python calls
    # again), and ours is back afterwards, also after an exception and around a nested scope
    seen = []

    def inner(fail=False):
        seen.append(_C._is_installed())
        _C.CallWithCallback(lambda: seen.append(_C._is_installed()), hook)()
        seen.append(_C._is_installed())
        if fail:
            raise KeyError("x")
        return 1

    off = _C.CallWithHookOff(inner)
    assert not _C._is_installed() or _C._live_callbacks() > 0
    prev = _C.set_callback(hook)
    try:
        assert _C._is_installed()
        assert off() == 1
        assert seen == [False, True, False]
        assert _C._is_installed() and _C.get_callback() is hook
        with pytest.raises(KeyError):
            off(True)
        assert _C._is_installed() and _C.get_callback() is hook
    finally:
        _C.set_callback(prev)
    assert _C._live_callbacks() == (0 if prev is None else 1)
    seen.clear()
    off()  # no callback of this thread to pause: nothing changes
    assert seen == [_C._is_installed(), True, _C._is_installed()]


def test_call_with_hook_off_keeps_the_hook_for_another_threads_callback(hook):
    import threading

    started, release, seen = threading.Event(), threading.Event(), []

    def other():
        prev = _C.set_callback(hook)  # another thread's live callback
        started.set()
        release.wait(10)
        _C.set_callback(prev)

    t = threading.Thread(target=other)
    t.start()
    started.wait(10)
    prev = _C.set_callback(hook)
    try:
        _C.CallWithHookOff(lambda: seen.append(_C._is_installed()))()
    finally:
        _C.set_callback(prev)
        release.set()
        t.join()
    assert seen == [True]
