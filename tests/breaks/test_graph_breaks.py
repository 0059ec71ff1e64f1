"""Graph breaks: partial capture, resume functions, and eager-identical behaviour.

The matrix runs the same small function with a break at each interesting
position and compares outputs, printed text, mutated inputs and grad mode
with eager; other tests check counts, names, tracebacks and recompiles.
"""
import traceback

import pytest
import torch

import dynamo_lite
from dynamo_lite.testing import CompileCounter, assert_same_as_eager
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print


def _helper_that_prints(x):
    print("in helper", x.shape)
    return x + 1


def brk_at_start(x):
    print("start")
    return x * 2 + 1


def brk_at_end(x):
    y = x * 2 + 1
    print("end")
    return y


def brk_in_loop(x):
    y = x * 2
    for i in range(3):
        y = y + i
        print("iteration", i)
    return y * 3


def brk_in_loop_over_list(x, items):
    total = x
    for item in items:
        total = total * item
        print(item)
    return total


def brk_in_no_grad(x):
    y = x * 2
    with torch.no_grad():
        z = y * 3
        print("inside", torch.is_grad_enabled())
        w = z + 1
    return w, y, torch.is_grad_enabled()


def brk_in_enable_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
            print("inner", torch.is_grad_enabled())
            c = b + 1
        d = a + 1
    return a, b, c, d


def brk_in_nested_call(x):
    a = x * 2
    b = _helper_that_prints(a)
    return b * 3


def brk_with_int_on_stack(x, n):
    return n + len([print("mid"), 1]) + (x * n).sum()


def brk_with_list_on_stack(x):
    return [x + 1, print("mid"), x + 2]


def brk_with_module_on_stack(x, m):
    return m(x, print("mid"))


def brk_with_function_on_stack(x):
    return torch.add(x, print("mid") or 1)


def brk_with_dict_result(x):
    a = x + 1
    print("a")
    b = a * 2
    return {"a": a, "b": b, "ab": (a, b)}


def brk_in_try_except(x):
    try:
        y = x + 1
        print("in try")
        raise ValueError("boom")
    except ValueError as e:
        y = y * 2
        msg = str(e)
    return y, msg


def brk_in_try_finally(x):
    out = []
    try:
        out.append(x + 1)
        print("try body")
    finally:
        out.append(x * 3)
    return out


def brk_raise_in_try_from_call(x):
    d = {}
    try:
        y = d["missing"]
    except KeyError:
        y = x - 1
    return y


def brk_mutates_input(x, lst, d):
    lst.append(x * 2)
    d["before"] = x + 1
    print("mid")
    lst.append(x + 1)
    d["after"] = x - 1
    return len(lst)


def brk_several(x):
    a = x + 1
    print(1)
    b = a * 2
    print(2)
    c = b - 3
    print(3)
    return a, b, c


def brk_item_branch(x):
    if x.sum().item() > 0:
        return x + 1
    return x - 1


def brk_bool_branch(x):
    if x.sum() > 0:
        y = x * 2
    else:
        y = x * -2
    return y + 1


def brk_tolist(x):
    values = x.tolist()
    return x * len(values), values


def brk_while_data_dependent(x):
    n = 0
    while x.sum() > 0:
        x = x - 1
        n += 1
    return x, n


class _LoggingCtx:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append(("exit", exc_type.__name__ if exc_type else None))
        return False


def brk_in_user_context_manager(x, log):
    with _LoggingCtx(log) as ctx:
        y = x + 1
        print("inside", len(ctx.log))
        y = y * 2
    return y


def brk_then_raise_in_with_in_try(x, log):
    try:
        with _LoggingCtx(log):
            y = x + 1
            print("inside")
            raise KeyError("k")
    except KeyError as e:
        y = x - 1
        log.append(str(e))
    return y


def brk_exception_in_handler(x):
    try:
        return x + torch.ones(7)
    except RuntimeError:
        print("caught")
        return x * 0


def brk_in_finally(x):
    try:
        y = x * 2
    finally:
        print("finally")
        y = y + 1
    return y


def brk_loop_break_continue_else(x, items):
    acc = x
    for i in items:
        if i == 1:
            continue
        print(i)
        if i == 3:
            break
        acc = acc + i
    else:
        acc = acc * 100
    return acc


def brk_loop_return(x):
    for i in range(5):
        print(i)
        if i == 2:
            return x + i
        x = x * 2
    return x


def brk_while_loop(x):
    n = 0
    while n < 4:
        x = x + 1
        print(n)
        n += 1
    return x, n


def brk_nested_loops(x):
    for i in range(2):
        for j in range(3):
            x = x + i * j
            print(i, j)
    return x


def brk_loop_inside_try(x):
    try:
        for i in range(3):
            print(i)
            if i == 2:
                raise KeyError(i)
            x = x + 1
    except KeyError:
        x = x * 10
    return x


def brk_loop_with_try_inside(x):
    out = []
    for i in range(3):
        try:
            print(i)
            if i == 1:
                raise ValueError(i)
            out.append(x + i)
        except ValueError:
            out.append(x * 0)
    return out


