#!/usr/bin/env python3
"""Structured output side by side: llmserve's grammar engine and llguidance on the same walks.

A measurement tool, never a test. It runs `llmserve bench-structured --json` with its hidden
dumps (the model's vocabulary as raw token bytes, every instance's text and token ids with our
verdict and mask times), builds llguidance's tokenizer from those very bytes, and walks llguidance
over the very same token ids: the same schemas, the same serialization, the same tokens. Then it
prints one JSON object with both sides, the ratios (ours / theirs) and which versions ran.

llguidance is not a dependency of the project: install it in a scratch virtual environment and
run this script with that interpreter, e.g.

    python3 -m venv /work/peers/llg-venv && /work/peers/llg-venv/bin/pip install llguidance
    /work/peers/llg-venv/bin/python tools/structured_peer_bench.py \
        --llmserve build/bench/src/cli/llmserve [-m default] [--corpus FILE] [--limit N] \
        [--whitespace compact] [--rounds N]

How llguidance is driven (one thread; RAYON_NUM_THREADS=1):
  tokenizer  built from our dump of the GGUF vocabulary, n_vocab = our logits rows, EOS = our
             stop tokens, default slices. llguidance encodes the bytes a grammar forces and
             allows only their canonical tokens, so it needs the model's real BPE: for a
             byte-level vocabulary whose pre-tokenizer we know (Qwen2) we rebuild its
             tokenizer.json from the GGUF's tokens and merges (the BPE then runs inside Rust).
             Otherwise LLTokenizer(TokenizerWrapper) over our raw token bytes with a greedy
             Python encoder (approximate; the report says which). Either way every row's bytes
             and special status are checked against ours and differences reported.
  compile    LLMatcher.grammar_from_json_schema(schema text) with llguidance's defaults (flexible
             whitespace unless --whitespace compact, which both sides then follow; no
             coerce_one_of, not lenient) + LLMatcher(tokenizer, grammar), timed
             together (perf_counter_ns); is_error() after that is a refusal, grouped by keyword.
  walk       a deep copy of the compiled matcher per instance; before each token one
             unsafe_compute_mask_ptr into a preallocated bitmask, timed alone (the pyo3 call
             included, about a microsecond; also in thread CPU time, as bench-structured does);
             the token's bit decides; consume_token when set.
             After the last token one more mask: accepted iff every token was allowed and
             is_accepting(), and then an EOS bit must be set.
Ratios are ours / theirs: below 1 means llmserve is faster (or refuses fewer). Mask figures are
given over every walk each side ran and over the schemas both compiled (the fair comparison).
"""

import argparse
import ctypes
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")

