#!/usr/bin/env python3
"""Tiny random-weight Hugging Face models and their golden logits from transformers.

No registered model covers the llama and qwen3 architectures or the RoPE scaling types (linear,
YaRN, Llama 3), so this script makes its own: for each case below it builds a model with
transformers' own classes (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM) from a small
config with a fixed seed, rounds every weight to bfloat16 (so the bf16 safetensors and the f32
GGUF hold exactly the same values), and writes into tests/data/tiny_hf/<case>/:

  - config.json + model.safetensors: the Hugging Face directory (what transformers ran);
  - model.gguf: the same weights as llama.cpp's converter lays them out (tensor names, Q/K
    permutation of llama into adjacent pairs, `<arch>.rope.scaling.*` keys, and for Llama 3
    scaling the `rope_freqs.weight` tensor of per-dimension frequency divisors), which is what
    llmserve's forward pass loads;
  - golden.json: for a few fixed token-id prompts (no tokenizer: ids in, logits out), the
    logits over the whole (tiny) vocabulary at the last few positions of the prompt, and a greedy
    continuation with the margin between the best two logits at each step.

The scaled cases set original_max_position_embeddings to 32 and run prompts of up to 110 tokens,
so scaling changes the result.

Usage: python3 tools/make_tiny_hf_golden.py [--out tests/data/tiny_hf]
Needs: pip install torch transformers safetensors gguf numpy (CPU is enough).
"""
import argparse
import copy
import importlib.metadata
import json
import math
from pathlib import Path

import gguf
import numpy as np
import safetensors
import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

VOCAB = 128
HIDDEN = 64
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 16
FFN = 128
LAYERS = 2
WEIGHT_STD = 0.15   # large enough that logits spread and greedy choices are not ties
N_LAST = 4          # positions whose logits are recorded, counted from the prompt's end
N_GREEDY = 16
PROMPT_LENGTHS = [9, 45, 110]

COMMON = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN,
              num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
              rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
              max_position_embeddings=256, bos_token_id=1, eos_token_id=2)

CASES = {
    "llama": (LlamaConfig, LlamaForCausalLM, {}),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, {"head_dim": HEAD_DIM}),
    "llama-linear": (LlamaConfig, LlamaForCausalLM,
                     {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}),
    "llama-llama3": (LlamaConfig, LlamaForCausalLM,
                     {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 32}}),
    "qwen2-yarn": (Qwen2Config, Qwen2ForCausalLM,
                   {"max_position_embeddings": 128,
                    "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                     "original_max_position_embeddings": 32}}),
    "qwen3-yarn": (Qwen3Config, Qwen3ForCausalLM,
                   {"head_dim": HEAD_DIM,
                    "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "beta_fast": 16.0,
                                     "beta_slow": 2.0, "original_max_position_embeddings": 32}}),
}


def build_model(name, config_cls, model_cls, extra, seed):
    config = config_cls(**{**COMMON, **extra})
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = model_cls(config).to(torch.float32)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                # RMSNorm weights near 1, but not exactly, so a missing norm shows.
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(WEIGHT_STD * torch.randn_like(p))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    model.eval()
    return model


def rope_parameters(config):
    """The scaling dict whichever way this transformers version stores it."""
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return dict(params)