def brk_loop_closure(x):
    total = [x]

    def add(v):
        total[0] = total[0] + v

    for i in range(3):
        add(i)
        print(i)
    return total[0]


def brk_loop_conditionally_bound(x, flags):
    for f in flags:
        if f:
            z = x * 2
        print(f)
    return z


class _WithForward(torch.nn.Module):
    def forward(self, x, _unused):
        return x * 5


MATRIX = [
    (brk_at_start, lambda: (torch.randn(3),)),
    (brk_at_end, lambda: (torch.randn(3),)),
    (brk_in_loop, lambda: (torch.randn(3),)),
    (brk_in_loop_over_list, lambda: (torch.randn(3), [1.5, 2.0, -1.0])),
    (brk_in_no_grad, lambda: (torch.randn(3, requires_grad=True),)),
    (brk_in_enable_grad, lambda: (torch.randn(3, requires_grad=True),)),
    (brk_in_nested_call, lambda: (torch.randn(3),)),
    (brk_with_int_on_stack, lambda: (torch.randn(3), 4)),
    (brk_with_list_on_stack, lambda: (torch.randn(3),)),
    (brk_with_module_on_stack, lambda: (torch.randn(3), _WithForward())),
    (brk_with_function_on_stack, lambda: (torch.randn(3),)),
    (brk_with_dict_result, lambda: (torch.randn(3),)),
    (brk_in_try_except, lambda: (torch.randn(3),)),
    (brk_in_user_context_manager, lambda: (torch.randn(3), [])),
    (brk_then_raise_in_with_in_try, lambda: (torch.randn(3), [])),
    (brk_exception_in_handler, lambda: (torch.randn(3),)),
    (brk_in_finally, lambda: (torch.randn(3),)),
    (brk_in_try_finally, lambda: (torch.randn(3),)),
    (brk_raise_in_try_from_call, lambda: (torch.randn(3),)),
    (brk_mutates_input, lambda: (torch.randn(3), [0], {"k": 1})),
    (brk_several, lambda: (torch.randn(3),)),
    (brk_item_branch, lambda: (torch.ones(3),)),
    (brk_item_branch, lambda: (-torch.ones(3),)),
    (brk_bool_branch, lambda: (torch.ones(3),)),
    (brk_bool_branch, lambda: (-torch.ones(3),)),
    (brk_tolist, lambda: (torch.arange(4.0),)),
    (brk_while_data_dependent, lambda: (torch.full((2,), 2.5),)),
    (brk_loop_break_continue_else, lambda: (torch.randn(3), [0, 1, 2, 3, 4])),
    (brk_loop_break_continue_else, lambda: (torch.randn(3), [0, 1, 2])),
    (brk_loop_return, lambda: (torch.randn(3),)),
    (brk_while_loop, lambda: (torch.randn(3),)),
    (brk_nested_loops, lambda: (torch.randn(3),)),
    (brk_loop_inside_try, lambda: (torch.randn(3),)),
    (brk_loop_with_try_inside, lambda: (torch.randn(3),)),
    (brk_loop_closure, lambda: (torch.randn(3),)),
    (brk_loop_conditionally_bound, lambda: (torch.randn(3), [True, False])),
    (brk_loop_conditionally_bound, lambda: (torch.randn(3), [False, False])),
]


@pytest.mark.parametrize("fn,make_args", MATRIX, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(MATRIX)])
@pytest.mark.parametrize("grad", [True, False])
def test_break_matrix_same_as_eager(fn, make_args, grad):
    with torch.set_grad_enabled(grad):
        assert_same_as_eager(fn, *make_args())
        # a second call runs the cached code (and resume functions) again
        assert_same_as_eager(fn, *make_args())


def test_both_branches_taken_across_calls_are_correct():
    cf = dynamo_lite.compile(brk_bool_branch, backend="eager")
    for sign in (1, -1, 1, -1):
        x = torch.ones(3) * sign
        torch.testing.assert_close(cf(x), brk_bool_branch(x))


def test_breaks_are_reported_in_order_with_user_location():
    out = dynamo_lite.explain(brk_several)(torch.randn(3))
    assert out.graph_break_count == 3
    assert out.graph_count == 3  # the code after the last print has no tensor work
    assert [b.break_id for b in out.break_reasons] == ["DL0030"] * 3
    lines = [b.lineno for b in out.break_reasons]
    assert lines == sorted(lines) and len(set(lines)) == 3
    assert all(b.filename == __file__ for b in out.break_reasons)


def test_break_inside_inlined_function_names_the_callee_line():
    out = dynamo_lite.explain(brk_in_nested_call)(torch.randn(3))
    first = out.break_reasons[0]
    assert first.user_stack[-1].name == "_helper_that_prints"
    assert first.user_stack[0].name == "brk_in_nested_call"
    assert "print" in first.user_stack[-1].line


