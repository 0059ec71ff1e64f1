"""print, logging and warnings.warn replayed after the graph (variables/replayed.py), eager vs
compiled: same stdout, log records, warnings (category, message, file, line, registries),
exceptions and order of effects, and no graph break where the replay is exact (torch.compile
2.13 breaks once at each of them).  Where the replay would not be exact, the graph breaks.
"""
import logging
import sys
import warnings

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, check, check_breaks, check_calls, line_of, recording

log = logging.getLogger("acceptance.replayed")
G = []


def reset_g():
    G.clear()


def snap_g():
    return list(G)


def one_graph(fn, *args, **kwargs):
    """check() (stdout, warnings, logs, values) and exactly one graph."""
    cnt = check(fn, *args, **kwargs)
    assert cnt.frame_count == 1, cnt.frame_count
    return cnt


# ---------------------------------------------------------------- print

def test_print_constants_and_options_no_break():
    def f(x):
        print("a", 1, 2.5, None, (1, "b"), sep="|", end="!\n")
        y = x + 1
        print(y.shape, y.dtype, [1, [2]], {"k": 3}, flush=True)
        print()
        return y * 2

    check_breaks(f, torch.ones(3), breaks=0)
    one_graph(f, torch.ones(3))


def test_print_tensor_args_get_the_graph_values():
    def f(x):
        y = x * 3
        print("y", y)
        z = y + 1
        print(z, x)
        return z

    check_breaks(f, torch.arange(3.0), breaks=0)


def test_print_snapshots_a_list_mutated_later():
    def f(x):
        items = [1]
        print(items)
        items.append(2)
        print(items, len(items))
        return x + len(items)

    check_breaks(f, torch.ones(2), breaks=0)


def test_print_in_an_inlined_function_and_a_loop():
    def show(i, v):
        print("step", i, v)

    def f(x):
        for i in range(3):
            x = x + i
            show(i, x)
        return x

    check_breaks(f, torch.zeros(2), breaks=0)


def test_print_keeps_order_with_global_mutations():
    def f(x):
        G.append("before")
        print("middle")
        G.append("after")  # G changed before and after the print: the graph ends here
        return x + 1

    check_calls(f, [torch.ones(2)], reset=reset_g, snapshot=snap_g)
    check_breaks(f, torch.ones(2), breaks=1)


def test_print_after_a_mutation_of_a_global_no_break():
    def f(x):
        G.append(1)
        print("appended")
        return x + 1

    check_calls(f, [torch.ones(2), torch.ones(2)], reset=reset_g, snapshot=snap_g, hits=[1])


def test_print_to_sys_stderr():
    def f(x):
        print("to stderr", 3, file=sys.stderr)
        return x + 1

    check_calls(f, [torch.ones(2)], stderr=True)
    check_breaks(f, torch.ones(2), breaks=0)


def test_print_of_a_tensor_that_requires_grad_breaks():
    def f(x):
        y = x * 2
        print(y)  # grad_fn=<MulBackward0>: the backend decides what a graph output shows
        return y + 1

    seen, collecting = recording()
    with collecting:
        check_breaks(f, torch.ones(2, requires_grad=True), breaks=None)
    reasons = [e.reason for e in seen if type(e).__name__ == "GraphBreakEvent" and e.user_stack[-1].name == "f"]
    assert len(reasons) == 1 and "requires grad" in reasons[0], reasons


def test_print_of_an_input_that_requires_grad_is_replayed():
    def f(x):
        print(x)
        return x * 2

    check_breaks(f, torch.ones(2, requires_grad=True), breaks=0)


def test_print_of_a_user_object_breaks():
    class P:
        def __repr__(self):
            G.append("repr")
            return "P()"

    def f(x):
        print(P())
        return x + 1

    check_calls(f, [torch.ones(2)], reset=reset_g, snapshot=snap_g)
    check_breaks(f, torch.ones(2), breaks=1)


def test_print_inside_try_breaks():
    def f(x):
        y = x + 1
        try:
            print("in try")
        except OSError:
            y = y - 1
        return y

    check_breaks(f, torch.ones(2), breaks=1)


def test_print_inside_no_grad_is_replayed():
    def f(x):
        with torch.no_grad():
            y = x * 2
            print("no grad", y)
        return y + x

    check_breaks(f, torch.ones(2, requires_grad=True), breaks=0)


def test_print_followed_by_an_in_place_op_breaks():
    def f(x):
        print("before add_")
        x.add_(1)  # had print raised, eager would not have changed x
        return x * 2

    check_breaks(f, torch.ones(2), breaks=1)


