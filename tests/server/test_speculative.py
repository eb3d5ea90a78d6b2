"""Speculative decoding and fault isolation through `llmserve serve` (label `server`).

- Greedy completions are the same text with prompt-lookup speculation (a fixed draft length) as
  without it, and the server counts drafts under vLLM's metric names; a request's num_speculative_tokens turns
  drafting off (0) or caps it, and out of range is a 400 naming it.
- A fault inside an engine step (injected with the hidden --debug-fault-token-id: a step holding
  that token id fails inside the model run, as a failing kernel would) ends only the request
  that holds it: a non-streamed one gets a 500 with OpenAI's error JSON, a streamed one an error
  event before [DONE]; a stream running beside it finishes untouched, and the next request
  succeeds. llmserve:requests_failed_total counts the failures.
Usage: test_speculative.py LLMSERVE_BINARY"""

import json
import socket
import sys
import threading
import time

import harness

harness.require_model()

POISON = 12345  # a token id no test prompt below holds, unless it is put there
PROMPTS = [
    "def add(a, b):\n    return a + b\n\ndef add_three(a, b, c):\n",
    "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox",
    "for i in range(10):\n    print(i)\nfor j in range(10):\n",
]


def complete(srv, prompt, max_tokens=48, **extra):
    body = {"model": srv.name, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    body.update(extra)
    return srv.request("POST", "/v1/completions", body)


def texts(srv):
    out = []
    for p in PROMPTS:
        status, _, raw = complete(srv, p)
        assert status == 200, (status, raw[:300])
        out.append(json.loads(raw)["choices"][0]["text"])
    return out


def stream_body(srv, prompt, max_tokens):
    """A streamed completion read to its end on a raw socket; returns the SSE data lines."""
    body = json.dumps({"model": srv.name, "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "stream": True, "ignore_eos": True}).encode()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=120)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" +
              body)
    raw = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        raw += chunk
    s.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    return [line[6:] for line in rest.decode(errors="replace").split("\n")
            if line.startswith("data: ")]


def settled_metric(srv, name, quiet_s=0.5, limit_s=30):
    """The metric once it has not moved for quiet_s (the server is idle between requests)."""
    value = srv.metric(name)
    deadline = time.time() + limit_s
    while time.time() < deadline:
        time.sleep(quiet_s)
        again = srv.metric(name)
        if again == value:
            return value
        value = again
    return value


def main():
    binary = sys.argv[1]
    with harness.Server(binary) as plain:
        expected = texts(plain)
        assert plain.stop() == 0

    # A fixed draft length: the load-adaptive policy decides from measured step times whether
    # drafting pays (under a sanitizer or a loaded machine it may not), and the counters below
    # need drafts.
    with harness.Server(binary, "--speculative-method", "ngram", "--num-speculative-tokens", "4",
                        "--speculative-config", '{"fixed_length": true}',
                        "--debug-fault-token-id", str(POISON)) as srv:
        got = texts(srv)
        assert got == expected, (got, expected)
        assert srv.metric("vllm:spec_decode_num_drafts_total") > 0
        drafted = srv.metric("vllm:spec_decode_num_draft_tokens_total")
        accepted = srv.metric("vllm:spec_decode_num_accepted_tokens_total")
        assert 0 < accepted <= drafted, (accepted, drafted)
        assert srv.metric("vllm:spec_decode_num_accepted_tokens_per_pos_total",
                          'position="0"') > 0

        # Per request: num_speculative_tokens 0 turns drafting off (the same text, no new
        # drafts); out of range is a 400 naming the field.
        # The counters are published after the step that ends a request, so a client can read
        # them before its last step's drafts are counted: read them once they are settled.
        before = settled_metric(srv, "vllm:spec_decode_num_drafts_total")
        status, _, raw = complete(srv, PROMPTS[1], num_speculative_tokens=0)
        assert status == 200, (status, raw[:300])
        assert json.loads(raw)["choices"][0]["text"] == expected[1]
        assert settled_metric(srv, "vllm:spec_decode_num_drafts_total") == before
        for bad in (17, -1, "4"):
            status, _, raw = complete(srv, PROMPTS[1], num_speculative_tokens=bad)
            assert status == 400, (bad, status, raw[:300])
            assert json.loads(raw)["error"]["param"] == "num_speculative_tokens", raw[:300]

        # A long stream runs while faulty requests come and go.
        stream_out = {}
        t = threading.Thread(target=lambda: stream_out.update(
            lines=stream_body(srv, PROMPTS[1], 200)))
        t.start()
        poisoned = [9707, 11, 1879, POISON, 13]
        status, _, raw = complete(srv, poisoned, max_tokens=8)
        assert status == 500, (status, raw[:300])
        err = json.loads(raw)["error"]
        assert set(err) == {"message", "type", "param", "code"}, err
        assert err["type"] == "server_error", err
        assert "injected fault" in err["message"], err

        lines = stream_body(srv, poisoned, 8)
        assert lines[-1] == "[DONE]", lines[-3:]
        assert "injected fault" in json.loads(lines[-2])["error"]["message"], lines[-2]

        t.join(timeout=300)
        assert not t.is_alive(), "the stream beside the faults never finished"
        events = [json.loads(x) for x in stream_out["lines"][:-1]]
        assert stream_out["lines"][-1] == "[DONE]"
        assert not any("error" in e for e in events), events[-2:]
        assert events[-1]["choices"][0]["finish_reason"] == "length", events[-1]

        # And the next request is served as before.
        status, _, raw = complete(srv, PROMPTS[0])
        assert status == 200, (status, raw[:300])
        assert json.loads(raw)["choices"][0]["text"] == expected[0]
        assert srv.metric("llmserve:requests_failed_total") == 2
        assert srv.stop() == 0
    print("speculative ok")


if __name__ == "__main__":
    main()