import llguidance  # noqa: E402  (after the thread setting)
from llguidance import LLMatcher, LLTokenizer, TokenizerWrapper  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def summarize(values):
    """n, mean, p50, p99 and max; nearest-rank percentiles like bench-structured's."""
    v = sorted(values)
    out = {"n": len(v)}
    if not v:
        return out

    def rank(q):
        r = max(1, -(-len(v) * q // 1))  # ceil(q * n)
        return v[min(len(v), int(r)) - 1]

    out.update(mean=sum(v) / len(v), p50=rank(0.50), p99=rank(0.99), max=v[-1])
    return out


def ratio(a, b):
    return a / b if b else None


def load_1m():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return None


def git_describe(binary):
    """The checkout's commit (with -dirty for uncommitted changes to tracked files) and whether
    the binary is older than any source file, i.e. was not built from what the commit says."""
    def git(*args):
        return subprocess.run(["git", "-C", REPO, *args], capture_output=True,
                              text=True).stdout.strip()

    commit = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    built = os.path.getmtime(binary)
    newer = [f for f in git("ls-files", "src", "CMakeLists.txt", "cmake").split("\n")
             if f and os.path.getmtime(os.path.join(REPO, f)) > built]
    return {"checkout": commit + ("-dirty" if dirty else ""),
            "binary_built": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(built)),
            "sources_newer_than_binary": newer[:20]}


class BytesTokenizer:
    """What TokenizerWrapper needs: token bytes, EOS/BOS, special ids and an encoder."""

    def __init__(self, tokens, special_ids, eos):
        self.tokens = tokens
        self.special_token_ids = sorted(special_ids)
        self.eos_token_id = eos
        self.bos_token_id = None
        self._lookup = {}
        self._longest = 1
        for i, b in enumerate(tokens):
            if i not in special_ids and b and b not in self._lookup:
                self._lookup[b] = i
                self._longest = max(self._longest, len(b))
        self._memo = {}
        self.calls = 0

    def __call__(self, text):
        self.calls += 1
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        hit = self._memo.get(data)
        if hit is not None:
            return list(hit)
        out, i = [], 0
        while i < len(data):
            for n in range(min(self._longest, len(data) - i), 0, -1):
                t = self._lookup.get(data[i:i + n])
                if t is not None:
                    out.append(t)
                    i += n
                    break
            else:
                raise ValueError(f"no token for byte {data[i]:#x}")
        self._memo[data] = tuple(out)
        return out


def refusal_keyword(message):
    m = re.search(r'Unimplemented keys: \[([^\]]*)\]', message)
    if m:
        return "+".join(k.strip().strip('"') for k in m.group(1).split(","))
    if message.startswith("oneOf constraints are not supported"):
        return "oneOf"
    if message.startswith("Unknown format"):
        return "format"
    m = re.search(r"(?:Error|error)[^:]*: (.*)", message)
    head = (m.group(1) if m else message).split("\n")[0]
    return re.sub(r"\d+", "N", head)[:80]


def common_figures(records, per_schema):
    """The schemas both sides compiled: the same walks on both sides."""
    ours_mask, theirs_mask, ours_compile, theirs_compile = [], [], [], []
    disagreements = []
    n_common = 0
    for rec in records:
        theirs_s = per_schema[rec["id"]]
        if not (rec["ours"].get("compile_ms") is not None and theirs_s["compiled"]):
            continue
        n_common += 1
        ours_compile.append(rec["ours"]["compile_ms"])
        theirs_compile.append(theirs_s["compile_ms"])
        theirs_mask.extend(theirs_s["mask_us"])
        for w in rec["walks"]:
            ours_mask.extend(w.get("mask_us", []))
            t = theirs_s["verdicts"].get(w["index"])
            if w["ours_accepted"] != t:
                disagreements.append({"id": rec["id"], "instance": w["index"],
                                      "valid": w["valid"], "ours_accepted": w["ours_accepted"],
                                      "llguidance_accepted": t})
    return {"schemas": n_common, "disagreements": disagreements,
            "cm_o": summarize(ours_mask), "cm_t": summarize(theirs_mask),
            "cc_o": summarize(ours_compile), "cc_t": summarize(theirs_compile)}


def run_ours(args, workdir):
    vocab = os.path.join(workdir, "vocab.json")
    walks = os.path.join(workdir, "walks.jsonl")
    cmd = [args.llmserve, "bench-structured", "-m", args.model, "--json", "--dump-vocab", vocab,
           "--dump-walks", walks]
    if args.corpus:
        cmd += ["--corpus", args.corpus]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    if args.cache_dir:
        cmd += ["--cache-dir", args.cache_dir]
    if args.whitespace != "flexible":
        cmd += ["--whitespace", args.whitespace]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out), vocab, walks


# Pre-tokenizer patterns of the byte-level BPE vocabularies this tool can rebuild exactly (the
# `tokenizer.ggml.pre` name -> the Split regex of the model's tokenizer.json).
PRE_TOKENIZER_REGEX = {
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
             r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}


def tokenizer_json(vocab):
    """A Hugging Face tokenizer.json rebuilt from the GGUF's own vocabulary and merges, so that
    llguidance encodes forced text (it does, to allow only the canonical tokens of bytes the
    grammar forces) with the real BPE inside Rust. None when the vocabulary is not one we know."""
    pattern = PRE_TOKENIZER_REGEX.get(vocab.get("pre"))
    if vocab.get("tokenizer_model") != "gpt2" or pattern is None or not vocab.get("merges"):
        return None
    bpe_vocab, added = {}, []
    for i, (text, kind) in enumerate(zip(vocab["tokens_text"], vocab["token_types"])):
        if kind in (1, 6):  # normal, byte
            bpe_vocab.setdefault(text, i)
        elif kind in (3, 4):  # control, user-defined
            added.append({"id": i, "content": text, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": kind == 3})
        # unused (padding) rows stay out; n_vocab covers them
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": bpe_vocab,
                  "merges": vocab["merges"]},
    })


