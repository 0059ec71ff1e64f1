"""Tiny-config Hugging Face models: dynamo_lite vs torch.compile, side by side, in eval and in a training step.

For each (model, mode, system) a fresh worker process (``--worker``) builds the model from a small
config with random weights (no downloads), compiles it with a counting backend that behaves like
``backend="eager"``, calls it three times with identical inputs and reports:

    graphs        graphs compiled by the first call
    breaks        graph breaks on the first call (dynamo_lite: breaks + frames that fell back to
                  eager; torch.compile: counters["graph_break"])
    recompiles    graphs compiled by the second and third calls (identical inputs: should be 0)
    eager_frames  frames with tensor work that dynamo_lite left to eager (fallbacks); "-" for torch.compile
    limit_warns   recompile-limit warnings seen
    correct       the outputs (eval) or the loss and every gradient (train) equal eager's

Training mode: ``model.train()`` with the model's own loss (``labels=``), one forward and backward;
the eager twin starts from the same weights and the same RNG state.

    python bench/hf_models.py [--models gpt2,bert,...] [--modes eval,train] [--systems ...] [--json PATH]
    python bench/hf_models.py --wide     # the wider set (WIDE: llama-like LMs, encoders, seq2seq, vision, speech)
    python bench/hf_models.py --render dl.json,tc.json   # one table from the rows of separate runs

The table in docs/performance.md ("Hugging Face models") is this script's output.
"""
from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import subprocess
import sys
import warnings

# the checkout this file is in, not whatever dynamo_lite is installed (workers inherit it)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing  # noqa: E402
import torch  # noqa: E402

SYSTEMS = ("dynamo_lite", "torch.compile")
MODES = ("eval", "train")
VOCAB = 128
BATCH, SEQ = 2, 16


# ---- models ---------------------------------------------------------------------------
def _config(T, name):
    small = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
                 eos_token_id=2)
    if name == "gpt2":
        return T.GPT2LMHeadModel, T.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2,
                                               n_head=4, bos_token_id=1, eos_token_id=2)
    if name == "bert":
        return T.BertForMaskedLM, T.BertConfig(**small)
    if name == "distilbert":
        return T.DistilBertForMaskedLM, T.DistilBertConfig(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4,
                                                           hidden_dim=128, max_position_embeddings=64)
    if name == "deberta-v2":
        return T.DebertaV2ForMaskedLM, T.DebertaV2Config(**small)
    if name == "t5":
        return T.T5ForConditionalGeneration, T.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128,
                                                        num_layers=2, num_heads=4, decoder_start_token_id=0,
                                                        pad_token_id=0, eos_token_id=1, use_cache=True)
    if name == "bloom":
        return T.BloomForCausalLM, T.BloomConfig(vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4)
    if name == "gemma2":
        return T.Gemma2ForCausalLM, T.Gemma2Config(**small, num_key_value_heads=2, head_dim=16)
    if name == "llama":
        return T.LlamaForCausalLM, T.LlamaConfig(**small, num_key_value_heads=2)
    if name == "mamba":
        return T.MambaForCausalLM, T.MambaConfig(vocab_size=VOCAB, hidden_size=64, state_size=8,
                                                 num_hidden_layers=2, pad_token_id=0, bos_token_id=1,
                                                 eos_token_id=2)
    if name == "clip":
        return T.CLIPModel, T.CLIPConfig(
            text_config=dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=128, max_position_embeddings=64),
            vision_config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=128, image_size=32, patch_size=8),
            projection_dim=32)
    if name == "segformer":
        return T.SegformerForSemanticSegmentation, T.SegformerConfig(
            num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
            patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
            decoder_hidden_size=32, num_labels=4)
    if name == "whisper":
        return T.WhisperForConditionalGeneration, T.WhisperConfig(
            vocab_size=VOCAB, num_mel_bins=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=128,
            max_source_positions=16, max_target_positions=32, pad_token_id=0, bos_token_id=1,
            eos_token_id=2, decoder_start_token_id=1, suppress_tokens=None, begin_suppress_tokens=None)
    if name in WIDE:
        kind, cls, config_cls, kw = WIDE[name]
        kw = {**(small if kind in ("lm", "mlm") else {}), **kw}
        return getattr(T, cls), getattr(T, config_cls)(**kw)
    raise KeyError(name)


MODELS = ("gpt2", "bert", "distilbert", "deberta-v2", "t5", "bloom", "gemma2", "llama", "mamba", "clip",
          "segformer", "whisper")

_SEQ2SEQ = dict(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64,
                pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=2)
