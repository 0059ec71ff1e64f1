"""The persistent capture cache (dynamo_lite/persistent_cache.py), as a user meets it: a program
run again in a new process runs its frames from the cache without tracing them, with the same
results as eager; a change to anything the capture depended on is a miss with the reason, never
a stale hit; damaged, foreign and concurrently written files are handled."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch

import dynamo_lite
from dynamo_lite import config, persistent_cache
from dynamo_lite.report import events

# One program, its parts changed by format fields; every function is compiled, called and
# compared with eager, and the program prints what the persistent cache did for each.
PROGRAM = textwrap.dedent('''
    import json, sys, torch, dynamo_lite
    from dynamo_lite import persistent_cache
    from dynamo_lite.report import events

    SCALE = {scale}

    def helper(t):
        return t * SCALE

    def code_changes(x):
        return x.sin() {op} 1

    def reads_global(x):
        return helper(x) + 1

    def inlined(t):
        return t {op} 2

    def inlined_helper_changes(x):
        return inlined(x) * 3

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range({layers})])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x).relu()
            return x

    def dtype_changes(x):
        return (x * 2).sum(0)

    def grad_mode_changes(x, w):
        return (x @ w).tanh()

    def make(k):
        def closure_value_changes(x):
            return x * k + 1
        return closure_value_changes

    def make_scaler():
        class Scaler(torch.nn.Module):  # a class made at run time (a decorator's, a factory's)
            def forward(self, t):
                return t * {factor}
        return Scaler()

    scaler = make_scaler()

    def runtime_class_changes(x):
        return scaler(x) + 1

    def backend_changes(x):
        return x.cos() * 3

    def breaks(x):
        y = x.exp()
        if y.sum().item() > {threshold}:
            y = y + 1
        print("between graphs")
        return y * 2

    torch.manual_seed(0)
    net = Net()
    x = torch.randn(3, 4)
    w = torch.randn(4, 4, requires_grad=True)
    cases = {{
        "code_changes": (code_changes, (x,), "eager", False),
        "reads_global": (reads_global, (x,), "eager", False),
        "inlined_helper_changes": (inlined_helper_changes, (x,), "eager", False),
        "module_structure": (net, (x,), "eager", False),
        "dtype_changes": (dtype_changes, (x.to({dtype}),), "eager", False),
        "grad_mode_changes": (grad_mode_changes, (x, w), "eager", {no_grad}),
        "closure_value_changes": (make({k}), (x,), "eager", False),
        "backend_changes": (backend_changes, (x,), "{backend}", False),
        "runtime_class_changes": (runtime_class_changes, (x,), "eager", False),
        "breaks": (breaks, (x,), "eager", False),
    }}
    out = {{}}
    for name, (fn, args, backend, no_grad) in cases.items():
        recorded = []
        compiled = dynamo_lite.compile(fn, backend=backend)
        with events.collecting(recorded.append), torch.set_grad_enabled(not no_grad):
            got = compiled(*args)
            want = fn(*args)
        cache_events = [e for e in recorded if isinstance(e, events.PersistentCacheEvent)]
        out[name] = {{"ok": bool(torch.allclose(got, want)),
                      "hits": sum(e.hit for e in cache_events),
                      "misses": [e.reason for e in cache_events if not e.hit],
                      "traced": sum(isinstance(e, events.GraphEvent) and not e.loaded for e in recorded),
                      "graphs": sum(isinstance(e, events.GraphEvent) for e in recorded),
                      "break_ids": [e.break_id for e in recorded if isinstance(e, events.GraphBreakEvent)],
                      "recompiles": sum(isinstance(e, events.RecompileEvent) for e in recorded)}}
    out["stats"] = persistent_cache.stats()
    print(json.dumps(out))
''')

BASE = dict(scale=2.0, op="+", layers=2, dtype="torch.float32", no_grad=False, k=2, backend="eager",
            threshold="-1e9", factor=3)


def _write(tmp_path, **changes) -> str:
    path = tmp_path / "prog.py"  # the same file every run: its code objects are the same code
    path.write_text(PROGRAM.format(**{**BASE, **changes}))
    return str(path)


def _env(tmp_path, **extra) -> dict:
    env = dict(os.environ)
    env.update({"DYNAMO_LITE_PERSISTENT_CACHE": "1", "DYNAMO_LITE_CACHE_DIR": str(tmp_path / "cache"),
                "PYTHONPATH": os.pathsep.join(filter(None, [os.path.dirname(os.path.dirname(dynamo_lite.__file__)),
                                                            env.get("PYTHONPATH")]))})
    env.update(extra)
    return env


def _run(tmp_path, env_extra=None, **changes) -> dict:
    path = _write(tmp_path, **changes)
    proc = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300,
                          env=_env(tmp_path, **(env_extra or {})), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cases(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "stats"}


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache filled by one run of the base program (and that first run's result)."""
    tmp = tmp_path_factory.mktemp("persistent")
    first = _run(tmp)
    return tmp, first


