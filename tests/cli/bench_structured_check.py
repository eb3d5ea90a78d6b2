"""`llmserve bench-structured` on a tiny model and tests/data/structured/bench_corpus.jsonl.

Usage: bench_structured_check.py LLMSERVE MODEL CORPUS WORKDIR

The corpus has three schemas of our own: a person object (bounded string and integer, a
pattern, an enum array, no additional properties), a recursive tree through $ref, and an array
with uniqueItems (refused). The report's counts must be exactly these; the hidden dumps for the
peer benchmark must hold the same walks, and each walk's token bytes must spell its text; the
same counts with --whitespace compact.
Timings are printed by the command but never checked.
"""

import json
import subprocess
import sys


def main():
    llmserve, model, corpus, workdir = sys.argv[1:5]
    vocab_path = f"{workdir}/vocab.json"
    walks_path = f"{workdir}/walks.jsonl"
    out = subprocess.run(
        [llmserve, "bench-structured", "-m", model, "--corpus", corpus, "--json",
         "--dump-vocab", vocab_path, "--dump-walks", walks_path],
        check=True, capture_output=True, text=True).stdout
    r = json.loads(out)

    s = r["schemas"]
    assert (s["total"], s["compiled"], s["refused"]) == (3, 2, 1), s
    assert s["refusals_by_keyword"] == {"uniqueItems": 1}, s
    assert s["refused_list"][0]["id"] == "test/unique", s
    assert r["compile_ms"]["n"] == 2, r["compile_ms"]

    assert r["valid"]["total"] == 5 and r["valid"]["accepted"] == 5, r["valid"]
    assert r["valid"]["rejected"] == [], r["valid"]
    assert r["invalid"]["total"] == 7 and r["invalid"]["rejected"] == 7, r["invalid"]
    assert r["invalid"]["accepted_soundness_failures"] == [], r["invalid"]
    assert r["instances_of_refused_schemas"] == 2, r
    checks = r["checks"]
    for key in ("mask_violations", "stop_bit_mismatches", "accept_refused_allowed_token",
                "tokenization_mismatches", "serialization_errors"):
        assert checks[key] == 0, (key, checks)
    assert r["apply"]["disagreements_with_plain_mask"] == 0, r["apply"]

    # One mask before each token of an accepted walk and one after its last; a rejected walk
    # stops at the token it rejects. So masks >= tokens walked + accepted walks.
    assert r["tokens_walked"] > 0, r
    assert r["masks"] == r["mask_us"]["n"] >= r["tokens_walked"] + 5, r
    assert r["mask_us"]["p50"] <= r["mask_us"]["p99"] <= r["mask_us"]["max"], r["mask_us"]
    assert r["threads"] == 1 and r["vocabulary"]["rows"] > 256, r["vocabulary"]

    vocab = json.load(open(vocab_path))
    tokens = [bytes.fromhex(h) for h in vocab["tokens_hex"]]
    assert len(tokens) == vocab["n_rows"] == r["vocabulary"]["rows"], vocab["n_rows"]
    assert sorted(vocab["stop_token_ids"]) == sorted(r["vocabulary"]["stop_token_ids"])
    records = [json.loads(line) for line in open(walks_path)]
    assert [x["id"] for x in records] == ["test/person", "test/tree", "test/unique"], records
    verdicts = []
    for rec in records:
        for w in rec["walks"]:
            assert b"".join(tokens[t] for t in w["tokens"]) == w["text"].encode(), w
            verdicts.append((w["valid"], w["ours_accepted"]))
    # Every compiled schema's walk accepted iff valid; the refused schema's walks not walked.
    assert verdicts[:12] == [(v, v) for v, _ in verdicts[:12]], verdicts
    assert verdicts[12:] == [(True, None), (False, None)], verdicts
    # The person's keys come out in the schema's order whatever order the instance had.
    assert records[0]["walks"][1]["text"] == '{"name":"Bo","age":5,"email":"bo@example.com"}'

    # Grammars without whitespace accept and reject the same compact texts.
    compact = json.loads(subprocess.run(
        [llmserve, "bench-structured", "-m", model, "--corpus", corpus, "--json", "--no-apply",
         "--whitespace", "compact"], check=True, capture_output=True, text=True).stdout)
    assert "compact" in compact["schema_options"], compact["schema_options"]
    assert "apply" not in compact, compact
    for key in ("valid", "invalid", "schemas", "tokens_walked", "masks"):
        assert compact[key] == r[key], (key, compact[key], r[key])
    print("bench-structured json ok")


if __name__ == "__main__":
    main()
