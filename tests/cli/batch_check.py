#!/usr/bin/env python3
"""Drives `llmserve batch` on a tiny model with good and hostile lines and checks its output:
one output line per input line, in input order; every good line's samples (n of them, each with
max_tokens tokens, since EOS is ignored); every bad line refused with a message naming the field,
while the others still run; the same seed gives the same tokens.

Usage: batch_check.py LLMSERVE MODEL WORKDIR (prints "batch ok" when every check holds)."""
import json
import subprocess
import sys

llmserve, model, workdir = sys.argv[1:4]

good = [
    {"id": "text", "prompt": "a short prompt", "max_tokens": 5, "n": 2, "seed": 7,
     "temperature": 0.8, "ignore_eos": True},
    {"id": "ids", "prompt_token_ids": [5, 6, 7], "max_tokens": 3, "ignore_eos": True,
     "logprobs": 2},
    {"id": "chat", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
     "max_completion_tokens": 4, "ignore_eos": True},
    {"id": "same_seed", "prompt": "a short prompt", "max_tokens": 5, "n": 2, "seed": 7,
     "temperature": 0.8, "ignore_eos": True},
]
# (line, the text its error must contain)
bad = [
    ({"id": "huge_n", "prompt": "x", "n": 2000000000}, "n: must be an integer between 1 and 128"),
    ({"id": "float_n", "prompt": "x", "n": 1e20}, "n: must be an integer"),
    ({"id": "vocab", "prompt_token_ids": [1, 99999999]}, "prompt_token_ids: token id 99999999"),
    ({"id": "temp", "prompt": "x", "temperature": 1e40}, "temperature:"),
    ({"id": "list", "prompt": ["a", "b"]}, "prompt: one prompt per line"),
    ({"id": "both", "prompt": "x", "prompt_token_ids": [1]}, "not both"),
    ({"id": "nested", "prompt_token_ids": [[1, 2], [3]]}, "prompt_token_ids: must be a list"),
    ({"id": "none", "max_tokens": 3}, "prompt: is required"),
    ({"id": "stops", "prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, "stop: at most 4"),
    ({"id": "bias", "prompt": "x", "logit_bias": {"1": 500}}, "logit_bias"),
    ([1, 2], "each line must be a JSON object"),
]
lines = [json.dumps(good[0]), json.dumps(bad[0][0]), json.dumps(good[1]), "not json {"]
lines += [json.dumps(b[0]) for b in bad[1:]]
lines += [json.dumps(good[2]), json.dumps(good[3])]
with open(f"{workdir}/in.jsonl", "w") as f:
    f.write("\n".join(lines) + "\n\n")  # a blank last line is skipped
subprocess.run([llmserve, "batch", "-m", model, "--input", f"{workdir}/in.jsonl",
                "--output", f"{workdir}/out.jsonl"], check=True, stderr=subprocess.DEVNULL)
out = [json.loads(l) for l in open(f"{workdir}/out.jsonl")]
assert len(out) == len(lines), (len(out), len(lines))

by_id = {}
for i, (text, result) in enumerate(zip(lines, out)):
    sent = json.loads(text) if text != "not json {" else None
    want_id = sent.get("id") if isinstance(sent, dict) else None
    assert result.get("id") == want_id, (i, result.get("id"), want_id)
    if want_id is not None:
        by_id[want_id] = result

assert "invalid JSON" in out[3]["error"]["message"], out[3]
for line, needle in bad:
    result = by_id[line["id"]] if isinstance(line, dict) else out[lines.index(json.dumps(line))]
    assert "error" in result, (line, result)
    assert needle in result["error"]["message"], (needle, result["error"])
    assert result["error"]["type"] == "invalid_request_error", result

for line in good:
    result = by_id[line["id"]]
    assert "error" not in result, (line["id"], result)
    samples = result["outputs"]
    assert len(samples) == line.get("n", 1), (line["id"], len(samples))
    want = line.get("max_tokens", line.get("max_completion_tokens"))
    for s in samples:
        assert len(s["token_ids"]) == want and s["finish_reason"] == "length", (line["id"], s)
    if "logprobs" in line:
        for s in samples:
            assert len(s["logprobs"]) == want and len(s["logprobs"][0]["top_logprobs"]) == 2, s
assert by_id["ids"]["prompt_tokens"] == 3
assert ([s["token_ids"] for s in by_id["text"]["outputs"]] ==
        [s["token_ids"] for s in by_id["same_seed"]["outputs"]]), "same seed, different tokens"
print("batch ok")