def test_first_process_traces_and_stores_every_frame(warm):
    _, first = warm
    for name, case in _cases(first).items():
        assert case["ok"], name
        assert case["hits"] == 0 and case["traced"] >= 1, (name, case)
        assert case["misses"] == [], (name, case)  # (no stored entry at all: counted, no event)
    assert first["stats"]["stored"] >= len(BASE) and not first["stats"]["not_stored"], first["stats"]


def test_second_process_runs_every_frame_from_the_cache_without_a_trace(warm):
    tmp, first = warm
    second = _run(tmp)
    for name, case in _cases(second).items():
        assert case["ok"], name
        assert case["traced"] == 0 and case["misses"] == [] and case["hits"] >= 1, (name, case)
        # reports (explain, the pytest plugin) see the loaded frames as the first process saw
        # them traced: the same graphs, breaks and recompiles
        for what in ("graphs", "break_ids", "recompiles"):
            assert case[what] == first[name][what], (name, what, case, first[name])
    # the graph break: the frame and its resume function both came from the cache
    assert second["breaks"]["hits"] == 2, second["breaks"]
    assert second["stats"]["stored"] == 0


def test_each_change_is_a_miss_with_its_reason_never_a_stale_hit(warm):
    tmp, _ = warm
    changed = _run(tmp, scale=3.0, op="-", layers=3, dtype="torch.float64", no_grad=True, k=5,
                   backend="aot_eager", threshold="1e9", factor=4)
    expected = {
        "code_changes": "the code of the function changed",
        "reads_global": "SCALE changed from 2.0 to 3.0",
        "inlined_helper_changes": "function inlined changed (its code or defaults)",
        "module_structure": "len(self.layers._modules) changed from 2 to 3",
        "dtype_changes": "dtype",
        "grad_mode_changes": "is_grad_enabled",
        "closure_value_changes": "changed from 2 to 5",
        "backend_changes": "another backend",
        "runtime_class_changes": "class make_scaler.<locals>.Scaler changed",
    }
    cases = _cases(changed)
    for name, words in expected.items():
        case = cases[name]
        assert case["ok"], name
        assert case["traced"] >= 1 and case["hits"] == 0, (name, case)
        assert any(words in r for r in case["misses"]), (name, case["misses"])
    # the frame with the break is the same code and passes its guards: a hit; the other branch
    # of `.item() > threshold` is another resume function, traced (never the stored one)
    assert cases["breaks"]["ok"]


def test_a_config_knob_that_changes_capture_is_a_miss(warm):
    tmp, _ = warm
    result = _run(tmp, env_extra={"DYNAMO_LITE_MAX_INLINE_DEPTH": "7"})
    for name, case in _cases(result).items():
        assert case["ok"] and case["hits"] == 0, (name, case)
        assert "a config knob that changes capture differs" in case["misses"], (name, case)


