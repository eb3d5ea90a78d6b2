#!/usr/bin/env python3
"""Speculative decoding against plain decode (and llama.cpp), rounds alternated, JSON out.

Each round runs every configuration on every workload back to back (the order rotates from
round to round), so a ratio compares runs minutes apart on the same machine, never across days.
Decode speed is what `llmserve run --json` reports: tokens after the first over the time after
it (a draft model's catch-up on the prompt included). Every speculative run's text must equal the
plain run's (greedy): `same_text` says whether it did.

  python3 tools/spec_rounds.py --bin build/release/src/cli/llmserve \\
      --target qwen2.5-coder-1.5b-instruct --draft qwen2.5-coder-0.5b-instruct --rounds 3 \\
      [--llama-spec /path/llama-speculative-simple --llama-plain /path/llama-cli] [--raw out.jsonl]

Workloads: `code` (write new code: the draft model's case) and `edit` (rewrite code given in the
prompt, whose answer repeats it: the prompt-lookup case). Configurations: plain, ngram, draft
(full head), draft-v32k (the draft's head over the first 32,768 token ids) and draft-v32k-tree
(that draft proposing a token tree of up to k nodes, --tree-width branches per level), k = --k.
Prints {"workloads": {name: {config: {"decode_tok_s": median, "ratio_vs_plain": median of the
per-round ratios, "acceptance": ..., "tokens_per_target_pass": ..., "same_text": ...}}}}.

With --batched C1,C2,..., runs `llmserve bench-engine` (random 64-token prompts, 64 generated,
greedy) at those concurrencies instead, each configuration in turn per round, and prints the
generation tok/s and its ratio to plain per concurrency: the load-adaptive check (speculation must
not cost batched throughput); full_batch_ratios compare the part of the phase before the first
request finishes (speculating sequences finish apart, and the whole phase ends with the slowest).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

# Raw completion prompts (no chat template), so llama.cpp's tools get the very same tokens.
CODE_PROMPTS = [
    "# Python 3: the n-th Fibonacci number, iteratively, with a docstring and doctests.\n"
    "def fibonacci(n: int) -> int:\n",
    "/* C: reverse a singly linked list in place, with a small test in main(). */\n"
    "#include <stdio.h>\n#include <stdlib.h>\n\n",
    "# Python 3: a bank account that refuses negative amounts and overdrafts.\n"
    "class BankAccount:\n",
]

EDIT_CODE = '''import json
import os


def process_items(items, limit=10):
    """Return the first `limit` items that are not empty, stripped."""
    result = []
    for item in items:
        if not item:
            continue
        result.append(item.strip())
        if len(result) >= limit:
            break
    return result


def load_items(path):
    """Read one item per line from a file."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\\n") for line in f]


def save_report(items, path):
    """Write the processed items as JSON."""
    data = {"count": len(items), "items": process_items(items)}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)


if __name__ == "__main__":
    items = load_items("items.txt")
    save_report(items, "report.json")
    print(process_items(items, limit=3))
