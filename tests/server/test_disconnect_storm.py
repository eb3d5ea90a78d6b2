"""Disconnect storm: N streaming requests are opened, then dropped mid-generation. Afterwards
/metrics must show no running or waiting request and every KV block free, and a following request
still succeeds. Usage: test_disconnect_storm.py LLMSERVE_BINARY [N]"""

import json
import socket
import sys
import time

import harness

harness.require_model()


def main(binary, n):
    results = harness.Results()
    with harness.Server(binary, "--max-num-seqs", "32", name="qwen") as srv:
        total_blocks = srv.metric("llmserve:kv_cache_blocks_total")

        def storm():
            socks = []
            for i in range(n):
                body = json.dumps({"model": "qwen", "prompt": f"Story number {i}:",
                                   "max_tokens": 200, "ignore_eos": True, "stream": True,
                                   "temperature": 1.0}).encode()
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=120)
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                socks.append(s)
            for s in socks:
                head = s.recv(12)
                assert head.startswith(b"HTTP/1.1 200"), head
            # Generation is under way: wait for a first event on the first stream.
            buf = b""
            while b"data: " not in buf:
                buf += socks[0].recv(4096)
            # (A first event arrived, so requests are mid-generation when the sockets close.)
            for s in socks:
                s.close()
            deadline = time.time() + 60
            while True:
                m = srv.metrics()
                key = '{model_name="qwen"}'
                state = (m["vllm:num_requests_running" + key], m["vllm:num_requests_waiting" + key],
                         m["llmserve:kv_cache_blocks_free" + key],
                         m["llmserve:requests_admitted" + key])
                if state == (0, 0, total_blocks, 0):
                    break
                assert time.time() < deadline, f"not settled: {state}, {total_blocks} blocks"
                time.sleep(0.1)
            aborted = m["llmserve:requests_aborted_by_client_total" + key]
            assert aborted >= n - 1, (aborted, n)  # none of them can have finished 200 tokens
            gen = m["vllm:generation_tokens_total" + key]
            assert gen < n * 200, gen

        def after():
            status, _, r = srv.json("POST", "/v1/chat/completions",
                                    {"model": "qwen", "max_tokens": 4, "temperature": 0,
                                     "messages": [{"role": "user", "content": "hi"}]})
            assert status == 200 and r["usage"]["completion_tokens"] == 4, r
            # The request's own connection closes asynchronously on the server; every storm
            # connection must be gone too. Only the /metrics connection itself may remain. (60 s
            # is a hang guard; the loop ends as soon as they are gone.)
            deadline = time.time() + 60
            while (open_now := srv.metric("llmserve:open_connections")) > 1:
                assert time.time() < deadline, f"{open_now} connections still open"
                time.sleep(0.05)

        results.run(f"storm_{n}_streams", storm)
        results.run("request_after_storm", after)
        results.run("sigterm_exit_0", lambda: _eq(srv.stop(), 0))
    results.finish()


def _eq(a, b):
    assert a == b, (a, b)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200)