def llama3_freq_divisors(params, base, head_dim):
    """What llama.cpp's converter stores in rope_freqs.weight: theta_i is divided by it."""
    factor = params["factor"]
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    old_ctx = params["original_max_position_embeddings"]
    out = []
    for i in range(0, head_dim, 2):
        freq = 1.0 / (base ** (i / head_dim))
        wavelen = 2 * math.pi / freq
        if wavelen < old_ctx / high:
            out.append(1.0)
        elif wavelen > old_ctx / low:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def permute_for_adjacent_pairs(w, n_head):
    """HF llama rotates halves of each head; llama.cpp's GGUF rotates adjacent pairs."""
    rows = w.shape[0]
    return (w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def write_gguf(path, arch, model, params):
    cfg = model.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(path.parent.name)
    w.add_block_count(LAYERS)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(cfg.rope_theta if hasattr(cfg, "rope_theta") else params["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(params["factor"])
    elif kind == "yarn":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(params["factor"])
        w.add_rope_scaling_orig_ctx_len(params["original_max_position_embeddings"])
        if params.get("beta_fast"):
            w.add_float32(gguf.Keys.Rope.SCALING_YARN_BETA_FAST.format(arch=arch), params["beta_fast"])
        if params.get("beta_slow"):
            w.add_float32(gguf.Keys.Rope.SCALING_YARN_BETA_SLOW.format(arch=arch), params["beta_slow"])
    elif kind == "llama3":
        base = params.get("rope_theta", COMMON["rope_theta"])
        w.add_tensor("rope_freqs.weight", llama3_freq_divisors(params, base, HEAD_DIM))
    elif kind != "default":
        raise SystemExit(f"no GGUF mapping for rope type {kind}")

    permute = arch == "llama"
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(LAYERS):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        q, k = sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"]
        if permute:
            q, k = permute_for_adjacent_pairs(q, HEADS), permute_for_adjacent_pairs(k, KV_HEADS)
        w.add_tensor(b + "attn_norm.weight", sd[p + "input_layernorm.weight"])
        w.add_tensor(b + "attn_q.weight", q)
        w.add_tensor(b + "attn_k.weight", k)
        w.add_tensor(b + "attn_v.weight", sd[p + "self_attn.v_proj.weight"])
        w.add_tensor(b + "attn_output.weight", sd[p + "self_attn.o_proj.weight"])
        for hf, ours in (("q_proj.bias", "attn_q.bias"), ("k_proj.bias", "attn_k.bias"),
                         ("v_proj.bias", "attn_v.bias"), ("q_norm.weight", "attn_q_norm.weight"),
                         ("k_norm.weight", "attn_k_norm.weight")):
            if p + "self_attn." + hf in sd:
                w.add_tensor(b + ours, sd[p + "self_attn." + hf])
        w.add_tensor(b + "ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
        w.add_tensor(b + "ffn_gate.weight", sd[p + "mlp.gate_proj.weight"])
        w.add_tensor(b + "ffn_up.weight", sd[p + "mlp.up_proj.weight"])
        w.add_tensor(b + "ffn_down.weight", sd[p + "mlp.down_proj.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def golden_records(model, seed):
    rng = np.random.default_rng(seed)
    records = []
    for n in PROMPT_LENGTHS:
        ids = [1] + rng.integers(3, VOCAB, size=n - 1).tolist()
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].double().numpy()
            past, inp, greedy, margins = None, torch.tensor([ids]), [], []
            for _ in range(N_GREEDY):
                out = model(inp, past_key_values=past, use_cache=True)
                past = out.past_key_values
                best2 = torch.topk(out.logits[0, -1].double(), 2)
                greedy.append(int(best2.indices[0]))
                margins.append(float(best2.values[0] - best2.values[1]))
                inp = torch.tensor([[greedy[-1]]])
        records.append({
            "prompt_ids": ids,
            "positions": list(range(n - N_LAST, n)),
            "logits": [[round(float(x), 6) for x in logits[p]] for p in range(n - N_LAST, n)],
            "greedy": greedy,
            "greedy_margins": [round(m, 6) for m in margins],
        })
    return records


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "tests/data/tiny_hf"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    for seed, (name, (config_cls, model_cls, extra)) in enumerate(CASES.items(), start=1):
        out = Path(args.out) / name
        out.mkdir(parents=True, exist_ok=True)
        model = build_model(name, config_cls, model_cls, extra, seed)
        # A copy: .to(bfloat16) would also round the rotary inv_freq buffer of the model we run.
        copy.deepcopy(model).to(torch.bfloat16).save_pretrained(str(out), safe_serialization=True)
        for extra_file in ("generation_config.json",):
            (out / extra_file).unlink(missing_ok=True)
        params = rope_parameters(model.config)
        arch = model.config.model_type
        write_gguf(out / "model.gguf", arch, model, params)
        doc = {
            "case": name,
            "architecture": arch,
            "rope_parameters": params,
            "generator": "tools/make_tiny_hf_golden.py",
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "safetensors": safetensors.__version__,
            "gguf": importlib.metadata.version("gguf"),
            "records": golden_records(model, 1000 + seed),
        }
        (out / "golden.json").write_text(json.dumps(doc, indent=None, separators=(",", ":")) + "\n")
        m = min(min(r["greedy_margins"]) for r in doc["records"])
        print(f"{name}: {arch}, rope {params}, smallest greedy margin {m:.4f}")


if __name__ == "__main__":
    main()