def test_print_between_graph_breaks_keeps_its_place():
    def f(x):
        print("one")
        y = x.sum().item()  # a number read from tensor data: printed from the graph's value
        dynamo_lite.graph_break()
        print("two", y)
        return x + y

    check_breaks(f, torch.ones(2), breaks=1)


def test_print_in_a_generator_consumed_in_the_trace():
    def gen(n):
        for i in range(n):
            print("yield", i)
            yield i

    def f(x):
        for v in gen(3):
            print("got", v)
            x = x + v
        return x

    check_breaks(f, torch.zeros(1), breaks=0)


def test_print_raising_is_raised_once_and_stops_later_effects():
    class Broken:
        def write(self, s):
            raise OSError("closed")

        def flush(self):
            pass

    def f(x):
        y = x + 1
        G.append(1)
        print("lost", file=sys.stdout)
        G.append(2)
        return y

    def run(fn):
        old = sys.stdout
        sys.stdout = Broken()
        G.clear()
        try:
            fn(torch.ones(2))
        except OSError as e:
            return str(e), list(G)
        finally:
            sys.stdout = old
        return None, list(G)

    assert run(f) == run(dynamo_lite.compile(f, backend="eager")) == ("closed", [1])


# ---------------------------------------------------------------- logging

def test_logging_levels_messages_and_args_no_break():
    def f(x):
        log.debug("debug %d", x.shape[0])
        y = x * 2
        log.info("info %s %r", tuple(y.shape), "q")
        log.warning("warn %s", y)
        log.error("error")
        log.critical("critical %d%%", 5)
        log.log(logging.INFO, "log %s", 1)
        return y

    one_graph(f, torch.ones(2))


def test_logging_level_between_calls_decides_at_run_time():
    def f(x):
        log.info("hello %d", 1)
        log.debug("details")
        return x + 1

    def run(fn):
        out = []
        h = logging.Handler()
        h.emit = lambda r: out.append((r.levelname, r.getMessage()))
        log.addHandler(h)
        try:
            for level in (logging.DEBUG, logging.ERROR, logging.INFO):
                log.setLevel(level)
                fn(torch.ones(2))
        finally:
            log.removeHandler(h)
            log.setLevel(logging.NOTSET)
        return out

    cnt = CompileCounter()
    assert run(f) == run(dynamo_lite.compile(f, backend=cnt))
    assert cnt.frame_count == 1


def test_log_records_name_the_users_file_line_and_function():
    def helper(v):
        log.warning("from helper %s", v)  # an inlined frame

    def f(x):
        log.warning("from f")
        helper(3)
        return x + 1

    def run(fn):
        records = []
        h = logging.Handler()
        h.emit = records.append
        log.addHandler(h)
        try:
            fn(torch.ones(2))
        finally:
            log.removeHandler(h)
        return [(r.name, r.levelno, r.getMessage(), r.pathname, r.lineno, r.funcName, r.module) for r in records]

    cnt = CompileCounter()
    eager, comp = run(f), run(dynamo_lite.compile(f, backend=cnt))
    assert eager == comp
    assert [r[4] for r in comp] == [line_of(f, "from f"), line_of(helper, "from helper")]
    assert cnt.frame_count == 1


def test_logging_disabled_logger_and_extra():
    def f(x):
        log.info("with extra", extra={"tag": "t1"})
        return x + 1

    def run(fn, disabled):
        records = []
        h = logging.Handler()
        h.emit = records.append
        log.addHandler(h)
        log.disabled = disabled
        try:
            fn(torch.ones(2))
        finally:
            log.removeHandler(h)
            log.disabled = False
        return [(r.getMessage(), r.tag) for r in records]

    compiled = dynamo_lite.compile(f, backend="eager")
    for disabled in (False, True, False):
        assert run(f, disabled) == run(compiled, disabled)


def test_logging_with_exc_info_or_stacklevel_breaks():
    def f(x):
        log.warning("stack", stacklevel=2)
        return x + 1

    check_breaks(f, torch.ones(2), breaks=1)


def test_logging_a_mutable_list_breaks():
    def f(x):
        items = [1]
        log.warning("items %s", items)  # the record keeps the list: a later change would show
        return x + 1

    check_breaks(f, torch.ones(2), breaks=1)