def test_damaged_and_foreign_files_are_ignored(tmp_path):
    _run(tmp_path)
    files = [os.path.join(d, n) for d, _, ns in os.walk(tmp_path / "cache") for n in ns if n.endswith(".dle")]
    assert files
    for i, path in enumerate(files):
        data = bytearray(open(path, "rb").read())
        if i % 3 == 0:
            data = data[: len(data) // 2]  # truncated
        elif i % 3 == 1:
            data[-5] ^= 0xFF  # a flipped byte: the checksum no longer matches
        else:
            data = b"not an entry at all"
        open(path, "wb").write(bytes(data))
    result = _run(tmp_path)
    for name, case in _cases(result).items():
        assert case["ok"] and case["hits"] == 0 and case["traced"] >= 1, (name, case)
        assert "a damaged entry file was ignored" in case["misses"], (name, case)
    # the entries were written again: the next process uses them
    again = _run(tmp_path)
    assert all(c["ok"] and c["traced"] == 0 for c in _cases(again).values()), again


def test_an_entry_of_another_torch_version_is_a_miss(tmp_path):
    _run(tmp_path)
    for folder, _, names in os.walk(tmp_path / "cache"):
        for name in names:
            parts, body = persistent_cache._read(os.path.join(folder, name))
            parts["torch"] = "1.0.0"
            persistent_cache._write(folder, pickle.dumps(parts), pickle.dumps(body), repr(body["guards"]))
            os.unlink(os.path.join(folder, name))
    result = _run(tmp_path)
    for name, case in _cases(result).items():
        assert case["ok"] and case["hits"] == 0, (name, case)
        assert "another torch version" in case["misses"], (name, case)


def test_processes_writing_one_cache_at_once(tmp_path):
    path = _write(tmp_path)
    procs = [subprocess.Popen([sys.executable, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(tmp_path), cwd=str(tmp_path)) for _ in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-4000:]
        assert all(c["ok"] for c in _cases(json.loads(out.strip().splitlines()[-1])).values())
    after = _run(tmp_path)
    for name, case in _cases(after).items():
        assert case["ok"] and case["traced"] == 0 and case["misses"] == [], (name, case)
    leftovers = [n for _, _, ns in os.walk(tmp_path / "cache") for n in ns if not n.endswith(".dle")]
    assert leftovers == []  # no temporary file is left behind


# ---- in one process -------------------------------------------------------------------
def test_code_fingerprint_is_what_the_code_is():
    def f(x):
        return x in {"a", "b", "c"}

    def g(x):
        return x in {"a", "b", "d"}

    assert persistent_cache.code_fingerprint(f.__code__) != persistent_cache.code_fingerprint(g.__code__)
    same = f.__code__.replace()
    assert persistent_cache.code_fingerprint(same) == persistent_cache.code_fingerprint(f.__code__)
    moved = f.__code__.replace(co_firstlineno=f.__code__.co_firstlineno + 1)
    assert persistent_cache.code_fingerprint(moved) != persistent_cache.code_fingerprint(f.__code__)


def test_frozenset_constants_fingerprint_alike_under_any_hash_seed(tmp_path):
    script = ("from dynamo_lite import persistent_cache as pc\n"
              "def f(x):\n    return x in {'alpha', 'beta', 'gamma', 'delta'}\n"
              "print(pc.code_fingerprint(f.__code__))\n")
    path = tmp_path / "fp.py"
    path.write_text(script)
    prints = {subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=True,
                             env={**_env(tmp_path), "PYTHONHASHSEED": str(seed)}).stdout for seed in (1, 2, 3)}
    assert len(prints) == 1


def test_objects_made_at_run_time_are_stored_by_what_they_are(tmp_path):
    """Guards compare with objects read again on each call (a default, a global), and a class
    made at run time is described by its module, name and body: such entries are stored."""
    missing = object()

    def uses_sentinel(x, scale=missing):
        return x * (2 if scale is missing else scale)

    class Config:
        scale = 2

    cfg = Config()

    def uses_object(x):
        return x * cfg.scale

    with config.patch(cache_dir=str(tmp_path)):
        for fn in (uses_sentinel, uses_object):
            persistent_cache.reset_stats()
            dynamo_lite.reset()
            assert torch.equal(dynamo_lite.compile(fn, backend="eager")(torch.ones(2)), torch.full((2,), 2.0))
            stats = persistent_cache.stats()
            assert stats["stored"] >= 1 and not stats["not_stored"], (fn.__name__, stats)


FLOAT_PROGRAM = textwrap.dedent('''
    import json, torch, dynamo_lite
    from dynamo_lite.report import events

    def interval(x, a, b):
        if a > b:
            return x - 1
        return x * (b - a)

    compiled = dynamo_lite.compile(interval, backend="eager")
    recorded = []
    ok = True
    with events.collecting(recorded.append):
        for a, b in [(0.0, 0.5), (0.1, 0.6), (0.2, 0.9), (0.9, 0.2)]:
            ok = ok and torch.equal(compiled(torch.ones(2), a, b), interval(torch.ones(2), a, b))
    print(json.dumps({"ok": ok, "traced": sum(isinstance(e, events.GraphEvent) and not e.loaded for e in recorded),
                      "loaded": sum(isinstance(e, events.GraphEvent) and e.loaded for e in recorded)}))
''')


def test_entries_with_symbolic_floats_and_their_relations_are_stored(tmp_path):
    # the graph of a symbolic float reads it with aten._local_scalar_dense (an OpOverload, whose
    # own pickling fails), and is guarded by the relation the branch took (FloatFactGuard): a
    # second process traces nothing, the first traces 3 (static, symbolic, the other branch)
    path = tmp_path / "floats.py"
    path.write_text(FLOAT_PROGRAM)
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                              env=_env(tmp_path), cwd=str(tmp_path))
        assert proc.returncode == 0, proc.stderr[-4000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert runs[0] == {"ok": True, "traced": 3, "loaded": 0}
    assert runs[1]["ok"] and runs[1]["traced"] == 0 and runs[1]["loaded"] >= 2


def test_a_backend_given_as_a_callable_is_not_stored(tmp_path):
    def my_backend(gm, example_inputs):
        return gm.forward

    def f(x):
        return x + 1

    with config.patch(persistent_cache=True, cache_dir=str(tmp_path)):
        persistent_cache.reset_stats()
        dynamo_lite.reset()
        dynamo_lite.compile(f, backend=my_backend)(torch.ones(2))
        stats = persistent_cache.stats()
    assert stats["stored"] == 0
    assert any("registered name" in r for r in stats["not_stored"]), stats
    assert not os.path.exists(os.path.join(str(tmp_path), persistent_cache.FORMAT))


def test_off_nothing_is_written(tmp_path):
    def f(x):
        return x * 3

    with config.patch(persistent_cache=False, cache_dir=str(tmp_path)):
        dynamo_lite.reset()
        dynamo_lite.compile(f, backend="eager")(torch.ones(2))
    assert os.listdir(tmp_path) == []


def test_on_by_default_and_this_process_does_not_read_what_it_wrote(tmp_path):
    """A stored entry is for the next process: after reset() this one traces again."""
    assert config.persistent_cache is True

    def f(x):
        return x * 3

    with config.patch(cache_dir=str(tmp_path)):
        persistent_cache.reset_stats()
        for _ in range(2):
            dynamo_lite.reset()
            seen: list = []
            with events.collecting(seen.append):
                dynamo_lite.compile(f, backend="eager")(torch.ones(2))
            assert [e.loaded for e in seen if e.kind == "graph"] == [False]
        stats = persistent_cache.stats()
    assert stats["stored"] == 2 and stats["hits"] == 0, stats


SEED_PROGRAM = textwrap.dedent('''
    import json, torch, dynamo_lite
    from dynamo_lite import persistent_cache

    def follows_set_order(x):  # (a string's hash: salted per process, as a set of strings' order is)
        return x + hash("alpha") % 97

    def uses_an_address(x):
        return x + id(follows_set_order) % 7

    out = {}
    for fn in (follows_set_order, uses_an_address):
        x = torch.arange(3.0)
        got = dynamo_lite.compile(fn, backend="eager")(x)
        out[fn.__name__] = bool(torch.equal(got, fn(x)))
    out["stats"] = persistent_cache.stats()
    print(json.dumps(out))
''')


def test_string_hash_order_and_addresses_never_cross_processes(tmp_path):
    path = tmp_path / "seed.py"
    path.write_text(SEED_PROGRAM)

    def run(seed):
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                              env={**_env(tmp_path), "PYTHONHASHSEED": str(seed)}, cwd=str(tmp_path))
        assert proc.returncode == 0, proc.stderr[-4000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["follows_set_order"] and result["uses_an_address"], result
        return result["stats"]

    first = run(1)
    assert first["stored"] == 1, first  # the set's order: stored, keyed by the hash seed
    assert any("id()" in reason for reason in first["not_stored"]), first
    other_seed = run(2)
    assert other_seed["hits"] == 0, other_seed
    assert any("hash seed" in reason for reason in other_seed["miss_reasons"]), other_seed
    same_seed = run(1)
    assert same_seed["hits"] == 1, same_seed
    # string hashes that change with every process: such a capture is not stored, and the
    # reason says how to make it storable
    random_seed = run("random")
    assert random_seed["stored"] == 0, random_seed
    assert any("PYTHONHASHSEED" in reason for reason in random_seed["not_stored"]), random_seed


def test_graphs_a_functionalising_backend_compiles_again_must_not_mutate_or_alias(tmp_path):
    """aot_eager / inductor compile a stored graph again on fake inputs made from metadata: a
    graph that writes to its inputs, or inputs that share storage, are not stored for them."""
    def mutates(a, b):
        a.mul_(2)
        return b + 0

    def aliased(a, b):
        return a + b

    with config.patch(persistent_cache=True, cache_dir=str(tmp_path)):
        persistent_cache.reset_stats()
        dynamo_lite.reset()
        dynamo_lite.compile(mutates, backend="aot_eager")(torch.ones(4), torch.ones(4))
        base = torch.ones(5)
        dynamo_lite.compile(aliased, backend="aot_eager")(base[:4], base[1:])
        stats = persistent_cache.stats()
    reasons = " ".join(stats["not_stored"])
    assert stats["stored"] == 0, stats
    assert "mutates tensors in place" in reasons and "share storage" in reasons, stats


# ---- packages: dynamo_lite.save / dynamo_lite.load --------------------------------------
PACKAGE_PROGRAM = textwrap.dedent('''
    import json, os, sys, torch, dynamo_lite
    from dynamo_lite import persistent_cache
    from dynamo_lite.report import events

    def libraries():  # compiled kernels in inductor's cache directory: path -> mtime
        root = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
        return {{os.path.join(d, n): os.stat(os.path.join(d, n)).st_mtime_ns
                 for d, _, ns in os.walk(root) for n in ns if n.endswith(".so")}}

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 8)
            self.b = torch.nn.Linear(8, 2)

        def forward(self, x):
            h = self.a(x).relu()
            dynamo_lite.graph_break()  # two frames
            return self.b(h * 2)

    torch.manual_seed(0)
    net = Net()
    x = torch.randn(3, 4)
    mode, path, backend, grad = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "grad"
    result = {{}}
    if mode == "load":
        result["load"] = dynamo_lite.load(path)
    compiled = dynamo_lite.compile(net, backend=backend)
    recorded = []
    before = libraries()
    with events.collecting(recorded.append), torch.set_grad_enabled(grad):
        got = compiled(x)
    result["inductor_imported"] = "torch._inductor.compile_fx" in sys.modules
    result["kernels_built"] = sorted(p for p, t in libraries().items() if before.get(p) != t)
    result["ok"] = bool(torch.allclose(got, net(x), atol=1e-6))
    result["traced"] = sum(isinstance(e, events.GraphEvent) and not e.loaded for e in recorded)
    result["loaded"] = sum(isinstance(e, events.GraphEvent) and e.loaded for e in recorded)
    result["breaks"] = [e.break_id for e in recorded if isinstance(e, events.GraphBreakEvent)]
    if mode == "save":
        result["save"] = dynamo_lite.save(compiled, path)
    print(json.dumps(result))
''')


def _run_package(tmp_path, mode: str, package: str, backend: str = "eager", cache: str = "cache", env=None,
                 grad: bool = True) -> dict:
    path = tmp_path / "package_prog.py"
    path.write_text(PACKAGE_PROGRAM.format())
    full = _env(tmp_path, DYNAMO_LITE_CACHE_DIR=str(tmp_path / cache), **(env or {}))
    proc = subprocess.run([sys.executable, str(path), mode, package, backend, "grad" if grad else "no_grad"],
                          capture_output=True, text=True,
                          timeout=600, env=full, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_saved_package_runs_in_another_process_without_a_trace(tmp_path):
    package = str(tmp_path / "net.dlpkg")
    saved = _run_package(tmp_path, "save", package)
    assert saved["ok"] and saved["traced"] == 2 and saved["save"]["entries"] == 2, saved
    # another process, another (empty) cache directory, the cache even turned off: the package serves
    loaded = _run_package(tmp_path, "load", package, cache="other", env={"DYNAMO_LITE_PERSISTENT_CACHE": "0"})
    assert loaded["load"]["entries"] == 2 and loaded["load"]["backend"] == "eager", loaded
    assert loaded["ok"] and loaded["traced"] == 0 and loaded["loaded"] == 2, loaded
    assert loaded["breaks"] == saved["breaks"] and saved["breaks"], (loaded, saved)
    # the package is for this configuration: under another backend the frames are traced
    other = _run_package(tmp_path, "load", package, backend="aot_eager", cache="third")
    assert other["ok"] and other["traced"] == 2 and other["loaded"] == 0, other


def test_an_inductor_package_carries_inductor_caches_and_kernels(tmp_path):
    """On a machine whose inductor cache is empty, the package's frames load without a trace and
    inductor builds no kernel: its cache artifacts and compiled kernels came with the package."""
    package = str(tmp_path / "net-inductor.dlpkg")
    saved = _run_package(tmp_path, "save", package, backend="inductor",
                         env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-a")})
    assert saved["ok"] and saved["traced"] == 2 and saved["kernels_built"], saved
    assert saved["save"]["inductor_artifacts"] and saved["save"]["inductor_kernels"], saved
    loaded = _run_package(tmp_path, "load", package, backend="inductor", cache="other",
                          env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-b")})
    assert loaded["ok"] and loaded["traced"] == 0 and loaded["loaded"] == 2, loaded
    assert loaded["load"]["inductor_artifacts"] and loaded["kernels_built"] == [], loaded
    assert saved["save"]["aot_libraries"] == 0  # (a graph for autograd: inductor's, not an AOT library)


def test_an_inference_package_runs_aot_libraries_without_inductor(tmp_path):
    """Inference graphs (no gradient needed) are also built by AOTInductor into libraries that
    torch's C++ runner loads: the first call in the serving process neither imports inductor nor
    compiles anything."""
    package = str(tmp_path / "net-aot.dlpkg")
    saved = _run_package(tmp_path, "save", package, backend="inductor", grad=False,
                         env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-a")})
    assert saved["ok"] and saved["save"]["aot_libraries"] == 2, saved
    loaded = _run_package(tmp_path, "load", package, backend="inductor", cache="other", grad=False,
                          env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-b")})
    assert loaded["ok"] and loaded["traced"] == 0 and loaded["loaded"] == 2, loaded
    assert not loaded["inductor_imported"] and loaded["kernels_built"] == [], loaded
    # with grad on (a guard of the entries) the frames are traced again and compiled by inductor
    other = _run_package(tmp_path, "load", package, backend="inductor", cache="third", grad=True,
                         env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-c")})
    assert other["ok"] and other["traced"] == 2 and other["loaded"] == 0, other


def test_a_file_that_is_not_a_package_or_of_other_versions_is_refused(tmp_path):
    import zipfile

    not_a_package = tmp_path / "x.dlpkg"
    not_a_package.write_bytes(b"hello")
    with pytest.raises(ValueError, match="not a package written by dynamo_lite.save"):
        dynamo_lite.load(not_a_package)
    other = tmp_path / "other.dlpkg"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("dynamo_lite-package.json", json.dumps({
            "kind": "dynamo_lite compiled package", "format": persistent_cache.FORMAT,
            "python": sys.version.split()[0], "torch": "1.0.0", "dynamo_lite": persistent_cache._package_fingerprint(),
            "entries": []}))
    with pytest.raises(ValueError, match=r"other versions: torch '1.0.0'"):
        dynamo_lite.load(other)
    assert not persistent_cache.has_packages()


def test_save_names_why_there_is_nothing_to_save(tmp_path):
    def uses_callable_backend(x):
        return x + 1

    compiled = dynamo_lite.compile(uses_callable_backend, backend=lambda gm, inputs: gm.forward)
    with pytest.raises(ValueError, match="nothing to save"):
        dynamo_lite.save(compiled, tmp_path / "f.dlpkg")  # never called
    persistent_cache.reset_stats()
    compiled(torch.ones(2))
    with pytest.raises(ValueError, match="registered name"):
        dynamo_lite.save(compiled, tmp_path / "f.dlpkg")
    with pytest.raises(TypeError, match="what dynamo_lite.compile"):
        dynamo_lite.save(uses_callable_backend, tmp_path / "f.dlpkg")
    assert not os.path.exists(tmp_path / "f.dlpkg")


def test_the_cache_keeps_to_its_size_removing_the_least_recently_used(tmp_path):
    def one(x):
        return x + 1

    def two(x):
        return x * 2

    def three(x):
        return x - 3

    with config.patch(cache_dir=str(tmp_path)):
        for fn in (one, two, three):
            dynamo_lite.compile(fn, backend="eager")(torch.ones(2))
    files = sorted(os.path.join(d, n) for d, _, ns in os.walk(tmp_path) for n in ns if n.endswith(".dle"))
    assert len(files) == 3
    for age, path in enumerate(files):  # the first file is the least recently used
        os.utime(path, (1_000_000 + age, 1_000_000 + age))
    total = sum(os.path.getsize(p) for p in files)
    with config.patch(cache_dir=str(tmp_path)):
        assert persistent_cache.trim(limit_mb=total / 1024 / 1024) == 0  # (within the limit: nothing goes)
        removed = persistent_cache.trim(limit_mb=(total - 1) / 1024 / 1024)
    kept = [p for p in files if os.path.exists(p)]
    assert removed >= 1 and files[0] not in kept and files[-1] in kept, (removed, kept)
    assert sum(os.path.getsize(p) for p in kept) <= 0.75 * (total - 1)


def test_aot_libraries_in_the_cache_directory(tmp_path):
    """config.aot_libraries: the capturing process also builds AOTInductor libraries of its
    inference graphs in the cache directory; the next process runs them without inductor."""
    env = {"DYNAMO_LITE_AOT_LIBRARIES": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    first = _run_package(tmp_path, "plain", "", backend="inductor", grad=False, env=env)
    assert first["ok"] and first["traced"] == 2, first
    libraries = [n for _, _, ns in os.walk(tmp_path / "cache") for n in ns if n.endswith(".aot")]
    assert len(libraries) == 2, libraries
    second = _run_package(tmp_path, "plain", "", backend="inductor", grad=False, env=env)
    assert second["ok"] and second["loaded"] == 2 and second["traced"] == 0, second
    assert not second["inductor_imported"], second



def _libraries(tmp_path) -> list:
    return sorted(os.path.join(d, n) for d, _, ns in os.walk(tmp_path / "cache") for n in ns if n.endswith(".aot"))


def test_aot_libraries_built_in_the_background(tmp_path):
    """config.aot_libraries == "background" (the default outside this suite): the capturing
    process only asks; a builder process of its own builds the libraries after it, and the
    process after that runs them without inductor.  A library that was never built (its builder
    killed) is asked for again by the process that loads its entry through inductor instead."""
    env = {"DYNAMO_LITE_AOT_LIBRARIES": "background", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    first = _run_package(tmp_path, "plain", "", backend="inductor", grad=False, env=env)
    assert first["ok"] and first["traced"] == 2, first

    def built() -> list:
        with config.patch(cache_dir=str(tmp_path / "cache")):
            assert persistent_cache.wait_for_aot_libraries(timeout=400)
        return _libraries(tmp_path)

    libraries = built()
    assert len(libraries) == 2, libraries
    second = _run_package(tmp_path, "plain", "", backend="inductor", grad=False, env=env)
    assert second["ok"] and second["loaded"] == 2 and second["traced"] == 0, second
    assert not second["inductor_imported"], second
    os.unlink(libraries[0])  # (as if its builder had been killed)
    third = _run_package(tmp_path, "plain", "", backend="inductor", grad=False, env=env)
    assert third["ok"] and third["loaded"] == 2 and third["inductor_imported"], third
    assert built() == libraries
    fourth = _run_package(tmp_path, "plain", "", backend="inductor", grad=False, env=env)
    assert fourth["ok"] and fourth["loaded"] == 2 and not fourth["inductor_imported"], fourth


def test_graphs_for_autograd_are_not_sent_to_the_builder(tmp_path):
    """A graph compiled for autograd has no AOTInductor library: no request, no builder."""
    env = {"DYNAMO_LITE_AOT_LIBRARIES": "background", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    first = _run_package(tmp_path, "plain", "", backend="inductor", grad=True, env=env)
    assert first["ok"] and first["traced"] == 2, first
    root = tmp_path / "cache" / persistent_cache.FORMAT
    assert not (root / "aot-queue").exists() and not (root / "aot-builder.log").exists()
    assert _libraries(tmp_path) == []

EXPLAIN_PROGRAM = textwrap.dedent('''
    import json, sys, torch, dynamo_lite

    def f(x):
        y = x.sin()
        dynamo_lite.graph_break()
        return y * 2

    x = torch.randn(3)
    if sys.argv[1] == "store":
        dynamo_lite.compile(f, backend="eager")(x)
    else:
        out = dynamo_lite.explain(f)(x)
        print(json.dumps({"loaded": [i.loaded for i in out.graph_infos], "breaks": out.graph_break_count,
                          "text": str(out)}))
''')


def test_explain_marks_frames_loaded_from_the_cache(tmp_path):
    path = tmp_path / "explain_prog.py"
    path.write_text(EXPLAIN_PROGRAM)
    for mode in ("store", "explain"):
        proc = subprocess.run([sys.executable, str(path), mode], capture_output=True, text=True, timeout=300,
                              env=_env(tmp_path), cwd=str(tmp_path))
        assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["loaded"] == [True, True] and result["breaks"] == 1, result
    assert "loaded from the persistent capture cache, not traced" in result["text"], result["text"]
    assert "graph_break()" in result["text"] or "DL0" in result["text"], result["text"]


def test_which_graphs_count_as_writing_to_tensors():
    """Only graphs that may write in place are kept from functionalising backends: `a & b`
    (operator.and_) is not `a &= b`."""
    import operator

    def traced(fn):
        return torch.fx.symbolic_trace(fn)

    assert not persistent_cache._mutates(traced(lambda a, b: operator.and_(a, b) | (a ^ b)))
    assert not persistent_cache._mutates(traced(lambda a, b: operator.not_(a) if False else a.relu()))
    graph = torch.fx.Graph()
    a, b = graph.placeholder("a"), graph.placeholder("b")
    graph.output(graph.call_function(operator.iand, (a, b)))  # (as a trace of `a &= b` records it)
    assert persistent_cache._mutates(torch.fx.GraphModule(torch.nn.Module(), graph))
    assert persistent_cache._mutates(traced(lambda a, b: a.add_(b)))
    assert persistent_cache._mutates(traced(lambda a, b: torch.relu_(a)))


AOT_CACHE_PROGRAM = textwrap.dedent('''
    import json, torch, dynamo_lite
    from torch._dynamo.utils import counters  # (torch's own counters: the test reads them)

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    x = torch.randn(4, 8)

    def f(t):
        return net(t).relu().view(-1).sum(0)  # (methods: AOTAutograd checks what they are called on)

    with torch.no_grad():
        got = dynamo_lite.compile(f, backend="inductor")(x)
        ok = bool(torch.allclose(got, f(x), atol=1e-5))
    print(json.dumps({"ok": ok, "aot_autograd": dict(counters["aot_autograd"])}))
''')


def test_a_loaded_graph_hits_aot_autograds_cache(tmp_path):
    """A stored graph compiled again by inductor in the next process is AOTAutograd's cache hit
    (its nodes carry the example values AOTAutograd checks), not a second AOTAutograd trace."""
    path = tmp_path / "aot_cache_prog.py"
    path.write_text(AOT_CACHE_PROGRAM)
    env = _env(tmp_path, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, env=env,
                              cwd=str(tmp_path))
        assert proc.returncode == 0, proc.stderr[-4000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert runs[0]["ok"] and runs[1]["ok"], runs
    assert runs[0]["aot_autograd"].get("autograd_cache_saved") == 1, runs[0]
    assert runs[1]["aot_autograd"].get("autograd_cache_hit") == 1, runs[1]
