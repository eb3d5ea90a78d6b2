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
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

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
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([args.llmserve, "batch", "-m", args.model, "--input", inp, "--output", out,
                    "--no-progress"] + engine_flags, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
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
    return ttft, per_token, cpu_s


def process_cpu_s(pid):
    """User + system CPU seconds of a running process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(args, engine_flags):
    proc = subprocess.Popen([args.llmserve, "serve", "-m", args.model, "--port", "0",
                             "--served-model-name", "m"] + engine_flags,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    for line in proc.stderr:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            port = int(m.group(1))
            # The port opens before the model has loaded; /health turns 200 when it is ready.
            while time.time() < deadline and proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                        if r.status == 200:
                            return proc, port
                except OSError:
                    pass
                time.sleep(0.1)
            break
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
    cpu_before = process_cpu_s(proc.pid)
    try:
        subprocess.run([args.llmserve, "bench", "--url", f"http://127.0.0.1:{port}",
                        "--dataset", "jsonl", "--jsonl", data, "--endpoint", "completions",
                        "-n", str(len(prompts) - args.warmup), "-c", "1",
                        "--warmup", str(args.warmup), "--output-len", str(args.max_tokens),
                        "--ignore-eos", "--temperature", "0", "--tokenizer", "words",
                        "--json", rec_path, "-q"], check=True, stdout=subprocess.DEVNULL)
        cpu_s = process_cpu_s(proc.pid) - cpu_before
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
    client_us = report["runs"][0]["summary"]["client"]["cpu_us_per_output_token"]
    return ttft, per_token, cpu_s, client_us


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
    ap.add_argument("--rounds", type=int, default=3, help="batch/server runs, alternated")
    ap.add_argument("--threads", type=int, default=0,
                    help="compute threads for both sides (default: llmserve's, one per core)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.model == "tiny":
            args.model = os.path.join(tmp, "tiny.gguf")
            subprocess.run([args.llmserve, "tiny-model", "--out", args.model, "--type", "q8_0",
                            "--layers", "4", "--embd", "128", "--ff", "256", "--ctx", "1024"],
                           check=True, stderr=subprocess.DEVNULL)
        engine_flags = ["--max-num-seqs", "1", "--kv-cache-memory", "256MiB"]
        if args.threads > 0:
            engine_flags += ["--threads", str(args.threads)]
        prompts = make_prompts(args.requests + args.warmup, args.prompt_words, args.seed)
        # Alternate the two sides so drifts (clock speed, other load) hit both alike.
        b_ttft, b_tok, b_cpu, s_ttft, s_tok, s_cpu, client = [], [], 0.0, [], [], 0.0, []
        for _ in range(args.rounds):
            t, k, c = run_batch(args, prompts, engine_flags, tmp)
            b_ttft += t
            b_tok += k
            b_cpu += c
            t, k, c, u = run_server(args, prompts, engine_flags, tmp)
            s_ttft += t
            s_tok += k
            s_cpu += c
            client.append(u)
    n_tokens = len(prompts) * args.max_tokens * args.rounds
    client_us = statistics.median(client)

    med = statistics.median
    result = {
        "model": os.path.basename(args.model),
        "requests": args.requests,
        "rounds": args.rounds,
        "threads": args.threads or "default",
        "max_tokens": args.max_tokens,
        "batch_prefill_ms_median": round(med(b_ttft), 3),
        "server_ttft_ms_median": round(med(s_ttft), 3),
        "ttft_added_ms": round(med(s_ttft) - med(b_ttft), 3),
        "batch_us_per_token_median": round(med(b_tok), 2),
        "server_us_per_token_median": round(med(s_tok), 2),
        "per_token_added_us": round(med(s_tok) - med(b_tok), 2),
        # CPU seconds of the whole process over all requests (warm-up included on both sides;
        # batch also loads the model), per generated token: what the server spends beyond the
        # engine, independent of how the client's own CPU use competes for the cores.
        "batch_cpu_us_per_token": round(b_cpu * 1e6 / n_tokens, 2),
        "server_cpu_us_per_token": round(s_cpu * 1e6 / n_tokens, 2),
        "server_cpu_added_us_per_token": round((s_cpu - b_cpu) * 1e6 / n_tokens, 2),
        "client_cpu_us_per_token": round(client_us, 2),
        "limits": {"ttft_added_ms": 2.0, "per_token_added_us": 10.0},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
