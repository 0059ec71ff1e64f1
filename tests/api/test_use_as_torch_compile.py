"""dynamo_lite.use_as_torch_compile: torch.compile(...) calls of unedited code compile with
dynamo_lite (dynamo_lite/torch_compile_switch.py), through the function, the context manager,
the DYNAMO_LITE_AS_TORCH_COMPILE variable (the package's .pth file, in a throwaway venv),
``python -m dynamo_lite.run`` and ``pytest --dl-as-torch-compile``.

Every compiled result is compared with eager (dynamo_lite.testing); that dynamo_lite compiled
it is shown by its events or a counting backend, and that TorchDynamo did not by its own
counters (torch._dynamo.utils.counters, read only), which must stay empty.
"""
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import dynamo_lite
from dynamo_lite import torch_compile_switch
from dynamo_lite.testing import CompileCounter, assert_same_as_eager, check_module, recording

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PTH = os.path.join(ROOT, "dynamo_lite", "dynamo_lite_as_torch_compile.pth")
_NAMES = [(torch, "compile"), (torch.compiler, "compile"), (torch.compiler, "disable"),
          (torch.compiler, "set_stance"), (torch.compiler, "reset"), (torch.compiler, "allow_in_graph"),
          (torch.compiler, "substitute_in_graph"), (torch.compiler, "assume_constant_result")]
ORIGINALS = [getattr(module, name) for module, name in _NAMES]


def _current():
    return [getattr(module, name) for module, name in _NAMES]


def _torchdynamo_frames():
    """Frames TorchDynamo has compiled in this process (its own counters; 0 if never imported)."""
    utils = sys.modules.get("torch._dynamo.utils")
    return sum(utils.counters["frames"].values()) if utils is not None else 0


@pytest.fixture(autouse=True)
def _switch_off_after_and_no_torchdynamo():
    assert not torch_compile_switch.is_enabled()
    frames = {"before": _torchdynamo_frames()}  # (a test that runs torch.compile for reference moves it)
    try:
        yield frames
        assert _torchdynamo_frames() == frames["before"], "TorchDynamo compiled a frame"
    finally:
        dynamo_lite.use_as_torch_compile(False)
        dynamo_lite.set_stance("default")
        assert all(a is b for a, b in zip(_current(), ORIGINALS))


def _graphs(events):
    return [e for e in events if type(e).__name__ == "GraphEvent"]


def scaled_softmax(x, y):
    return torch.softmax(x @ y, dim=-1) * 2 + y.sum()


def build_compiled(model, **kwargs):
    """Library code: it calls torch.compile itself (read at call time)."""
    return torch.compile(model, **kwargs)


# ---------------------------------------------------------------------------
# the switch itself
def test_on_replaces_the_names_and_off_restores_the_same_objects():
    dynamo_lite.use_as_torch_compile()
    assert torch.compile is torch_compile_switch.torch_compile
    assert torch.compiler.compile is torch_compile_switch.torch_compile
    assert torch.compiler.disable is torch_compile_switch.compiler_disable
    assert torch.compiler.set_stance is torch_compile_switch.compiler_set_stance
    assert torch.compiler.reset is torch_compile_switch.compiler_reset
    assert torch.compiler.allow_in_graph is torch_compile_switch.compiler_allow_in_graph
    # what a trace answers for by identity is not replaced (variables/torch_vars.py)
    assert torch.compiler.is_compiling.__module__ == "torch.compiler"
    dynamo_lite.use_as_torch_compile()  # twice: still one level, the originals are kept
    dynamo_lite.use_as_torch_compile(False)
    assert all(a is b for a, b in zip(_current(), ORIGINALS))
    dynamo_lite.use_as_torch_compile(False)  # off when off: nothing changes
    assert all(a is b for a, b in zip(_current(), ORIGINALS))


def test_context_manager_restores_what_was_there_before():
    with dynamo_lite.use_as_torch_compile():
        assert torch.compile is torch_compile_switch.torch_compile
        with dynamo_lite.use_as_torch_compile(False):
            assert torch.compile is ORIGINALS[0]
        assert torch.compile is torch_compile_switch.torch_compile
    assert all(a is b for a, b in zip(_current(), ORIGINALS))


def test_torch_compile_goes_to_dynamo_lite_and_equals_eager():
    x, y = torch.randn(4, 5), torch.randn(5, 5)
    counter = CompileCounter()
    with dynamo_lite.use_as_torch_compile():
        compiled = build_compiled(scaled_softmax, backend=counter)
        seen, collecting = recording()
        with collecting:
            assert_same_as_eager(scaled_softmax, x, y, compiled_fn=compiled)
    assert counter.frame_count == 1 and counter.op_count >= 4
    assert [g.frame for g in _graphs(seen)] == ["scaled_softmax"]
    # what it returned keeps working, and stays dynamo_lite's, after the switch is off
    assert_same_as_eager(scaled_softmax, x, y, compiled_fn=compiled)
    assert counter.frame_count == 1


