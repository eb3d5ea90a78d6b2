#!/usr/bin/env python3
"""Prompt and generation speed on the model shapes and weight types of ../shared/PEERS.md, ours
against llama.cpp on the same files, in one run.

PEERS.md measures llama.cpp on Qwen2-architecture files with random weights (speed does not
depend on weight values): the Qwen2.5-0.5B shape in F16, Q8_0 and Q4_0 and the 1.5B shape in
Q8_0. This script writes those files with `llmserve tiny-model` (same shapes, a 151,936-row tied
embedding; Q4_0 keeps a Q8_0 embedding as llama.cpp's quantizer does, which is why its file is
330 MiB), then runs `llmserve bench-model` and, with --llama-bench, llama.cpp's `llama-bench`
on each file, alternating the two programs round by round so that a change in the machine's
state hits both. Q4_K_M is not a uniform type (the quantizer mixes Q4_K, Q6_K and Q5_0 by
tensor), so use the real Q4_K_M files (`llmserve pull`) for it.

Prints one JSON object: per file, both programs' tok/s (median over rounds), ratios ours/llama.cpp
and ours/PEERS.md (the figure measured on another machine, for reference only).

  python3 tools/peer_shapes.py --llmserve build/release/src/cli/llmserve \\
      --llama-bench /path/to/llama-bench [--rounds 2] [--only q05-q8_0,q15-q8_0]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

SHAPE_05B = ["--arch", "qwen2", "--layers", "24", "--embd", "896", "--ff", "4864", "--heads", "14",
             "--kv-heads", "2", "--vocab", "151936", "--ctx", "4096", "--tie-embeddings"]
SHAPE_15B = ["--arch", "qwen2", "--layers", "28", "--embd", "1536", "--ff", "8960", "--heads", "12",
             "--kv-heads", "2", "--vocab", "151936", "--ctx", "4096", "--tie-embeddings"]

# name -> (tiny-model flags, PEERS.md prompt-512 and generation-128 tok/s)
FILES = {
    "q05-f16": (SHAPE_05B + ["--type", "f16"], 150.0, 14.5),
    "q05-q8_0": (SHAPE_05B + ["--type", "q8_0"], 138.0, 25.2),
    "q05-q4_0": (SHAPE_05B + ["--type", "q4_0", "--embd-type", "q8_0"], 211.0, 32.2),
    "q15-q8_0": (SHAPE_15B + ["--type", "q8_0"], 38.0, 6.3),
}


def ensure_file(args, name):
    path = os.path.join(args.cache, name + ".gguf")
    if not os.path.exists(path):
        os.makedirs(args.cache, exist_ok=True)
        tmp = path + ".part"
        subprocess.run([args.llmserve, "tiny-model", "--out", tmp] + FILES[name][0], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.replace(tmp, path)
    return path


def run_ours(args, path):
    out = subprocess.run([args.llmserve, "bench-model", "-m", path, "--prompt", "512", "--gen",
                          "128", "-r", "1", "--threads", str(args.threads)],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    return d["prompt_tokens_per_s"], d["gen_tokens_per_s"], d.get("gen_fraction_of_bandwidth_floor")


def run_llama(args, path):
    out = subprocess.run([args.llama_bench, "-m", path, "-p", "512", "-n", "128", "-t",
                          str(args.threads), "-r", "1", "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    pp = tg = None
    for row in json.loads(out):
        if row.get("n_prompt") == 512 and row.get("n_gen") == 0:
            pp = row["avg_ts"]
        if row.get("n_gen") == 128 and row.get("n_prompt") == 0:
            tg = row["avg_ts"]
    return pp, tg


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--llmserve", required=True)
    p.add_argument("--llama-bench", help="llama.cpp's llama-bench (optional)")
    p.add_argument("--cache", default=os.path.expanduser("~/.cache/llmserve/peer"))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", help="comma-separated subset of " + ",".join(FILES))
    args = p.parse_args()
    names = args.only.split(",") if args.only else list(FILES)
    for n in names:
        if n not in FILES:
            sys.exit(f"--only: unknown file '{n}' (known: {', '.join(FILES)})")

    result = {"threads": args.threads, "rounds": args.rounds, "files": {}}
    for name in names:
        path = ensure_file(args, name)
        ours, peer = [], []
        for r in range(args.rounds):
            # Alternate which program goes first, so neither always runs on a warmer machine.
            order = ["ours", "peer"] if r % 2 == 0 else ["peer", "ours"]
            for who in order:
                if who == "ours":
                    ours.append(run_ours(args, path))
                elif args.llama_bench:
                    peer.append(run_llama(args, path))
            print(f"{name} round {r + 1}: ours {ours[-1][:2]} llama.cpp "
                  f"{peer[-1] if peer else '-'}", file=sys.stderr)
        _, peers_pp, peers_tg = FILES[name]
        entry = {
            "file_bytes": os.path.getsize(path),
            "ours_prompt_tok_s": statistics.median(o[0] for o in ours),
            "ours_gen_tok_s": statistics.median(o[1] for o in ours),
            "ours_gen_fraction_of_floor": statistics.median(o[2] for o in ours if o[2]),
            "peers_md_prompt_tok_s": peers_pp,
            "peers_md_gen_tok_s": peers_tg,
        }
        entry["ours_over_peers_md_prompt"] = entry["ours_prompt_tok_s"] / peers_pp
        entry["ours_over_peers_md_gen"] = entry["ours_gen_tok_s"] / peers_tg
        if peer:
            entry["llama_cpp_prompt_tok_s"] = statistics.median(x[0] for x in peer)
            entry["llama_cpp_gen_tok_s"] = statistics.median(x[1] for x in peer)
            entry["ours_over_llama_cpp_prompt"] = (entry["ours_prompt_tok_s"] /
                                                   entry["llama_cpp_prompt_tok_s"])
            entry["ours_over_llama_cpp_gen"] = entry["ours_gen_tok_s"] / entry["llama_cpp_gen_tok_s"]
        result["files"][name] = entry
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