def test_transformers_warning_once_is_replayed_once():
    tlogging = pytest.importorskip("transformers.utils.logging")
    tlog = tlogging.get_logger("transformers.dl_replayed_test")

    def f(x):
        for i in range(3):
            tlog.warning_once("only once, please")
            x = x + i
        return x

    tlog.warning_once.cache_clear()
    check_calls(f, [torch.ones(2), torch.ones(2)], stderr=True, reset=tlog.warning_once.cache_clear, hits=[1])
    tlog.warning_once.cache_clear()
    check_breaks(f, torch.ones(2), breaks=0)


# ---------------------------------------------------------------- warnings

def test_warn_category_message_file_and_line_no_break():
    def f(x):
        warnings.warn("first")
        y = x + 1
        warnings.warn("second", DeprecationWarning)
        warnings.warn("third", category=RuntimeWarning, stacklevel=1)
        return y

    one_graph(f, torch.ones(2))


def test_warn_in_an_inlined_function_names_its_line():
    def helper():
        warnings.warn("from helper", FutureWarning)

    def f(x):
        helper()
        return x + 1

    one_graph(f, torch.ones(2))


def _warnings_under(fn, action, calls=2):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        for _ in range(calls):
            fn(torch.ones(2))
    return [(w.category, str(w.message), w.filename, w.lineno) for w in caught]


@pytest.mark.parametrize("action", ["default", "once", "module", "ignore", "always"])
def test_warn_filter_actions_and_registries(action):
    def f(x):
        for i in range(2):
            warnings.warn("repeated")
            warnings.warn(f"numbered {i}")
        return x + 1

    cnt = CompileCounter()
    compiled = dynamo_lite.compile(f, backend=cnt)
    assert _warnings_under(f, action) == _warnings_under(compiled, action)
    assert cnt.frame_count == 1


def test_warn_as_error_raises_and_stops_later_effects():
    def f(x):
        y = x + 1
        G.append("before")
        warnings.warn("now an error", RuntimeWarning)
        G.append("after")
        return y

    def run(fn):
        G.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                fn(torch.ones(2))
            except RuntimeWarning as e:
                return str(e), list(G)
        return None, list(G)

    assert run(f) == run(dynamo_lite.compile(f, backend="eager")) == ("now an error", ["before"])


def test_warn_inside_try_breaks():
    def f(x):
        try:
            warnings.warn("caught?", RuntimeWarning)
        except RuntimeWarning:
            x = x - 1
        return x + 1

    check_breaks(f, torch.ones(2), breaks=1)


def test_warn_with_stacklevel_2_breaks():
    def f(x):
        warnings.warn("caller's", stacklevel=2)
        return x + 1

    check_breaks(f, torch.ones(2), breaks=1)


def test_print_log_and_warn_interleave_in_order():
    def f(x):
        print("p1")
        log.warning("l1")
        warnings.warn("w1")
        G.append(1)
        print("p2", G[-1])
        return x + 1

    def run(fn):
        events = []
        h = logging.Handler()
        h.emit = lambda r: events.append(("log", r.getMessage()))
        log.addHandler(h)
        old_show = warnings.showwarning
        warnings.showwarning = lambda message, *a, **k: events.append(("warn", str(message)))

        class Out:
            def write(self, s):
                if s.strip():
                    events.append(("print", s))

            def flush(self):
                pass

        old_out, sys.stdout = sys.stdout, Out()
        G.clear()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                warnings.showwarning = lambda message, *a, **k: events.append(("warn", str(message)))
                fn(torch.ones(2))
        finally:
            sys.stdout = old_out
            warnings.showwarning = old_show
            log.removeHandler(h)
        return events, list(G)

    cnt = CompileCounter()
    assert run(f) == run(dynamo_lite.compile(f, backend=cnt))
    assert cnt.frame_count == 1


def test_is_enabled_for_and_effective_level_are_guarded():
    child = logging.getLogger("acceptance.replayed.child")

    def f(x):
        if child.isEnabledFor(logging.DEBUG):
            x = x + 1
        if log.isEnabledFor(logging.WARNING):
            x = x * 2
        return x * child.getEffectiveLevel()

    cnt = CompileCounter()
    compiled = dynamo_lite.compile(f, backend=cnt)
    try:
        for level, disabled in [(logging.DEBUG, False), (logging.DEBUG, False), (logging.ERROR, False),
                                (logging.NOTSET, False), (logging.DEBUG, True), (logging.DEBUG, False)]:
            log.setLevel(level)
            child.disabled = disabled
            assert torch.equal(f(torch.ones(2)), compiled(torch.ones(2))), (level, disabled)
        log.level = logging.CRITICAL  # set directly: the level cache is stale, as isEnabledFor sees it
        assert torch.equal(f(torch.ones(2)), compiled(torch.ones(2)))
    finally:
        log.setLevel(logging.NOTSET)
        child.disabled = False
    assert cnt.frame_count >= 1