def test_torch_compiler_compile_and_default_backend():
    x, y = torch.randn(3, 5), torch.randn(5, 5)
    with dynamo_lite.use_as_torch_compile(), dynamo_lite.config.patch(default_backend="eager"):
        compiled = torch.compiler.compile(scaled_softmax)  # backend=None: dynamo_lite's default
        seen, collecting = recording()
        with collecting:
            assert_same_as_eager(scaled_softmax, x, y, compiled_fn=compiled)
    assert [g.backend for g in _graphs(seen)] == ["eager"]


def test_decorator_forms():
    counter = CompileCounter()
    with dynamo_lite.use_as_torch_compile(), dynamo_lite.config.patch(default_backend="eager"):
        @torch.compile
        def bare(x):
            return x.cos() + 1

        @torch.compile()
        def called(x):
            return x.sin() * 3

        @torch.compile(fullgraph=True, backend=counter)
        def full(x):
            return x.relu() - 1

        seen, collecting = recording()
        with collecting:
            for fn in (bare, called, full):
                assert_same_as_eager(fn.__wrapped__, torch.randn(6), compiled_fn=fn)
    assert [g.frame for g in _graphs(seen)] == ["bare", "called", "full"]
    assert counter.frame_count == 1


def test_fullgraph_raises_dynamo_lite_unsupported():
    def branches(x):
        if x.sum() > 0:  # data-dependent: a graph break
            return x + 1
        return x - 1

    with dynamo_lite.use_as_torch_compile():
        compiled = torch.compile(branches, backend="eager", fullgraph=True)
        with pytest.raises(dynamo_lite.Unsupported):
            compiled(torch.ones(3))
        assert_same_as_eager(branches, torch.ones(3), compiled_fn=torch.compile(branches, backend="eager"))


def test_module_and_module_compile_method():
    def factory():
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))

    with dynamo_lite.use_as_torch_compile():
        compiled = torch.compile(factory(), backend="eager")
        assert isinstance(compiled, dynamo_lite.OptimizedModule) and isinstance(compiled, torch.nn.Sequential)
        check_module(factory, [((torch.randn(3, 4),), {})], backward=True)  # (dynamo_lite.compile, the reference)

        model = factory()
        counter = CompileCounter()
        model.compile(backend=counter)  # nn.Module.compile reads torch.compile at call time
        x = torch.randn(3, 4)
        torch.testing.assert_close(model(x), model._call_impl(x))
        assert counter.frame_count == 1


def test_disable_is_dynamo_lite_disable():
    counter = CompileCounter()
    with dynamo_lite.use_as_torch_compile():
        @torch.compiler.disable
        def helper(x):
            return torch.tanh(x)

        @torch.compiler.disable(recursive=False)
        def own_frame_only(x):
            return x * 5

        def step(x):
            return helper(x + 1) * 2 + own_frame_only(x)

        compiled = torch.compile(step, backend=counter)
        assert_same_as_eager(step, torch.randn(4), compiled_fn=compiled)
        assert helper._dynamo_lite_disabled is True
        assert own_frame_only._dynamo_lite_disabled == "frame"
    ops = {str(n.target) for gm in counter.graphs for n in gm.graph.nodes}
    assert counter.frame_count >= 1 and not any("tanh" in op for op in ops)


def test_disable_argument_returns_the_model():
    def f(x):
        return x + 1

    with dynamo_lite.use_as_torch_compile():
        assert torch.compile(f, disable=True) is f
        assert torch.compile(disable=True)(f) is f


def test_is_compiling_answers_as_under_torch_compile(_switch_off_after_and_no_torchdynamo):
    def which_path(x):
        return x + 1 if torch.compiler.is_compiling() else x - 1

    x = torch.zeros(2)
    reference = torch.compile(which_path, backend="eager")(x)  # TorchDynamo, before the switch
    torch.compiler.reset()
    _switch_off_after_and_no_torchdynamo["before"] = _torchdynamo_frames()  # none from here on
    with dynamo_lite.use_as_torch_compile():
        ours = torch.compile(which_path, backend="eager")(x)
    assert torch.equal(ours, reference) and torch.equal(ours, x + 1)
    assert not torch.compiler.is_compiling()