'''

EDIT_PROMPTS = [
    "```python\n" + EDIT_CODE + "```\n\nThe same code with process_items renamed to "
    "clean_items everywhere, unchanged otherwise:\n\n```python\n",
    "```python\n" + EDIT_CODE + "```\n\nThe same code with type hints on every function, "
    "unchanged otherwise:\n\n```python\n",
]


def run_ours(binary, model, prompt, n, extra):
    cmd = [binary, "run", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0",
           "--ignore-eos", "--json"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    stats = json.loads(p.stderr.strip().splitlines()[-1])
    stats["text"] = p.stdout
    return stats


def run_llama(binary, target, draft, prompt, n, k, kind):
    """llama.cpp's own tools on the same files and prompt: llama-completion (plain) or
    llama-speculative-simple (draft-simple with the draft model, or ngram-simple), greedy, 2
    threads. Speed: generation tokens over generation time as each tool reports them."""
    common = ["-m", target, "-p", prompt, "-n", str(n), "-t", "2", "--temp", "0", "--top-k", "1",
              "--seed", "42", "-c", "4096", "--color", "off", "--no-log-timestamps",
              "--no-log-prefix", "--ignore-eos"]
    if kind == "plain":
        cmd = [binary] + common + ["-no-cnv"]
    elif kind == "draft":
        cmd = [binary] + common + ["-md", draft, "-td", "2", "--spec-type", "draft-simple",
                                   "--spec-draft-n-max", str(k), "-lv", "4"]
    else:
        cmd = [binary] + common + ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3",
                                   "--spec-ngram-simple-size-m", str(k), "-lv", "4"]
    p = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    log = p.stderr
    speed = None
    m = re.search(r"decoded\s+(\d+)\s+tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", log)
    if m:
        speed = float(m.group(3))
    m = re.search(r"\n\S*\s*eval time =\s*[\d.]+ ms /\s*\d+ runs.*?([\d.]+) tokens per second", log)
    if speed is None and m:
        speed = float(m.group(1))
    accept = re.search(r"accept\s*=\s*([\d.]+)%", log)
    return {"decode_tokens_per_s": speed, "returncode": p.returncode,
            "acceptance_rate": float(accept.group(1)) / 100 if accept else None}


def batched(args, configs):
    per = {}  # (config, concurrency) -> [tok/s per round]
    ratios = {}
    full_ratios = {}  # the same over the full-batch part of the phase (bench-engine's JSON)
    raw = open(args.raw, "w") if args.raw else None
    names = list(configs)
    for rnd in range(args.rounds):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        got = {}
        for name in order:
            cmd = [args.bin, "bench-engine", "-m", args.target, "--concurrency", args.batched,
                   "--prompt-len", "64", "--gen-len", "64", "--skip-prefix", "--skip-waste",
                   "--max-num-seqs", "64"] + configs[name]
            p = subprocess.run(cmd, capture_output=True, text=True, check=True)
            report = json.loads(p.stdout)
            got[name] = {r["concurrency"]: r for r in report["batched_generation"]}
            if raw:
                raw.write(json.dumps({"round": rnd + 1, "config": name, "report": report}) + "\n")
                raw.flush()
        for name, rows in got.items():
            for c, r in rows.items():
                per.setdefault((name, c), []).append(r["generation_tokens_per_s"])
                if "plain" in got:
                    ratios.setdefault((name, c), []).append(
                        r["generation_tokens_per_s"] / got["plain"][c]["generation_tokens_per_s"])
                    full, base = (r.get("full_batch_tokens_per_s"),
                                  got["plain"][c].get("full_batch_tokens_per_s"))
                    if full and base:
                        full_ratios.setdefault((name, c), []).append(full / base)
        print(f"round {rnd + 1}: " + "; ".join(
            f"{n} " + "/".join(f"{got[n][c]['generation_tokens_per_s']:.1f}" for c in sorted(got[n]))
            for n in order), file=sys.stderr)
    out = {"batched": {}}
    for (name, c), xs in sorted(per.items()):
        out["batched"].setdefault(name, {})[str(c)] = {
            "generation_tok_s": statistics.median(xs),
            "ratio_vs_plain": statistics.median(ratios[(name, c)]) if (name, c) in ratios else None,
            "ratios": [round(x, 3) for x in ratios.get((name, c), [])],
            "full_batch_ratios": [round(x, 3) for x in full_ratios.get((name, c), [])]}
    print(json.dumps(out, indent=2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--target", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--draft", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=256, help="tokens to generate")
    ap.add_argument("--k", type=int, default=4, help="draft length")
    ap.add_argument("--tree-width", type=int, default=2,
                    help="branches per level for the draft-v32k-tree configuration")
    ap.add_argument("--workloads", default="code,edit")
    ap.add_argument("--configs", default="plain,ngram,draft,draft-v32k")
    ap.add_argument("--llama-spec", help="llama-speculative-simple, run on the code workload")
    ap.add_argument("--llama-plain", help="llama.cpp plain generation (llama-completion)")
    ap.add_argument("--target-file", help="the target GGUF path (for llama.cpp)")
    ap.add_argument("--draft-file", help="the draft GGUF path (for llama.cpp)")
    ap.add_argument("--raw", help="also write every run here, one JSON line each")
    ap.add_argument("--batched", help="concurrencies for bench-engine, e.g. 1,4,16,32,64")
    args = ap.parse_args()

    k = str(args.k)
    configs = {
        "plain": [],
        "ngram": ["--speculative-method", "ngram", "--num-speculative-tokens", k],
        "draft": ["--draft-model", args.draft, "--num-speculative-tokens", k],
        "draft-v32k": ["--draft-model", args.draft, "--num-speculative-tokens", k,
                       "--draft-vocab-size", "32768"],
        "draft-v32k-tree": ["--draft-model", args.draft, "--num-speculative-tokens", k,
                            "--draft-vocab-size", "32768",
                            "--draft-tree-width", str(args.tree_width)],
    }
    wanted = args.configs.split(",")
    configs = {name: extra for name, extra in configs.items() if name in wanted}
    if args.batched:
        return batched(args, configs)
    workloads = {"code": CODE_PROMPTS, "edit": EDIT_PROMPTS}
    workloads = {w: workloads[w] for w in args.workloads.split(",")}
    raw = open(args.raw, "w") if args.raw else None
    runs = {}  # (workload, config) -> list of per-prompt-round dicts
    names = list(configs)
    for rnd in range(args.rounds):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        for w, prompts in workloads.items():
            for pi, prompt in enumerate(prompts):
                plain_text = None
                row = {}
                for name in order:
                    r = run_ours(args.bin, args.target, prompt, args.n, configs[name])
                    row[name] = r
                if args.llama_spec and w == "code" and args.target_file and args.draft_file:
                    row["llama.cpp-draft"] = run_llama(args.llama_spec, args.target_file,
                                                       args.draft_file, prompt, args.n, args.k,
                                                       "draft")
                    if args.llama_plain:
                        row["llama.cpp-plain"] = run_llama(args.llama_plain, args.target_file,
                                                           None, prompt, args.n, args.k, "plain")
                if args.llama_spec and w == "edit" and args.target_file:
                    row["llama.cpp-ngram"] = run_llama(args.llama_spec, args.target_file, None,
                                                       prompt, args.n, args.k, "ngram")
                plain_text = row.get("plain", {}).get("text")
                for name, r in row.items():
                    rec = {"round": rnd + 1, "workload": w, "prompt": pi, "config": name,
                           "decode_tokens_per_s": r.get("decode_tokens_per_s"),
                           "acceptance_rate": r.get("acceptance_rate"),
                           "tokens_per_target_pass": r.get("tokens_per_target_pass"),
                           "generated_tokens": r.get("generated_tokens")}
                    if "text" in r and plain_text is not None:
                        rec["same_text"] = r["text"] == plain_text
                    if "plain" in row and rec["decode_tokens_per_s"]:
                        rec["ratio_vs_plain"] = (rec["decode_tokens_per_s"] /
                                                 row["plain"]["decode_tokens_per_s"])
                    runs.setdefault((w, name), []).append(rec)
                    if raw:
                        raw.write(json.dumps(rec) + "\n")
                        raw.flush()
                print(f"round {rnd + 1} {w} prompt {pi}: " + ", ".join(
                    f"{n}={r.get('decode_tokens_per_s') or 0:.1f}" for n, r in row.items()),
                    file=sys.stderr)

    def med(xs):
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None

    out = {"workloads": {}}
    for (w, name), recs in runs.items():
        out["workloads"].setdefault(w, {})[name] = {
            "decode_tok_s": med([r["decode_tokens_per_s"] for r in recs]),
            "ratio_vs_plain": med([r.get("ratio_vs_plain") for r in recs]),
            "ratios": [round(r["ratio_vs_plain"], 3) for r in recs if r.get("ratio_vs_plain")],
            "acceptance": med([r["acceptance_rate"] for r in recs]),
            "tokens_per_target_pass": med([r["tokens_per_target_pass"] for r in recs]),
            # Only llmserve's runs are compared (llama.cpp's text is not captured).
            "same_text": (all(r["same_text"] for r in recs) if all("same_text" in r for r in recs)
                          else None),
            "n_runs": len(recs),
        }
    try:
        out["cpu"] = re.search(r"Model name:\s*(.+)", subprocess.run(
            ["lscpu"], capture_output=True, text=True).stdout).group(1).strip()
    except (AttributeError, OSError):
        pass
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