def build_tokenizer(vocab):
    """llguidance's tokenizer over our rows. Returns (LLTokenizer, how it was built, greedy
    encoder or None, seconds). Every row's bytes and special status are checked against ours."""
    tokens = [bytes.fromhex(h) for h in vocab["tokens_hex"]]
    special = set(vocab["special_ids"])
    stops = vocab["stop_token_ids"]
    t0 = time.perf_counter()
    text = tokenizer_json(vocab)
    wrapped = None
    if text is not None:
        tok = LLTokenizer(text, n_vocab=len(tokens), eos_token=stops)
        how = ("LLTokenizer(tokenizer.json rebuilt from the GGUF's tokens, merges and the "
               f"'{vocab['pre']}' pre-tokenizer; BPE in Rust), n_vocab = our rows")
    else:
        named = list(tokens)
        for i in special:
            if not named[i]:
                named[i] = b"<|llmserve_padding_%d|>" % i
        wrapped = BytesTokenizer(named, special, stops[0])
        tok = LLTokenizer(TokenizerWrapper(wrapped), n_vocab=len(tokens), eos_token=stops)
        how = ("LLTokenizer(TokenizerWrapper) over our raw token bytes; forced text encoded by a "
               "greedy longest match in Python (not the model's BPE: approximate)")
    seconds = time.perf_counter() - t0
    mismatches = []
    for i, b in enumerate(tokens):
        if i in special:
            if not tok.is_special_token(i) and len(mismatches) < 10:
                mismatches.append({"id": i, "problem": "not special for llguidance"})
        elif tok.decode_bytes([i]) != b and len(mismatches) < 10:
            mismatches.append({"id": i, "ours": b.hex(), "llguidance": tok.decode_bytes([i]).hex()})
    return tok, how, wrapped, seconds, mismatches


