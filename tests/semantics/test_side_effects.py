"""Side effects replayed after the graph so compiled and eager leave the world in
the same state: input lists/dicts, user-object and module attributes, global
variables and global containers, closure cells — with and without graph breaks.

Globals are reset before each run and compared after it (eager vs compiled).
"""
import copy

import torch

import dynamo_lite
from dynamo_lite.testing import check_breaks as check
from dynamo_lite.testing import check_calls
from dynamo_lite.report import events
from dynamo_lite.report.explain import build_explain_output
from dynamo_lite.testing import assert_same
from dynamo_lite.testing import print_with_graph_break as print  # noqa: A001 - a graph break at each print




def check_globals(fn, *args, names, breaks=0, initial=None):
    """Run ``fn`` eagerly and compiled from the same starting globals; the globals
    named in ``names`` (and the results) must end up equal."""
    g = globals()
    start = {n: copy.deepcopy(initial[n]) if initial and n in initial else copy.deepcopy(g[n]) for n in names}

    def reset():
        for n, v in start.items():
            g[n] = copy.deepcopy(v)

    reset()
    eager_args = copy.deepcopy(args)
    eager_out = fn(*eager_args)
    eager_globals = {n: g[n] for n in names}
    reset()
    comp_args = copy.deepcopy(args)
    recorded = []
    with events.collecting(recorded.append):
        comp_out = dynamo_lite.compile(fn, backend="eager")(*comp_args)
    comp_globals = {n: g[n] for n in names}
    reset()
    assert_same(eager_out, comp_out)
    assert_same(eager_args, comp_args, "args")
    assert_same(eager_globals, comp_globals, "globals")
    info = build_explain_output(recorded)
    assert info.graph_break_count == breaks, [str(b) for b in info.break_reasons]


x3 = torch.randn(3)

# Values read before being overwritten (obj.attr, d[k], swapped locals) must come
# back as they were read: generated code loads them before replaying side effects.

COUNTER = 0
SCALE = 2.0
CACHE = []
REGISTRY = {}
STATE_T = torch.zeros(3)


class Holder:
    def __init__(self):
        self.items = []
        self.count = 0


HOLDER = Holder()


# ---- globals ---------------------------------------------------------------------------------
def test_global_int_increment():
    def f(x):
        global COUNTER
        COUNTER += 1
        return x * COUNTER

    check_globals(f, x3, names=["COUNTER"])


def test_global_rebound_to_tensor_and_read_back():
    def f(x):
        global STATE_T
        STATE_T = STATE_T + x
        return STATE_T * 2

    check_globals(f, x3, names=["STATE_T"])


def test_global_list_append_and_dict_set():
    def f(x):
        CACHE.append(x * 2)
        REGISTRY["last"] = x
        REGISTRY.setdefault("n", 0)
        return len(CACHE)

    check_globals(f, x3, names=["CACHE", "REGISTRY"])


def test_global_list_rebound_then_mutated():
    def f(x):
        global CACHE
        CACHE = [x]
        CACHE.append(x + 1)
        return x

    check_globals(f, x3, names=["CACHE"])


def test_global_object_attribute_mutation():
    def f(x):
        HOLDER.items.append(x)
        HOLDER.count += 1
        HOLDER.last = x * 2
        return x + HOLDER.count

    check_globals(f, x3, names=["HOLDER"])


def test_global_reads_after_write_in_inlined_function():
    def bump(v):
        global COUNTER
        COUNTER = COUNTER + v

    def f(x):
        bump(2)
        bump(3)
        return x * COUNTER

    check_globals(f, x3, names=["COUNTER"])


def test_global_write_then_graph_break_then_read():
    def f(x):
        global COUNTER
        COUNTER = 10
        print("break")
        return x * COUNTER

    check_globals(f, x3, names=["COUNTER"], breaks=1)


def test_global_mutation_order_with_graph_break():
    def f(x):
        CACHE.append(1)
        print("between")
        CACHE.append(2)
        return x

    check_globals(f, x3, names=["CACHE"], breaks=1)


def test_global_scale_changes_are_guarded():
    def f(x):
        return x * SCALE

    global SCALE
    cf = dynamo_lite.compile(f, backend="eager")
    try:
        SCALE = 2.0
        torch.testing.assert_close(cf(x3), x3 * 2.0)
        SCALE = 3.0
        torch.testing.assert_close(cf(x3), x3 * 3.0)
    finally:
        SCALE = 2.0


# ---- input objects ----------------------------------------------------------------------------
def test_input_object_attributes_set_and_new():
    def f(h, x):
        h.count = h.count + 1
        h.items.append(x)
        h.fresh = {"k": x}
        return x + 1

    check(f, Holder(), x3)


def test_input_object_attribute_replaced_list_identity():
    def f(h, x):
        old = h.items
        h.items = [x]
        old.append(x * 2)
        return old, h.items

    check(f, Holder(), x3)