_USAGE_SCRIPT = r'''
import sys, torch, dynamo_lite

def build(x, n):
    torch._C._log_api_usage_once(f"mylib.metric.{n}")
    return x + 1

fn = build if sys.argv[1] == "eager" else dynamo_lite.compile(build, backend="eager", fullgraph=True)
for n in ("a", "b", "a"):
    fn(torch.ones(2), n)
    print(f"PYTORCH_API_USAGE mylib.call.{n}", file=sys.stderr, flush=True)
'''


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_api_usage_log_is_replayed_in_a_graph(tmp_path, mode):
    # torchmetrics' Metric.__init__ calls torch._C._log_api_usage_once(f"torchmetrics.metric.{name}"):
    # it broke the graph of every metric built in compiled code; it is replayed after the graph,
    # and torch's usage log (PYTORCH_API_USAGE_STDERR) sees each event once, in eager's order
    import os
    import subprocess
    script = tmp_path / "usage.py"
    script.write_text(_USAGE_SCRIPT)
    env = dict(os.environ, PYTORCH_API_USAGE_STDERR="1", DYNAMO_LITE_PERSISTENT_CACHE="0")
    out = subprocess.run([sys.executable, str(script), mode], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("PYTORCH_API_USAGE mylib.")]
    assert lines == ["PYTORCH_API_USAGE mylib.metric.a", "PYTORCH_API_USAGE mylib.call.a",
                     "PYTORCH_API_USAGE mylib.metric.b", "PYTORCH_API_USAGE mylib.call.b",
                     "PYTORCH_API_USAGE mylib.call.a"]


def test_a_call_before_an_op_that_raises_in_a_graph_that_cannot_run_again_is_made():
    # x.add_(1) (or a random draw) makes the graph impossible to run again on an error; a print,
    # log call or warning after it was replayed after the graph, so an index error raised by a
    # later op in the graph lost it (eager made the call, then raised)
    def mutated(x, idx):
        x.add_(1)
        print("mutated", x.shape)
        log.warning("logged %s", x.shape[0])
        warnings.warn("warned")
        return x[idx]

    def drew(x, idx):
        noise = torch.rand(3)
        print("drew noise")
        return (x + noise)[idx]

    for fn in (mutated, drew):
        check_calls(fn, [(torch.zeros(3), torch.tensor([1])), (torch.zeros(3), torch.tensor([5]))], graphs=None,
                    rng=True)


class _CountingStream:
    def __init__(self):
        self.lines = []

    def write(self, s):
        self.lines.append(s)

    def flush(self):
        pass


_STREAM = _CountingStream()


class _CountingFormatter(logging.Formatter):
    seen = 0

    def format(self, record):
        type(self).seen += 1
        return super().format(record)


def test_calls_whose_stream_or_formatter_is_python_code_are_made_where_eager_makes_them():
    # print(file=<a stream of the user's>), print with sys.stdout replaced by a tee, and a log
    # handler with a formatter of the user's own were replayed after the graph: code after them
    # reading the stream's or formatter's state saw the state before the call
    def to_stream(x):
        print("step", x.shape, file=_STREAM)
        return x + len(_STREAM.lines)

    def to_stdout(x):
        print("step")
        return x + len(sys.stdout.lines)

    counted = logging.getLogger("acceptance.replayed.counted")
    handler = logging.StreamHandler(_CountingStream())
    handler.setFormatter(_CountingFormatter())
    counted.addHandler(handler)
    counted.propagate = False

    def logged(x):
        counted.warning("step %s", x.shape[0])
        return x + _CountingFormatter.seen

    try:
        check_calls(to_stream, [torch.zeros(1)] * 3, interleave=False, reset=_STREAM.lines.clear, graphs=None)
        real = sys.stdout
        for fn in (to_stdout, logged):
            def reset():
                _CountingFormatter.seen = 0
                sys.stdout = _CountingStream()
            try:
                check_calls(fn, [torch.zeros(1)] * 3, interleave=False, reset=reset, graphs=None)
            finally:
                sys.stdout = real
    finally:
        counted.removeHandler(handler)
