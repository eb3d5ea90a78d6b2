"""Raw-HTTP error cases of `llmserve serve`: every bad request gets OpenAI's error JSON with the
right status and param, slow clients are closed after the deadline, the bounded queue answers 429
with Retry-After, and none of it disturbs a stream already running. Then SIGTERM drains.
No check depends on how fast the machine is: they assert statuses, bodies and what the server
did; socket and join timeouts are generous hang guards only.
Usage: test_errors.py LLMSERVE_BINARY"""

import json
import socket
import sys
import threading

import harness

harness.require_model()

KEY = "s3cret-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def expect_error(srv, path, body, status, param=None, code=None, headers=None, method="POST"):
    hdrs = dict(AUTH)
    hdrs.update(headers or {})
    got, resp_headers, raw = srv.request(method, path, body, hdrs)
    assert got == status, (got, raw[:300], body if not isinstance(body, bytes) else body[:60])
    err = json.loads(raw)["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert err["message"], err
    if status == 400:
        assert err["type"] == "invalid_request_error", err
    if param is not None:
        assert err["param"] == param, (err, param)
    if code is not None:
        assert err["code"] == code, err
    return err, resp_headers


def stream_lines(port, body, headers=None):
    """Opens a streaming request on a raw socket; returns the socket once headers arrived."""
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    data = json.dumps(body).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n")
    for k, v in (headers or {}).items():
        head += f"{k}: {v}\r\n"
    s.sendall(head.encode() + b"\r\n" + data)
    return s


def read_until_closed(s):
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return out
        out += chunk
        if out.endswith(b"0\r\n\r\n"):
            return out


def main(binary):
    results = harness.Results()
    with harness.Server(binary, "--api-key", KEY, "--header-timeout", "1", "--body-timeout", "1",
                        "--max-body-bytes", "64KiB", name="qwen") as srv:
        # A stream runs through the whole barrage and must come out intact.
        background = {}

        def run_stream():
            s = stream_lines(srv.port, {"model": "qwen", "prompt": "def main():", "max_tokens": 24,
                                        "temperature": 0, "stream": True, "ignore_eos": True},
                             AUTH)
            background["raw"] = read_until_closed(s)
            s.close()

        bg = threading.Thread(target=run_stream)
        bg.start()

        def auth():
            status, _, _ = srv.request("GET", "/health")
            assert status == 200
            err, hdrs = expect_error(srv, "/v1/models", None, 401, method="GET",
                                     headers={"Authorization": ""})
            assert err["type"] == "authentication_error" and hdrs.get("WWW-Authenticate")
            expect_error(srv, "/v1/completions", {"model": "qwen", "prompt": "x"}, 401,
                         headers={"Authorization": "Bearer wrong"})
            expect_error(srv, "/v1/completions", {"model": "qwen", "prompt": "x"}, 401,
                         headers={"Authorization": f"Bearer {KEY}x"})
            status, _, body = srv.json("GET", "/v1/models", headers=AUTH)
            assert status == 200 and body["data"][0]["id"] == "qwen"

        def malformed():
            expect_error(srv, "/v1/completions", b'{"model": "qwen", "prompt": ', 400)
            expect_error(srv, "/v1/completions", b'[1, 2]', 400)
            expect_error(srv, "/v1/chat/completions", b'"text"', 400)
            expect_error(srv, "/v1/completions", b'', 400)
            expect_error(srv, "/v1/completions", b'{"prompt": "caf\xff"}', 400)
            deep = b'{"prompt": "x", "a": ' + b"[" * 5000 + b"]" * 5000 + b"}"
            expect_error(srv, "/v1/completions", deep, 400)

        def fields():
            c = {"model": "qwen", "prompt": "hello"}
            cases = [
                ({"prompt": None}, "prompt"), ({"prompt": ""}, "prompt"), ({"prompt": 7}, "prompt"),
                ({"prompt": [5, 10 ** 7]}, "prompt"), ({"prompt": [-3]}, "prompt"),
                ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": -5}, "max_tokens"),
                ({"max_tokens": 10 ** 15}, "max_tokens"), ({"max_tokens": "8"}, "max_tokens"),
                ({"n": 0}, "n"), ({"n": 1000}, "n"), ({"temperature": -1}, "temperature"),
                ({"temperature": 2.5}, "temperature"), ({"top_p": 0}, "top_p"),
                ({"top_p": 1.01}, "top_p"), ({"presence_penalty": 2.1}, "presence_penalty"),
                ({"frequency_penalty": -2.1}, "frequency_penalty"),
                ({"logit_bias": {"999999999": 1}}, "logit_bias"),
                ({"logit_bias": {"5": 101}}, "logit_bias"),
                ({"stop": ["a", "b", "c", "d", "e"]}, "stop"), ({"stop": 3}, "stop"),
                ({"logprobs": 21}, "logprobs"), ({"seed": "x"}, "seed"),
                ({"model": ""}, "model"), ({"stream": "yes"}, "stream"),
            ]
            for extra, param in cases:
                body = dict(c)
                body.update(extra)
                expect_error(srv, "/v1/completions", body, 400, param)
            chat = {"model": "qwen", "messages": [{"role": "user", "content": "hi"}]}
            for extra, param in [({"messages": []}, "messages"), ({"messages": None}, "messages"),
                                 ({"messages": [{"role": "user"}]}, "messages[0].content"),
                                 ({"messages": [{"role": "x", "content": "a"}]},
                                  "messages[0].role"),
                                 ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
                                 ({"temperature": 3}, "temperature")]:
                body = dict(chat)
                body.update(extra)
                expect_error(srv, "/v1/chat/completions", body, 400, param)
            # Unknown fields are ignored.
            status, _, r = srv.json("POST", "/v1/completions",
                                    {"model": "qwen", "prompt": "x", "max_tokens": 1,
                                     "no_such_field": {"a": [1]}}, AUTH)
            assert status == 200 and r["usage"]["completion_tokens"] == 1, r

        def context_length():
            long_prompt = "word " * 1100
            err, _ = expect_error(srv, "/v1/completions", {"model": "qwen", "prompt": long_prompt,
                                                           "max_tokens": 4}, 400, "prompt",
                                  "context_length_exceeded")
            assert "1024" in err["message"], err
            err, _ = expect_error(srv, "/v1/chat/completions",
                                  {"model": "qwen", "max_tokens": 1000,
                                   "messages": [{"role": "user", "content": "word " * 100}]},
                                  400, "messages", "context_length_exceeded")
            assert "1024" in err["message"] and "1000" in err["message"], err

        def model_method_path():
            err, _ = expect_error(srv, "/v1/completions", {"model": "gpt-4", "prompt": "x"}, 404,
                                  "model", "model_not_found")
            assert "gpt-4" in err["message"]
            _, hdrs = expect_error(srv, "/v1/completions", None, 405, method="GET")
            assert hdrs.get("Allow") == "POST", hdrs
            expect_error(srv, "/v1/models", {}, 405, method="POST")
            expect_error(srv, "/v1/nothing", None, 404, method="GET")

        def too_large():
            # Decided from Content-Length, before any body byte is sent: no body byte ever is, so
            # a 413 can only come from the head (the body deadline would close the connection
            # with no answer at all).
            raw = harness.raw_exchange(
                srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000"
                b"\r\n\r\n", timeout=60)
            assert raw.startswith(b"HTTP/1.1 413"), raw[:100]
            err = json.loads(raw.split(b"\r\n\r\n", 1)[1])["error"]
            assert err["type"] == "invalid_request_error"
            assert "larger than the limit of 65536 bytes" in err["message"], err
            # Chunked bodies have no Content-Length: the cap applies while reading.
            big = b"x" * (70 << 10)
            raw = harness.raw_exchange(
                srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked"
                b"\r\n\r\n" + f"{len(big):x}\r\n".encode() + big + b"\r\n0\r\n\r\n", timeout=60)
            assert raw.startswith(b"HTTP/1.1 413"), raw[:100]

        def slow_clients():
            # A head or a body that never completes: the server closes the connection without an
            # answer (its 1 s deadlines). The 60 s socket timeout is only a hang guard: reaching it
            # raises socket.timeout and fails the check.
            for partial in (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n",
                            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100"
                            b"\r\n\r\n{\"model\""):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
                try:
                    s.sendall(partial)
                    data = s.recv(1024)  # b"" once the server closes
                finally:
                    s.close()
                assert data == b"", data

        def after_barrage():
            bg.join(timeout=180)
            raw = background.get("raw", b"")
            assert b"HTTP/1.1 200" in raw, raw[:200]
            events = [line for line in raw.split(b"\n") if line.startswith(b"data: ")]
            assert events[-1] == b"data: [DONE]", events[-3:]
            texts = [json.loads(e[6:])["choices"][0]["text"] for e in events[:-1]]
            assert len(texts) >= 1 and json.loads(events[-2][6:])["choices"][0][
                "finish_reason"] == "length"
            status, _, r = srv.json("POST", "/v1/completions",
                                    {"model": "qwen", "prompt": "x", "max_tokens": 2}, AUTH)
            assert status == 200 and r["usage"]["completion_tokens"] == 2

        for fn in (auth, malformed, fields, context_length, model_method_path, too_large,
                   slow_clients, after_barrage):
            results.run(fn.__name__, fn)
        results.run("sigterm_exit_0", lambda: _eq(srv.stop(), 0))

    # Bounded queue (1 running + 1 waiting), then SIGTERM with a short grace period.
    with harness.Server(binary, "--max-num-seqs", "1", "--max-queue", "1", "--drain-timeout", "1",
                        name="qwen") as srv:
        held = []

        def queue_full():
            # 1,000 tokens (the context holds 1,024): no CPU generates them inside the 1 s grace
            # period, so the drain below always has a running stream to end.
            body = {"model": "qwen", "prompt": "count:", "max_tokens": 1000, "ignore_eos": True,
                    "stream": True}
            for _ in range(2):
                s = stream_lines(srv.port, body)
                assert s.recv(12).startswith(b"HTTP/1.1 200")
                held.append(s)
            err, hdrs = expect_error(srv, "/v1/completions", body, 429)
            assert hdrs.get("Retry-After") == "1" and err["type"] == "rate_limit_error", hdrs

        def drain_ends_streams_with_error():
            srv.proc.send_signal(15)
            raw = read_until_closed(held[0])
            events = [line for line in raw.split(b"\n") if line.startswith(b"data: ")]
            assert events[-1] == b"data: [DONE]", events[-3:]
            assert b'"error"' in events[-2], events[-2]
            assert srv.proc.wait(timeout=60) == 0

        results.run("queue_full_429", queue_full)
        results.run("drain_ends_streams_with_error", drain_ends_streams_with_error)
        for s in held:
            s.close()

    # SIGTERM with a long grace period: the in-flight request completes normally.
    with harness.Server(binary, "--drain-timeout", "60", name="qwen") as srv:
        def drain_lets_requests_finish():
            s = stream_lines(srv.port, {"model": "qwen", "prompt": "x", "max_tokens": 6,
                                        "ignore_eos": True, "stream": True})
            assert s.recv(12).startswith(b"HTTP/1.1 200")
            srv.proc.send_signal(15)
            raw = read_until_closed(s)
            s.close()
            assert b'"finish_reason":"length"' in raw and b"data: [DONE]" in raw, raw[-300:]
            assert b'"error"' not in raw
            assert srv.proc.wait(timeout=60) == 0
            # The listener is closed.
            try:
                socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
                raise AssertionError("still accepting after drain")
            except OSError:
                pass

        results.run("drain_lets_requests_finish", drain_lets_requests_finish)
    results.finish()


def _eq(a, b):
    assert a == b, (a, b)


if __name__ == "__main__":
    main(sys.argv[1])