def test_mode_and_options():
    got = []

    def backend_with_options(gm, example_inputs, mode=None, options=None):
        got.append((mode, options))
        return gm.forward

    x = torch.randn(3)
    with dynamo_lite.use_as_torch_compile():
        # a backend that takes them gets them, as from torch.compile; one that does not, does not
        assert_same_as_eager(torch.sin, x, compiled_fn=torch.compile(lambda t: torch.sin(t), backend=backend_with_options,
                                                                      mode="max-autotune"))
        f = torch.compile(lambda t: torch.cos(t), backend=backend_with_options, options={"trace.enabled": False})
        f(x)
        assert got == [("max-autotune", None), (None, {"trace.enabled": False})]
        g = torch.compile(lambda t: t * 2, backend="eager", mode="reduce-overhead")  # transformers' CompileConfig
        torch.testing.assert_close(g(x), x * 2)
        with pytest.raises(RuntimeError, match="Either mode or options"):
            torch.compile(lambda t: t, mode="default", options={})
        with pytest.raises(RuntimeError, match="Unexpected optimization option"):  # checked as dynamo_lite.compile checks
            torch.compile(lambda t: t, backend="inductor", options={"no_such_option": 1})


def test_unknown_backend_name_is_a_clear_error():
    with dynamo_lite.use_as_torch_compile():
        with pytest.raises(ValueError, match=r"backend='cudagraphs'.*dynamo_lite.*known: .*eager"):
            torch.compile(lambda t: t, backend="cudagraphs")
        decorate = torch.compile(backend="tvm")  # decorator form: checked when applied, as torch does
        with pytest.raises(ValueError, match="'tvm'"):
            decorate(lambda t: t)


def test_arguments_without_an_equivalent_warn_once():
    torch_compile_switch._WARNED.clear()
    with dynamo_lite.use_as_torch_compile():
        with pytest.warns(UserWarning, match="recompile_limit"):
            f = torch.compile(lambda t: t + 1, backend="eager", recompile_limit=2, name="step")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.compile(lambda t: t + 1, backend="eager", recompile_limit=2)
        torch.testing.assert_close(f(torch.ones(2)), torch.ones(2) + 1)


def test_set_stance_and_reset_are_dynamo_lite_s():
    counter = CompileCounter()
    x = torch.randn(4)
    with dynamo_lite.use_as_torch_compile():
        compiled = torch.compile(lambda t: t.exp() + 1, backend=counter)
        with torch.compiler.set_stance("force_eager"):
            torch.testing.assert_close(compiled(x), x.exp() + 1)
        assert counter.frame_count == 0
        compiled(x)
        torch.compiler.reset()  # dynamo_lite.reset: the next call compiles again
        compiled(x)
        assert counter.frame_count == 2
        with pytest.raises(NotImplementedError):
            torch.compiler.set_stance("default", force_backend="eager")


def test_escape_hatches_are_dynamo_lite_s():
    counter = CompileCounter()
    with dynamo_lite.use_as_torch_compile():
        def opaque(x):
            return torch.sin(x) * 2

        torch.compiler.allow_in_graph(opaque)

        @torch.compiler.assume_constant_result
        def scale():
            return 3

        def step(x):
            return opaque(x) + scale()

        assert_same_as_eager(step, torch.randn(4), compiled_fn=torch.compile(step, backend=counter))
    assert counter.frame_count == 1
    assert opaque in [n.target for n in counter.graphs[0].graph.nodes]  # one node: dynamo_lite's allow_in_graph


# ---------------------------------------------------------------------------
# a real library calling torch.compile
def test_transformers_get_compiled_call():
    transformers = pytest.importorskip("transformers")
    from transformers.generation.configuration_utils import CompileConfig

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 64, (2, 7))
    with dynamo_lite.use_as_torch_compile():
        # generate()'s path: torch.compile(self.__call__, **CompileConfig(...).to_dict()) in modeling_utils
        compiled_call = model.get_compiled_call(CompileConfig(backend="eager"))
        seen, collecting = recording()
        with torch.no_grad(), collecting:
            got = compiled_call(input_ids=ids, use_cache=False).logits
    with torch.no_grad():
        expected = model(input_ids=ids, use_cache=False).logits
    torch.testing.assert_close(got, expected)
    assert _graphs(seen) and all(g.backend == "eager" for g in _graphs(seen))


