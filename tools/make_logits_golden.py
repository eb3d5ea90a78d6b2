#!/usr/bin/env python3
"""Golden logits and greedy continuations from Hugging Face transformers for the registered models.

transformers loads the same GGUF file llmserve loads (it dequantizes every tensor to float32 and
runs its own PyTorch implementation of the architecture), so the golden data test our weight
handling, kernels and forward pass against code we did not write. For each model and prompt the
script records the prompt's token ids (from HF's own GGUF tokenizer), the last position's logits
at the 64 highest ids plus a fixed sample of 2,048 other ids (enough to estimate the relative L2
error without committing whole 150k-wide rows), and a 32-token greedy continuation with the
margin between the best and second-best logit at each step (so a test can tell a near-tie from a
real divergence).

Usage: python3 tools/make_logits_golden.py [--models-dir DIR] [--out tests/data/logits]
Needs: pip install torch transformers gguf numpy (CPU is enough).
"""
import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

MODELS = {
    "qwen2.5-coder-0.5b-instruct": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen2.5-coder-1.5b-instruct": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    "gemma-3-270m": "gemma-3-270m-q4_k_m.gguf",
}
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, in a small village by the sea, there lived",
    "1, 2, 3, 4, 5,",
]
N_TOP = 64
N_SAMPLE = 2048
N_GREEDY = 32


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default=os.path.expanduser(
        os.environ.get("LLMS_MODEL_DIR", "~/.cache/llmserve/models")))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "tests/data/logits"))
    ap.add_argument("--only", help="one model name")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    for name, file in MODELS.items():
        if args.only and name != args.only:
            continue
        path = Path(args.models_dir) / file
        if not path.exists():
            print(f"skip {name}: {path} missing", file=sys.stderr)
            continue
        print(f"{name}: loading {path}", file=sys.stderr)
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                     torch_dtype=torch.float32)
        model.eval()
        records = []
        for prompt in PROMPTS:
            ids = tok(prompt, add_special_tokens=True)["input_ids"]
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0, -1].double().numpy()
            n_vocab = logits.shape[0]
            top = np.argsort(-logits, kind="stable")[:N_TOP]
            rng = np.random.default_rng(12345)
            sample = rng.choice(n_vocab, size=N_SAMPLE, replace=False)
            chosen = sorted(set(top.tolist()) | set(sample.tolist()))
            greedy, margins = [], []
            seq = list(ids)
            with torch.no_grad():
                past = None
                inp = torch.tensor([seq])
                for _ in range(N_GREEDY):
                    outp = model(inp, past_key_values=past, use_cache=True)
                    past = outp.past_key_values
                    row = outp.logits[0, -1].double()
                    best2 = torch.topk(row, 2)
                    nxt = int(best2.indices[0])
                    greedy.append(nxt)
                    margins.append(float(best2.values[0] - best2.values[1]))
                    inp = torch.tensor([[nxt]])
            records.append({
                "prompt": prompt,
                "prompt_ids": ids,
                "n_vocab": int(n_vocab),
                "logit_ids": chosen,
                "logits": [round(float(logits[i]), 5) for i in chosen],
                "full_l2_norm": float(np.linalg.norm(logits)),
                "greedy": greedy,
                "greedy_margins": [round(m, 5) for m in margins],
            })
            print(f"  {prompt[:30]!r}: {len(ids)} ids, greedy {tok.decode(greedy)[:60]!r}", file=sys.stderr)
        doc = {
            "model": name,
            "file": file,
            "generator": "tools/make_logits_golden.py",
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "records": records,
        }
        (out / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
        del model


if __name__ == "__main__":
    main()
