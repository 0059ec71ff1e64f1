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

from dynamo_lite import _C

SKIP = _C.SKIP
RUN_EAGER = _C.RUN_EAGER
Entry = _C.CacheEntry


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

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
        Instr("PRECALL", 1),
        Instr("CALL", 1),
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