def test_fullgraph_raises_unsupported_with_location():
    cf = dynamo_lite.compile(brk_at_end, backend="eager", fullgraph=True)
    with pytest.raises(dynamo_lite.Unsupported) as info:
        cf(torch.randn(3))
    text = str(info.value)
    assert "DL0030" in text and "print" in text
    assert f"{__file__}:" in text


def test_graph_counts_with_breaks():
    counter = CompileCounter()
    cf = dynamo_lite.compile(brk_several, backend=counter)
    cf(torch.randn(3))
    assert counter.frame_count == 3
    cf(torch.randn(3))
    assert counter.frame_count == 3  # everything cached, resume functions included


def test_no_frame_is_traced_twice_per_call():
    from dynamo_lite.report import events

    seen = []
    cf = dynamo_lite.compile(brk_several, backend="eager")
    with events.collecting(seen.append):
        cf(torch.randn(3))
    frames = [e.compile_id for e in seen if isinstance(e, events.GraphEvent)]
    assert len(frames) == len(set(frames))


def test_resume_function_recompiles_when_its_guards_fail():
    counter = CompileCounter()
    cf = dynamo_lite.compile(brk_at_end, backend=counter)
    cf(torch.randn(3))
    n = counter.frame_count
    out = cf(torch.randn(3, dtype=torch.float64))
    assert out.dtype == torch.float64
    assert counter.frame_count > n


def test_resume_function_names_and_traceback_lines():
    def fails_after_break(x):
        y = x + 1
        print("before")
        return y + torch.ones(5)  # shape error raised by the resume function

    cf = dynamo_lite.compile(fails_after_break, backend="eager")
    with pytest.raises(RuntimeError) as info:
        cf(torch.randn(3))
    frames = traceback.extract_tb(info.value.__traceback__)
    user = [f for f in frames if f.filename == __file__]
    assert user[-1].line.strip().startswith("return y + torch.ones(5)")
    # the resume function keeps the user's name: the traceback reads like eager's
    assert user[-1].name == "fails_after_break"
    assert not any(f.name.startswith("__") for f in user)


def test_resume_args_are_live_locals():
    from dynamo_lite import cache

    def f(x):
        dead = x * 2
        alive = x + 1
        print("break")
        return alive

    dynamo_lite.compile(f, backend="eager")(torch.randn(2))
    codes = [key for key in cache._DERIVED.get(f.__code__, {}) if key[0] == "resume"]
    assert codes and all("dead" not in key[3] for key in codes)
    assert any("alive" in key[3] for key in codes)


def test_break_in_loop_captures_the_loop_body_as_a_function():
    counter = CompileCounter()
    cf = dynamo_lite.compile(brk_in_loop, backend=counter)
    x = torch.randn(3)
    torch.testing.assert_close(cf(x), brk_in_loop(x))
    # the prefix graph, and graphs of the loop body function (__loop_body_at_*)
    assert counter.frame_count >= 2
    from dynamo_lite import cache

    assert any(key[0] == "loop body" for key in cache._DERIVED.get(brk_in_loop.__code__, {}))


def test_break_in_loop_prefix_stays_captured():
    counter = CompileCounter()
    cf = dynamo_lite.compile(brk_in_loop, backend=counter)
    x = torch.randn(3)
    torch.testing.assert_close(cf(x), brk_in_loop(x))
    assert counter.frame_count >= 1
    assert any(n.target is torch.Tensor.__mul__ or "mul" in str(n.target) for n in counter.graphs[0].graph.nodes)


def test_exception_after_break_propagates_unchanged():
    def f(x):
        print("about to fail")
        raise KeyError("nope")

    cf = dynamo_lite.compile(f, backend="eager")
    with pytest.raises(KeyError, match="nope"):
        cf(torch.randn(2))


def test_locals_after_a_break_lists_the_locals_nothing_else_reads():
    # n is read by nothing after the break but locals()/vars()/dir(): the rest of the function
    # still sees it, as the original frame does
    from dynamo_lite.testing import check_calls

    def f(x, n):
        a = x.cos()
        print(n)
        b = a + 1
        return b, sorted(locals()), sorted(vars()), dir()

    counter = check_calls(f, [(torch.ones(2), 3), (torch.arange(2.0), 4)])
    assert any("add" in {getattr(n.target, "__name__", "") for n in gm.graph.nodes} for gm in counter.graphs)


def test_a_container_method_loaded_before_a_break_is_traced_in_the_resume_function():
    # out.append(inner(y)) with a break inside inner: the resume function received the bound
    # builtin method and broke again at the call ("builtin list.append() with arguments ...")
    from dynamo_lite.testing import check_breaks

    def inner(y):
        y = y * 2
        dynamo_lite.graph_break()
        return y + 1

    def collect(x):
        out, table = [], {}
        out.append(inner(x))
        table.setdefault("k", []).append(inner(x + 1))
        out.extend([inner(x - 1), x])
        return out, table, len(out)

    check_breaks(collect, torch.ones(3), breaks=None)
    info = dynamo_lite.explain(collect)(torch.ones(3))
    assert not [b for b in info.break_reasons if "builtin" in b.reason], [b.reason for b in info.break_reasons]
