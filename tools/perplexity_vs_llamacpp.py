#!/usr/bin/env python3
"""Perplexity of llmserve and llama.cpp's llama-perplexity on the same GGUF, text and window.

Runs `llmserve perplexity --json` and `llama-perplexity` (a peer build, never part of the
product) on each model, alternately, and prints one JSON object: both estimates, their ratio
and both wall times. The default text is the GPL-3 licence that Debian ships in every install
(/usr/share/common-licenses/GPL-3, package base-files).

    python3 tools/perplexity_vs_llamacpp.py --llmserve build/release/src/cli/llmserve \
        --llama-perplexity /path/to/llama-perplexity \
        --model ~/.cache/llmserve/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --ctx 512
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_ours(binary, model, text, ctx, threads):
    t0 = time.time()
    out = subprocess.run([binary, "perplexity", "-m", model, "-f", text, "--ctx", str(ctx),
                          "-t", str(threads), "--json"],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return {"ppl": r["ppl"], "stderr": r["ppl_stderr"], "n_scored": r["n_scored"],
            "windows": r["n_windows"], "wall_s": time.time() - t0}


def run_llamacpp(binary, model, text, ctx, threads):
    t0 = time.time()
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    p = subprocess.run([binary, "-m", model, "-f", text, "-c", str(ctx), "-b", str(ctx),
                        "-t", str(threads)], capture_output=True, text=True, env=env)
    log = p.stdout + p.stderr
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", log)
    if p.returncode != 0 or not m:
        sys.exit("llama-perplexity failed:\n" + log[-2000:])
    chunks = re.search(r"over (\d+) chunks", log)
    return {"ppl": float(m.group(1)), "stderr": float(m.group(2)),
            "windows": int(chunks.group(1)) if chunks else None, "wall_s": time.time() - t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--llmserve", required=True)
    ap.add_argument("--llama-perplexity", required=True)
    ap.add_argument("--model", action="append", required=True, help="GGUF file (repeatable)")
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    report = {"text": a.text, "ctx": a.ctx, "threads": a.threads, "cpu": cpu_name(),
              "load_average_before": os.getloadavg()[0], "models": []}
    for model in a.model:
        ours = run_ours(a.llmserve, model, a.text, a.ctx, a.threads)
        theirs = run_llamacpp(a.llama_perplexity, model, a.text, a.ctx, a.threads)
        report["models"].append({
            "model": os.path.basename(model), "llmserve": ours, "llama.cpp": theirs,
            "ppl_ratio": ours["ppl"] / theirs["ppl"],
            "within_1_percent": abs(ours["ppl"] / theirs["ppl"] - 1.0) <= 0.01,
            "wall_ratio": ours["wall_s"] / theirs["wall_s"]})
    report["load_average_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