def test_attribute_written_twice_last_wins():
    def f(h, x):
        h.count = 1
        h.count = 2
        h.count += 5
        return x + 1

    check(f, Holder(), x3)


def test_setattr_builtin_on_input_object():
    def f(h, x):
        for name in ("a", "b"):
            setattr(h, name, x * len(name))
        return getattr(h, "a")

    check(f, Holder(), x3)


def test_module_attribute_mutation():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)
            self.calls = 0
            self.cache = None

        def forward(self, x):
            self.calls += 1
            y = self.lin(x)
            self.cache = y.detach()
            return y

    m1 = M()
    m2 = copy.deepcopy(m1)
    out_e = m1(x3)
    recorded = []
    with events.collecting(recorded.append):
        out_c = dynamo_lite.compile(m2, backend="eager")(x3)
    assert_same(out_e, out_c)
    assert m1.calls == m2.calls == 1
    assert_same(m1.cache, m2.cache)
    assert build_explain_output(recorded).graph_break_count == 0


def test_new_object_attached_to_input_object():
    class Node:
        def __init__(self, v):
            self.v = v
            self.next = None

    def f(head, x):
        n = Node(x * 2)
        head.next = n
        n.next = Node(x)
        return head.next.next.v

    check(f, Node(x3), x3)


# ---- containers ---------------------------------------------------------------------------------
def test_input_list_mutations_in_inlined_helper():
    def push(lst, v):
        lst.append(v)
        return len(lst)

    def f(lst, x):
        n = push(lst, x)
        push(lst, x * n)
        return x

    check(f, [], x3)


def test_input_dict_of_lists_mutated():
    def f(d, x):
        for k in d:
            d[k].append(x * len(d[k]))
        return x

    check(f, {"a": [], "b": [x3]}, x3)


def test_list_mutation_before_and_after_graph_break():
    def f(lst, x):
        lst.append(x)
        print("break")
        lst.append(x * 2)
        return len(lst)

    check(f, [], x3, breaks=1)


def test_nested_new_containers_stored_into_input():
    def f(d, x):
        d["list"] = [x, {"inner": [x * 2]}]
        d["list"][1]["inner"].append(3)
        return x

    check(f, {}, x3)


def test_same_new_list_stored_in_two_inputs_keeps_identity():
    def f(a, b, x):
        shared = [x]
        a.append(shared)
        b["s"] = shared
        return x + 1

    out = check(f, [], {}, x3)
    assert out.args[0][0] is out.args[1]["s"]


def test_mutation_through_alias_of_input_tensor_in_dict():
    def f(d, x):
        d["a"] = d["a"] + 1
        return x

    t = torch.randn(3)
    check(f, {"a": t}, t)  # deep copies keep `d["a"] is x`


# ---- closures ------------------------------------------------------------------------------------
def test_closure_list_mutation():
    log = []

    def f(x):
        log.append(x)
        return x * len(log)

    f(x3)
    n_eager = len(log)
    dynamo_lite.compile(f, backend="eager")(x3)
    assert len(log) == n_eager + 1


def test_nonlocal_in_inlined_closure_created_in_frame():
    def f(x):
        calls = []
        total = 0

        def record(v):
            nonlocal total
            total += 1
            calls.append(v)

        record(x)
        record(x * 2)
        return total, calls

    check(f, x3)


# ---- swapping locals across a break ----------------------------------------------------------------
def test_swapped_locals_survive_graph_break():
    def f(x, y):
        x, y = y, x
        print("break")
        return x - y

    check(f, torch.ones(1), torch.zeros(1), breaks=1)


def test_value_read_before_attribute_overwritten():
    def f(h, x):
        old = h.items
        h.items = x * 2
        return old

    check(f, Holder(), x3)


# ---------------------------------------------------------------- one object passed for two
class _Box:
    def __init__(self):
        self.v = 0


def _aliased(make):
    """Calls: two distinct objects first, then one object for both (eager changes what it reads)."""
    return [lambda: (torch.zeros(1), make(), make()), lambda: (lambda o: (torch.zeros(1), o, o))(make())]


def test_a_list_changed_and_another_read_may_be_one_list_in_a_later_call():
    def f(x, a, b):
        a.append(1)
        return x + len(b)

    check_calls(f, _aliased(list))


def test_a_dict_changed_and_another_read_may_be_one_dict_in_a_later_call():
    def f(x, a, b):
        a["k"] = 2
        return x + b.get("k", 0)

    check_calls(f, _aliased(dict))


def test_an_object_changed_and_another_read_may_be_one_object_in_a_later_call():
    def f(x, a, b):
        a.v = 5
        return x + b.v

    check_calls(f, _aliased(_Box))