def run_theirs(tok, walks_path, options):
    n_words = (tok.vocab_size + 31) // 32
    buf = (ctypes.c_uint32 * n_words)()
    addr, nbytes = ctypes.addressof(buf), ctypes.sizeof(buf)
    stops = tok.eos_tokens
    clock = time.perf_counter_ns
    cpu_clock = time.thread_time_ns

    res = {
        "compile_ms": [], "mask_us": [], "mask_cpu_us": [], "refusals": {}, "refused_list": [],
        "valid_total": 0, "valid_accepted": 0, "valid_rejected": [],
        "invalid_total": 0, "invalid_rejected": 0, "invalid_accepted": [],
        "consume_failures": 0, "eos_not_allowed_at_end": 0, "tokens_walked": 0,
        "n_schemas": 0, "compiled": 0,
    }
    per_schema = {}  # id -> {"compiled", "compile_ms", "mask_us": [...], "verdicts": {...}}
    with open(walks_path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    for rec in records:
        sid = rec["id"]
        res["n_schemas"] += 1
        schema_text = json.dumps(rec["schema"])
        t0 = clock()
        error = None
        try:
            grammar = LLMatcher.grammar_from_json_schema(schema_text, defaults=options)
            matcher0 = LLMatcher(tok, grammar, log_level=0)
            if matcher0.is_error():
                error = matcher0.get_error()
        except Exception as e:  # a schema it cannot even read
            error = f"{type(e).__name__}: {e}"
        compile_ms = (clock() - t0) / 1e6
        entry = {"compiled": error is None, "mask_us": [], "verdicts": {}}
        per_schema[sid] = entry
        if error is not None:
            kw = refusal_keyword(error)
            res["refusals"][kw] = res["refusals"].get(kw, 0) + 1
            res["refused_list"].append({"id": sid, "keyword": kw, "message": error[:300]})
            continue
        res["compiled"] += 1
        res["compile_ms"].append(compile_ms)
        entry["compile_ms"] = compile_ms
        for w in rec["walks"]:
            m = matcher0.deep_copy()
            compute = m.unsafe_compute_mask_ptr
            tokens = w["tokens"]
            accepted = False
            rejected_at = None
            times = []
            cpu_times = []
            for i in range(len(tokens) + 1):
                c0 = cpu_clock()
                t0 = clock()
                compute(addr, nbytes)
                t1 = clock()
                c1 = cpu_clock()
                times.append((t1 - t0) / 1e3)
                cpu_times.append((c1 - c0) / 1e3)
                if i == len(tokens):
                    accepted = m.is_accepting()
                    if accepted and not any((buf[s >> 5] >> (s & 31)) & 1 for s in stops):
                        res["eos_not_allowed_at_end"] += 1
                    if not accepted:
                        rejected_at = i
                    break
                t = tokens[i]
                if not (buf[t >> 5] >> (t & 31)) & 1:
                    rejected_at = i
                    break
                if not m.consume_token(t):
                    res["consume_failures"] += 1
                    rejected_at = i
                    break
                res["tokens_walked"] += 1
            res["mask_us"].extend(times)
            res["mask_cpu_us"].extend(cpu_times)
            entry["mask_us"].extend(times)
            entry["verdicts"][w["index"]] = accepted
            if w["valid"]:
                res["valid_total"] += 1
                if accepted:
                    res["valid_accepted"] += 1
                else:
                    res["valid_rejected"].append({
                        "id": sid, "instance": w["index"], "rejected_at_token": rejected_at,
                        "serialization": w["serialization"],
                        "text_prefix": tok.decode_str(tokens[:rejected_at or 0])[-60:],
                        "next": tok.decode_str(tokens[rejected_at:rejected_at + 3])
                        if rejected_at is not None else "",
                        "error": m.get_error()[:200]})
            else:
                res["invalid_total"] += 1
                if accepted:
                    res["invalid_accepted"].append(
                        {"id": sid, "instance": w["index"], "text": w["text"][:300]})
                else:
                    res["invalid_rejected"] += 1
    return res, per_schema, records


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmserve", default=os.path.join(REPO, "build/bench/src/cli/llmserve"))
    ap.add_argument("-m", "--model", default="default")
    ap.add_argument("--corpus", default="", help="default: bench-structured's")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--cache-dir", default="")
    ap.add_argument("--keep", default="", help="directory to keep the dumps in")
    ap.add_argument("--whitespace", choices=("flexible", "compact"), default="flexible",
                    help="JSON whitespace both grammars allow (default flexible: both defaults)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run both sides this many times, alternated (ours, theirs, ours, ...); "
                         "the report is the first round's, with every round's common-schema "
                         "ratios and their medians (a busy host moves either side 20 %% "
                         "between runs)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")

    workdir = args.keep or tempfile.mkdtemp(prefix="structured-peer-")
    os.makedirs(workdir, exist_ok=True)
    load = {"before_ours": load_1m()}
    ours, vocab_path, walks_path = run_ours(args, workdir)
    load["after_ours"] = load_1m()
    with open(vocab_path) as f:
        vocab = json.load(f)
    tok, tok_how, wrapped, tok_s, tok_mismatches = build_tokenizer(vocab)
    llg_options = {"whitespace_flexible": args.whitespace == "flexible"}
    theirs, per_schema, records = run_theirs(tok, walks_path, llg_options)
    load["after_theirs"] = load_1m()
    # Further rounds, alternated: only the common-schema figures are kept from them.
    later_rounds = []
    for _ in range(args.rounds - 1):
        _, _, walks_i = run_ours(args, workdir)
        _, per_schema_i, records_i = run_theirs(tok, walks_i, llg_options)
        later_rounds.append(common_figures(records_i, per_schema_i))
    if not args.keep:
        for p in (vocab_path, walks_path):
            os.remove(p)
        os.rmdir(workdir)

    llg = {
        "schemas": {"total": theirs["n_schemas"], "compiled": theirs["compiled"],
                    "refused": theirs["n_schemas"] - theirs["compiled"],
                    "refusals_by_keyword": dict(sorted(theirs["refusals"].items())),
                    "refused_list": theirs["refused_list"]},
        "compile_ms": summarize(theirs["compile_ms"]),
        "masks": len(theirs["mask_us"]),
        "tokens_walked": theirs["tokens_walked"],
        "mask_us": summarize(theirs["mask_us"]),
        "mask_thread_cpu_us": summarize(theirs["mask_cpu_us"]),
        "valid": {"total": theirs["valid_total"], "accepted": theirs["valid_accepted"],
                  "rejected": theirs["valid_rejected"]},
        "invalid": {"total": theirs["invalid_total"], "rejected": theirs["invalid_rejected"],
                    "accepted_soundness_failures": theirs["invalid_accepted"]},
        "checks": {"consume_refused_allowed_token": theirs["consume_failures"],
                   "eos_not_allowed_at_end": theirs["eos_not_allowed_at_end"],
                   "python_encoder_calls": wrapped.calls if wrapped else 0,
                   "tokenizer_rows_differing_from_ours": tok_mismatches},
        "tokenizer_build_s": tok_s,
    }

    first = common_figures(records, per_schema)
    n_common, disagreements = first["schemas"], first["disagreements"]
    cm_o, cm_t, cc_o, cc_t = first["cm_o"], first["cm_t"], first["cc_o"], first["cc_t"]
    ours_refused = sum(1 for r in records if r["ours"].get("compile_ms") is None)
    theirs_refused = llg["schemas"]["refused"]
    both_refused = sum(1 for r in records
                       if r["ours"].get("compile_ms") is None and not per_schema[r["id"]]["compiled"])

    def ratios(o_mask, t_mask, o_comp, t_comp, o_cpu=None, t_cpu=None):
        out = {"mask_mean": ratio(o_mask.get("mean", 0), t_mask.get("mean", 0)),
               "mask_p99": ratio(o_mask.get("p99", 0), t_mask.get("p99", 0)),
               "compile_p99": ratio(o_comp.get("p99", 0), t_comp.get("p99", 0))}
        if o_cpu and t_cpu:
            out["mask_thread_cpu_mean"] = ratio(o_cpu.get("mean", 0), t_cpu.get("mean", 0))
            out["mask_thread_cpu_p99"] = ratio(o_cpu.get("p99", 0), t_cpu.get("p99", 0))
        return out

    comparison = {
        "note": "ratios are ours / theirs (below 1: llmserve faster or refusing fewer)",
        "all_walks": ratios(ours["mask_us"], llg["mask_us"], ours["compile_ms"], llg["compile_ms"],
                            ours.get("mask_thread_cpu_us"), llg["mask_thread_cpu_us"]),
        "refused": {"ours": ours_refused, "llguidance": theirs_refused, "both": both_refused,
                    "ratio": ratio(ours_refused, theirs_refused)},
        "invalid_accepted": {"ours": len(ours["invalid"]["accepted_soundness_failures"]),
                             "llguidance": len(llg["invalid"]["accepted_soundness_failures"])},
        "valid_rejected": {"ours": len(ours["valid"]["rejected"]),
                           "llguidance": len(llg["valid"]["rejected"])},
        "common_schemas": {
            "schemas": n_common,
            "ours": {"mask_us": cm_o, "compile_ms": cc_o},
            "llguidance": {"mask_us": cm_t, "compile_ms": cc_t},
            "ratios": ratios(cm_o, cm_t, cc_o, cc_t),
            "verdict_disagreements": disagreements,
        },
    }
    if args.rounds > 1:
        per_round = []
        for f in [first] + later_rounds:
            r = ratios(f["cm_o"], f["cm_t"], f["cc_o"], f["cc_t"])
            r["compile_mean"] = ratio(f["cc_o"].get("mean", 0), f["cc_t"].get("mean", 0))
            per_round.append(r)
        comparison["common_schemas"]["rounds"] = per_round
        comparison["common_schemas"]["rounds_median"] = {
            k: statistics.median(r[k] for r in per_round) for k in per_round[0]}
    t_overhead = []
    for _ in range(1000):
        a = time.perf_counter_ns()
        b = time.perf_counter_ns()
        t_overhead.append(b - a)
    report = {
        "tool": "tools/structured_peer_bench.py",
        "versions": {
            "llmserve": git_describe(args.llmserve),
            "llmserve_binary": os.path.abspath(args.llmserve),
            "llguidance": llguidance.__version__,
            "llguidance_build": llguidance.get_version(),
            "python": platform.python_version(),
        },
        "machine": {"cpu": ours.get("cpu"), "load_average_1m": load, "threads": 1,
                    "python_timer_overhead_ns_p50": sorted(t_overhead)[500]},
        "setup": {
            "model": ours.get("model"),
            "vocabulary_rows": vocab["n_rows"],
            "special_rows": len(vocab["special_ids"]),
            "stop_token_ids": vocab["stop_token_ids"],
            "walks": "the token ids bench-structured walked (its serialization: "
                     + ours.get("serialization", "?") + ")",
            "whitespace": args.whitespace,
            "llguidance_json_options": f"defaults={llg_options} (else llguidance's defaults: "
                                       "coerce_one_of off, lenient off)",
            "llguidance_tokenizer": tok_how + "; default slices; EOS = our stop tokens",
        },
        "ours": ours,
        "llguidance": llg,
        "comparison": comparison,
    }
    json.dump(report, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