_IMAGE = dict(num_labels=4)
# --wide: more common architectures (kind: lm = causal LM, mlm = masked LM, s2s = encoder-decoder,
# image = 32x32 image classification, ctc = speech CTC); name -> (kind, model class, config class,
# config arguments; lm/mlm start from the small text config of _config)
WIDE = {
    "mistral": ("lm", "MistralForCausalLM", "MistralConfig", dict(num_key_value_heads=2)),
    "qwen2": ("lm", "Qwen2ForCausalLM", "Qwen2Config", dict(num_key_value_heads=2)),
    "phi": ("lm", "PhiForCausalLM", "PhiConfig", {}),
    "gpt_neox": ("lm", "GPTNeoXForCausalLM", "GPTNeoXConfig", {}),
    "opt": ("lm", "OPTForCausalLM", "OPTConfig", dict(ffn_dim=128, word_embed_proj_dim=64)),
    "falcon": ("lm", "FalconForCausalLM", "FalconConfig", {}),
    "gptj": ("lm", "GPTJForCausalLM", "GPTJConfig", dict(n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                                         rotary_dim=8)),
    "roberta": ("mlm", "RobertaForMaskedLM", "RobertaConfig", dict(pad_token_id=1)),
    "albert": ("mlm", "AlbertForMaskedLM", "AlbertConfig", dict(embedding_size=32)),
    "electra": ("mlm", "ElectraForMaskedLM", "ElectraConfig", dict(embedding_size=32)),
    "mobilebert": ("mlm", "MobileBertForMaskedLM", "MobileBertConfig",
                   dict(embedding_size=32, intra_bottleneck_size=32, true_hidden_size=32, num_feedforward_networks=2)),
    "bart": ("s2s", "BartForConditionalGeneration", "BartConfig", _SEQ2SEQ),
    "mbart": ("s2s", "MBartForConditionalGeneration", "MBartConfig", _SEQ2SEQ),
    "pegasus": ("s2s", "PegasusForConditionalGeneration", "PegasusConfig", _SEQ2SEQ),
    "vit": ("image", "ViTForImageClassification", "ViTConfig",
            dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=32,
                 patch_size=8, **_IMAGE)),
    "convnext": ("image", "ConvNextForImageClassification", "ConvNextConfig",
                 dict(num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], **_IMAGE)),
    "resnet": ("image", "ResNetForImageClassification", "ResNetConfig",
               dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], **_IMAGE)),
    "swin": ("image", "SwinForImageClassification", "SwinConfig",
             dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=4,
                  **_IMAGE)),
    "wav2vec2": ("ctc", "Wav2Vec2ForCTC", "Wav2Vec2Config",
                 dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=128, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, mask_time_prob=0.0,
                      pad_token_id=0)),
}