def test_distinct_objects_changed_and_read_stay_one_entry():
    def f(x, a, b):
        a.v = a.v + 1
        return x + b.v

    check_calls(f, [lambda: (torch.zeros(1), _Box(), _Box())] * 3, hits=[1, 2])


# ---- appends to a list read from outside ------------------------------------------------
# Appending does not read how long the list already is: the compiled code extends the real list
# and is not compiled again for each length (results collected in a list across calls, or across
# the iterations of a loop whose body is a function of its own).

def test_appends_to_an_input_list_serve_every_length_from_one_entry():
    def f(x, acc):
        acc.append(x + 1)
        acc.append(x * 2)
        return x.sin()

    cnt = check_calls(f, [(torch.ones(2), []), (torch.ones(2), [1]), (torch.ones(2), [1, "a", None])],
                      hits=[1, 2])
    assert cnt.frame_count == 1


def test_an_input_list_read_after_appends_sees_them_and_guards_its_length():
    def f(x, acc):
        acc.append(x)
        acc.append(3)
        return x + len(acc), acc[0], acc[-2]

    cnt = check_calls(f, [(torch.ones(2), [5]), (torch.ones(2), [5]), (torch.ones(2), [5, 8])], hits=[1])
    assert cnt.frame_count == 2  # the length read: one entry per length


def test_an_input_list_extended_sorted_and_iterated_after_an_append():
    def f(x, acc):
        acc.append(4)
        acc.extend([2, 3])
        acc.sort()
        return x * sum(acc), [v for v in acc]

    check_calls(f, [(torch.ones(2), [9, 1]), (torch.ones(2), [])])


def test_an_input_list_printed_between_appends():
    def f(x, acc):
        acc.append(x + 1)
        print(len(acc), acc)
        acc.append(x + 2)
        return x

    check_calls(f, [(torch.ones(2), [0]), (torch.ones(2), [])], graphs=None)


def test_appends_on_both_sides_of_a_graph_break_and_to_the_list_itself():
    def f(x, acc):
        acc.append(x + 1)
        print("between")
        acc.append(acc)
        acc.append(x * 3)
        return acc[-1]

    for n in (0, 2):
        acc_eager, acc_comp = [None] * n, [None] * n
        expected = f(torch.ones(2), acc_eager)
        got = dynamo_lite.compile(f, backend="eager")(torch.ones(2), acc_comp)
        assert_same(got, expected)
        assert len(acc_comp) == len(acc_eager) == n + 3 and acc_comp[n + 1] is acc_comp
        assert_same(acc_comp[n], acc_eager[n])
        assert_same(acc_comp[n + 2], acc_eager[n + 2])


def test_one_list_appended_through_two_names():
    def f(x, a, b):
        a.append(x)
        b.append(x + 1)
        return x

    check_calls(f, [lambda: (lambda l: (torch.ones(2), l, l))([1]), lambda: (torch.ones(2), [], [2])])


def test_a_module_logging_into_a_list_attribute_compiles_once():
    class Logged(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)
            self.history = []

        def forward(self, x):
            y = self.lin(x)
            self.history.append(y.detach().sum())
            return y.relu()

    torch.manual_seed(0)
    eager = Logged()
    compiled_module = copy.deepcopy(eager)
    from dynamo_lite.testing import CompileCounter
    cnt = CompileCounter()
    compiled = dynamo_lite.compile(compiled_module, backend=cnt)
    for i in range(12):  # (each call used to recompile on the list's length, up to the cache limit)
        x = torch.randn(2, 3)
        assert_same(compiled(x), eager(x))
    assert cnt.frame_count == 1
    assert len(compiled_module.history) == 12
    for a, b in zip(compiled_module.history, eager.history):
        assert_same(a, b)


def test_a_rolling_buffer_deque_appended_at_both_ends_compiles_once():
    import collections

    def f(x, buf):
        buf.append(x + 1)
        buf.append(x * 2)
        buf.appendleft(x - 1)
        buf.append(x.sin())
        return x.cos()

    def calls():
        out = []
        for n, maxlen in ((0, 3), (1, 3), (3, 3), (2, None)):
            out.append(lambda n=n, maxlen=maxlen: (torch.ones(2) * 0.5, collections.deque(range(n), maxlen)))
        return out

    cnt = check_calls(f, calls(), hits=[1, 2])
    assert cnt.frame_count == 2  # one entry per maxlen (guarded), none per length


def test_a_deque_read_after_appends_sees_them_trimmed_to_its_maxlen():
    import collections

    def f(x, buf):
        buf.append(x + 1)
        buf.appendleft(x * 2)
        return x + len(buf), list(buf)[-1], buf[0]

    check_calls(f, [lambda: (torch.ones(2), collections.deque([1, 2], 2)),
                    lambda: (torch.ones(2), collections.deque([], 3))])
