#!/usr/bin/env python3
"""Two or more llmserve binaries (and optionally llama.cpp) on the same GGUF files, alternated
round by round, medians printed as JSON.

This machine's speed moves by tens of per cent between minutes (its read bandwidth measured
25-50 GB/s within an hour), so a before/after figure means something only as the median of
rounds in which every program ran back to back. Each round runs, per file, every binary's
`bench-model -m FILE --prompt P --gen G -r 1` and then `llama-bench -m FILE -p P -n G -t T -r 1`.

  python3 tools/ab_rounds.py --bin old=/tmp/llmserve.old --bin new=build/release/src/cli/llmserve \\
      --llama-bench /path/to/llama-bench --model FILE [--model FILE2] [--rounds 4] \\
      [--prompt 512] [--gen 128] [--raw out.jsonl]

Prints {"files": {file: {name: {"pp": median, "tg": median, "pp_rounds": [...], ...}}}}; with
--raw, also every round as one JSON line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys


def ours(binary, model, prompt, gen):
    out = subprocess.run([binary, "bench-model", "-m", model, "--prompt", str(prompt), "--gen",
                          str(gen), "-r", "1"], check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    return {"pp": d["prompt_tokens_per_s"], "tg": d["gen_tokens_per_s"],
            "floor_fraction": d.get("gen_fraction_of_bandwidth_floor")}


def llama(binary, model, prompt, gen, threads):
    out = subprocess.run([binary, "-m", model, "-p", str(prompt), "-n", str(gen), "-t", str(threads),
                          "-r", "1", "-o", "json"], check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)
    speeds = {("pp" if r["n_prompt"] else "tg"): r["avg_ts"] for r in rows}
    return {"pp": speeds.get("pp"), "tg": speeds.get("tg")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH of an llmserve binary")
    ap.add_argument("--llama-bench", help="llama.cpp's llama-bench, run after ours in each round")
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2, help="llama-bench threads")
    ap.add_argument("--raw", help="also write every round here, one JSON line each")
    args = ap.parse_args()
    bins = [b.split("=", 1) for b in args.bin]
    if any(len(b) != 2 for b in bins):
        sys.exit("--bin takes NAME=PATH")
    raw = open(args.raw, "w") if args.raw else None
    results = {}
    for rnd in range(1, args.rounds + 1):
        for model in args.model:
            runs = [(name, lambda p=path: ours(p, model, args.prompt, args.gen)) for name, path in bins]
            if args.llama_bench:
                runs.append(("llama.cpp",
                             lambda: llama(args.llama_bench, model, args.prompt, args.gen, args.threads)))
            for name, run in runs:
                r = run()
                line = {"round": rnd, "model": os.path.basename(model), "engine": name, **r}
                if raw:
                    raw.write(json.dumps(line) + "\n")
                    raw.flush()
                per = results.setdefault(os.path.basename(model), {}).setdefault(name, {})
                for key, value in r.items():
                    if value is not None:
                        per.setdefault(key + "_rounds", []).append(round(value, 3))
    for per_file in results.values():
        for per in per_file.values():
            for key in [k for k in per if k.endswith("_rounds")]:
                per[key[: -len("_rounds")]] = round(statistics.median(per[key]), 3)
    print(json.dumps({"rounds": args.rounds, "prompt": args.prompt, "gen": args.gen,
                      "files": results}, indent=1))


if __name__ == "__main__":
    main()
