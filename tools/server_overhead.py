#!/usr/bin/env python3
"""What the HTTP server adds to the engine: the same requests through `llmserve batch` and through
`llmserve serve` + `llmserve bench`, one request at a time (low load), in one run.

  TTFT added      = median server TTFT (client clock: request sent -> first token chunk received)
                    - median batch prefill time (engine clock: first scheduled -> first token)
  per-token added = median server TPOT ((E2E - TTFT) / (tokens - 1), client clock)
                    - median batch decode time / (tokens - 1) (engine clock)

Both runs get the same prompts, `max_tokens`, greedy sampling, `ignore_eos`, and the same engine
flags (`--max-num-seqs 1` so batch also runs one request at a time). The server figures include
everything a client pays: HTTP parsing, validation, tokenization, JSON, SSE framing, the socket and
the hop between the engine thread and the I/O thread. With `--model` a tiny random-weight model
(`llmserve tiny-model`) the engine's own cost is small, so the difference is measured precisely;
with a real model it shows the same overhead against realistic step times.

Prints one JSON object. Example:
  python3 tools/server_overhead.py --llmserve build/release/src/cli/llmserve --model tiny
"""

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

WORDS = ("time year people way day man thing woman life child world school state family student "
         "group country problem hand part place case week company system program question work "
         "government number night point home water room mother area money story fact month lot "
         "right study book eye job word business issue side kind head house service friend father "
         "power hour game line end member law car city community name president team minute idea").split()


def make_prompts(n, words, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n)]


def run_batch(args, prompts, engine_flags, tmp):
    inp = os.path.join(tmp, "in.jsonl")
    out = os.path.join(tmp, "out.jsonl")
    with open(inp, "w") as f:
        for i, p in enumerate(prompts):
            f.write(json.dumps({"id": i, "prompt": p, "max_tokens": args.max_tokens,
                                "temperature": 0, "ignore_eos": True}) + "\n")
    subprocess.run([args.llmserve, "batch", "-m", args.model, "--input", inp, "--output", out,
                    "--no-progress"] + engine_flags, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    ttft, per_token = [], []
    with open(out) as f:
        for line in f:
            r = json.loads(line)
            if r["id"] < args.warmup:
                continue
            m = r["metrics"]
            n = m["generated_tokens"]
            if n != args.max_tokens:
                sys.exit(f"batch request {r['id']} generated {n} tokens, not {args.max_tokens}")
            ttft.append(m["prefill_time"] * 1e3)
            per_token.append(m["decode_time"] / (n - 1) * 1e6)
    return ttft, per_token


def start_server(args, engine_flags):
    proc = subprocess.Popen([args.llmserve, "serve", "-m", args.model, "--port", "0",
                             "--served-model-name", "m"] + engine_flags,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    for line in proc.stderr:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, int(m.group(1))
        if time.time() > deadline:
            break
    proc.kill()
    sys.exit("server did not start")


def run_server(args, prompts, engine_flags, tmp):
    data = os.path.join(tmp, "prompts.jsonl")
    with open(data, "w") as f:
        for p in prompts[args.warmup:]:
            f.write(json.dumps({"prompt": p}) + "\n")
    rec_path = os.path.join(tmp, "bench.json")
    proc, port = start_server(args, engine_flags)
    try:
        subprocess.run([args.llmserve, "bench", "--url", f"http://127.0.0.1:{port}",
                        "--dataset", "jsonl", "--jsonl", data, "--endpoint", "completions",
                        "-n", str(len(prompts) - args.warmup), "-c", "1",
                        "--warmup", str(args.warmup), "--output-len", str(args.max_tokens),
                        "--ignore-eos", "--temperature", "0", "--tokenizer", "words",
                        "--json", rec_path, "-q"], check=True, stdout=subprocess.DEVNULL)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    with open(rec_path) as f:
        report = json.load(f)
    ttft, per_token = [], []
    for r in report["runs"][0]["requests"]:
        if r.get("warmup"):
            continue
        if not r["ok"]:
            sys.exit(f"server request failed: {r['error']}")
        if r["output_tokens"] != args.max_tokens:
            sys.exit(f"server request generated {r['output_tokens']} tokens, not {args.max_tokens}")
        ttft.append(r["ttft_ms"])
        per_token.append(r["tpot_ms"] * 1e3)
    return ttft, per_token


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llmserve", required=True, help="llmserve binary")
    ap.add_argument("--model", required=True,
                    help="GGUF file, registered model name, or 'tiny' (written with tiny-model)")
    ap.add_argument("--requests", type=int, default=60, help="measured requests per side")
    ap.add_argument("--warmup", type=int, default=5, help="requests run first and not counted")
    ap.add_argument("--prompt-words", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.model == "tiny":
            args.model = os.path.join(tmp, "tiny.gguf")
            subprocess.run([args.llmserve, "tiny-model", "--out", args.model, "--type", "q8_0",
                            "--layers", "4", "--embd", "128", "--ff", "256", "--ctx", "1024"],
                           check=True, stderr=subprocess.DEVNULL)
        engine_flags = ["--max-num-seqs", "1", "--kv-cache-memory", "256MiB"]
        prompts = make_prompts(args.requests + args.warmup, args.prompt_words, args.seed)
        b_ttft, b_tok = run_batch(args, prompts, engine_flags, tmp)
        s_ttft, s_tok = run_server(args, prompts, engine_flags, tmp)

    med = statistics.median
    result = {
        "model": os.path.basename(args.model),
        "requests": args.requests,
        "max_tokens": args.max_tokens,
        "batch_prefill_ms_median": round(med(b_ttft), 3),
        "server_ttft_ms_median": round(med(s_ttft), 3),
        "ttft_added_ms": round(med(s_ttft) - med(b_ttft), 3),
        "batch_us_per_token_median": round(med(b_tok), 2),
        "server_us_per_token_median": round(med(s_tok), 2),
        "per_token_added_us": round(med(s_tok) - med(b_tok), 2),
        "limits": {"ttft_added_ms": 2.0, "per_token_added_us": 10.0},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