def _inputs(name: str, mode: str) -> dict:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, VOCAB, (BATCH, SEQ), generator=g)
    if name == "clip":
        return {"input_ids": ids, "pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g),
                **({"return_loss": True} if mode == "train" else {})}
    if name == "segformer":
        kw = {"pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g)}
        if mode == "train":
            kw["labels"] = torch.randint(0, 4, (BATCH, 32, 32), generator=g)
        return kw
    if name == "whisper":
        kw = {"input_features": torch.randn(BATCH, 16, 32, generator=g),
              "decoder_input_ids": torch.randint(3, VOCAB, (BATCH, 8), generator=g)}
        if mode == "train":
            kw = {"input_features": kw["input_features"], "labels": kw["decoder_input_ids"]}
        return kw
    kind = WIDE[name][0] if name in WIDE else None
    if kind == "image":
        kw = {"pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g)}
        if mode == "train":
            kw["labels"] = torch.randint(0, 4, (BATCH,), generator=g)
        return kw
    if kind == "ctc":
        kw = {"input_values": torch.randn(BATCH, 1600, generator=g)}
        if mode == "train":
            kw["labels"] = torch.randint(3, VOCAB, (BATCH, 8), generator=g)
        return kw
    kw = {"input_ids": ids}
    if kind == "mlm":
        kw["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    if kind == "s2s":
        kw["labels" if mode == "train" else "decoder_input_ids"] = torch.randint(3, VOCAB, (BATCH, 8), generator=g)
    elif name in ("bert", "distilbert", "deberta-v2"):
        kw["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    if name == "t5":
        if mode == "train":
            kw["labels"] = torch.randint(3, VOCAB, (BATCH, 8), generator=g)
        else:
            kw["decoder_input_ids"] = torch.randint(3, VOCAB, (BATCH, 8), generator=g)
    elif mode == "train" and kind != "s2s":
        kw["labels"] = ids.clone()
    return kw


def build(name: str, mode: str):
    """(model, eager twin with the same weights, kwargs)."""
    import transformers as T

    cls, config = _config(T, name)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = cls(config)
    model.train(mode == "train")
    return model, copy.deepcopy(model), _inputs(name, mode)


# ---- worker ---------------------------------------------------------------------------
class Counting:
    """Behaves like backend "eager"; counts graphs."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def _tensors(value, out):
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, dict) or hasattr(value, "to_tuple"):
        for v in (value.values() if isinstance(value, dict) else value.to_tuple()):
            _tensors(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _tensors(v, out)
    return out


def _same(a, b) -> bool:
    ta, tb = _tensors(a, []), _tensors(b, [])
    return len(ta) == len(tb) and all(x.shape == y.shape and torch.allclose(x, y, rtol=1e-4, atol=1e-5)
                                      for x, y in zip(ta, tb))


def _step(model, kwargs, mode):
    """What one call shows the user: outputs (eval) or the loss and the gradients (train)."""
    if mode == "eval":
        with torch.no_grad():
            return model(**kwargs)
    model.zero_grad(set_to_none=True)
    out = model(**kwargs)
    out.loss.backward()
    return [out.loss.detach()] + [p.grad for p in model.parameters() if p.grad is not None]


class _LimitWarnings(logging.Handler):
    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        if "limit" in record.getMessage().lower():
            self.count += 1


def worker(name: str, mode: str, system: str) -> dict:
    torch.set_num_threads(1)
    model, twin, kwargs = build(name, mode)
    counting = Counting()
    limit = _LimitWarnings()
    for logger in ("dynamo_lite", "torch._dynamo"):
        logging.getLogger(logger).addHandler(limit)
    if system == "dynamo_lite":
        import dynamo_lite
        from dynamo_lite.report import events

        seen: list = []
        sink = events.collecting(seen.append)
        compiled = dynamo_lite.compile(model, backend=counting)
    else:
        import contextlib

        from torch import _dynamo

        _dynamo.utils.counters.clear()
        seen = None
        sink = contextlib.nullcontext()
        compiled = torch.compile(model, backend=counting)
    with warnings.catch_warnings(record=True) as caught, sink:
        warnings.simplefilter("always")
        torch.manual_seed(1)
        out = _step(compiled, kwargs, mode)
        first_graphs = counting.graphs
        if system == "dynamo_lite":
            kinds = [type(e).__name__ for e in seen]
            breaks = kinds.count("GraphBreakEvent") + kinds.count("FallbackEvent")
            eager_frames = kinds.count("FallbackEvent")
        else:
            breaks = sum(_dynamo.utils.counters["graph_break"].values())
            eager_frames = None
        for _ in range(2):
            torch.manual_seed(1)
            _step(compiled, kwargs, mode)
    torch.manual_seed(1)
    expected = _step(twin, kwargs, mode)
    limit.count += sum("limit" in str(w.message).lower() and "recompil" in str(w.message).lower()
                       for w in caught)
    return {"model": name, "mode": mode, "system": system, "graphs": first_graphs, "breaks": breaks,
            "recompiles": counting.graphs - first_graphs, "eager_frames": eager_frames,
            "limit_warns": limit.count, "correct": _same(out, expected)}


# ---- driver ---------------------------------------------------------------------------
def run(models=MODELS, modes=MODES, systems=SYSTEMS, timeout=600) -> list[dict]:
    rows = []
    for name in models:
        for mode in modes:
            for system in systems:
                cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, mode, system]
                try:
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_timing.worker_env())
                    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
                    row = json.loads(lines[-1]) if lines else {
                        "model": name, "mode": mode, "system": system,
                        "error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:120]}
                except subprocess.TimeoutExpired:
                    row = {"model": name, "mode": mode, "system": system, "error": f"timeout {timeout}s"}
                rows.append(row)
                print(_line(row), flush=True)
    return rows


_COLS = ("graphs", "breaks", "recompiles", "eager_frames", "limit_warns", "correct")


def _line(row: dict) -> str:
    head = f"{row['model']:<11} {row['mode']:<5} {row['system']:<13}"
    if "error" in row:
        return f"{head} ERROR {row['error']}"
    return head + " ".join(f"{'-' if row[c] is None else row[c]!s:>12}" for c in _COLS)


def render(rows: list[dict]) -> str:
    """Markdown table: one line per (model, mode), dynamo_lite / torch.compile in each cell."""
    out = ["| model | mode | graphs | breaks | recompiles | eager frames | limit warnings | correct |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    by_key: dict = {}
    for row in rows:
        by_key.setdefault((row["model"], row["mode"]), {})[row["system"]] = row

    def cell(pair, col):
        vals = []
        for system in SYSTEMS:
            r = pair.get(system)
            vals.append("err" if r is None or "error" in r else ("-" if r[col] is None else str(r[col])))
        return " / ".join(vals)

    for (model, mode), pair in by_key.items():
        out.append(f"| {model} | {mode} | " + " | ".join(cell(pair, c) for c in _COLS) + " |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", nargs=3, metavar=("MODEL", "MODE", "SYSTEM"))
    p.add_argument("--models", default=None, help=f"comma-separated (default: {','.join(MODELS)})")
    p.add_argument("--wide", action="store_true", help="the wider set instead: " + ",".join(WIDE))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--json", default=None, help="also write the rows to this file")
    p.add_argument("--render", default=None, metavar="PATHS",
                   help="only print the table of the rows in these --json files (comma-separated; e.g. a "
                        "dynamo_lite run and a torch.compile run)")
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    if args.render:
        rows = []
        for path in args.render.split(","):
            with open(path) as f:
                rows += json.load(f)
        print(render(rows))
        return
    print(f"{'model':<11} {'mode':<5} {'system':<13}" + " ".join(f"{c:>12}" for c in _COLS))
    models = args.models.split(",") if args.models else list(WIDE) if args.wide else list(MODELS)
    rows = run(models, args.modes.split(","), args.systems.split(","))
    print()
    print("(each cell: dynamo_lite / torch.compile)")
    print(render(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