def test_transformers_trainer_with_torch_compile(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers' Trainer needs accelerate")
    from torch.utils.data import Dataset

    class Tokens(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            ids = torch.arange(i, i + 8) % 64
            return {"input_ids": ids, "labels": ids}

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2,
                                          torch_compile=True, torch_compile_backend="eager", report_to=[],
                                          use_cpu=True, save_strategy="no", logging_steps=1)
    seen, collecting = recording()
    with dynamo_lite.use_as_torch_compile(), collecting:
        result = transformers.Trainer(model=model, args=args, train_dataset=Tokens()).train()
    assert result.global_step == 2 and _graphs(seen)


# ---------------------------------------------------------------------------
# without editing the script: the environment variable, the launcher, the pytest option
_SCRIPT = """
import sys
import torch

def model_step(x):
    return torch.nn.functional.gelu(x) * 2

def build(fn):  # a function of the script's own module that calls torch.compile
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return torch.compile(fn, backend=counting), graphs

compiled, graphs = build(model_step)
x = torch.randn(5)
same = torch.equal(compiled(x), model_step(x))
utils = sys.modules.get("torch._dynamo.utils")
torchdynamo_frames = sum(utils.counters["frames"].values()) if utils else 0
print(__name__, sys.argv[1:], torch.compile.__module__, type(compiled).__module__, len(graphs), same,
      torchdynamo_frames)
"""


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != torch_compile_switch.ENV_VAR}
    env.update(PYTHONPATH=ROOT, **extra)
    return env


def _run(args, env, cwd):
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip().splitlines()


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory):
    """A throwaway venv (sharing this interpreter's packages) with the package's .pth file in its
    site-packages, where an installed wheel puts it (setup.py; checked by test_build_puts_the_pth...)."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    python = os.path.join(venv, "bin", "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    shutil.copy(PTH, purelib)
    # --system-site-packages shares the base interpreter's packages; when this interpreter is
    # itself a venv (CI's per-version venvs), its own site-packages (torch) are added by a .pth
    # (named to load before the package's: .pth files are read in name order)
    import site
    with open(os.path.join(purelib, "_a_parent_environment.pth"), "w") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    return python


def test_environment_variable_switches_a_script_that_never_imports_dynamo_lite(venv_python, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    on = _run([venv_python, str(script), "a"], _env(DYNAMO_LITE_AS_TORCH_COMPILE="1"), tmp_path)
    assert on == ["__main__ ['a'] dynamo_lite.torch_compile_switch dynamo_lite._C 1 True 0"]
    for value in (None, "0"):  # unset, or off: torch's own torch.compile
        env = _env() if value is None else _env(DYNAMO_LITE_AS_TORCH_COMPILE=value)
        probe = "import sys, torch; print(torch.compile.__module__, 'dynamo_lite' in sys.modules)"
        assert _run([venv_python, "-c", probe], env, tmp_path) == ["torch False"]


def test_the_pth_file_never_imports_torch(venv_python, tmp_path):
    probe = ("import sys; print('torch' in sys.modules, "
             "[type(f).__name__ for f in sys.meta_path if type(f).__name__ == '_AfterTorchImport'])")
    assert _run([venv_python, "-c", probe], _env(DYNAMO_LITE_AS_TORCH_COMPILE="1"), tmp_path) == \
        ["False ['_AfterTorchImport']"]
    assert _run([venv_python, "-c", "import sys; print('dynamo_lite' in sys.modules)"], _env(), tmp_path) == ["False"]


def test_launcher_runs_a_script_and_a_module(tmp_path):
    (tmp_path / "train.py").write_text(_SCRIPT)
    out = _run([sys.executable, "-m", "dynamo_lite.run", "train.py", "--epochs", "1"], _env(), tmp_path)
    assert out == ["__main__ ['--epochs', '1'] dynamo_lite.torch_compile_switch dynamo_lite._C 1 True 0"]
    out = _run([sys.executable, "-m", "dynamo_lite.run", "-m", "train", "x"], _env(), tmp_path)
    assert out == ["__main__ ['x'] dynamo_lite.torch_compile_switch dynamo_lite._C 1 True 0"]


def test_pytest_option_routes_the_tested_code(tmp_path):
    (tmp_path / "test_model.py").write_text(textwrap.dedent("""
        import torch

        def test_compiled_step():
            compiled = torch.compile(lambda x: x.sigmoid() * 2, backend="eager")
            x = torch.randn(3)
            assert torch.equal(compiled(x), x.sigmoid() * 2)
            assert torch.compile.__module__ == "dynamo_lite.torch_compile_switch"
            assert type(compiled).__module__ == "dynamo_lite._C"
    """))
    out = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--dl-as-torch-compile"],
               _env(), tmp_path)
    assert any("1 passed" in line for line in out), out


def test_build_puts_the_pth_file_at_the_top_of_the_wheel(tmp_path):
    """setup.py's build_py copies the .pth file beside the package (the wheel's root, installed
    into site-packages; an editable install does not get it: `python -m dynamo_lite.run` instead)."""
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "dynamo_lite"), src / "dynamo_lite",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), src)
    _run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "lib")], _env(), src)
    with open(tmp_path / "lib" / "dynamo_lite_as_torch_compile.pth") as f, open(PTH) as g:
        assert f.read() == g.read()
