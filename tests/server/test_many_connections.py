"""1,000 concurrent streaming connections on an event loop: N streaming requests are all open at
once (every one has its 200 head and sits in the engine, running or waiting), every one finishes
with the tokens it asked for, and the server's thread count never grows with the connections.
Uses a tiny random-weight model written by `llmserve tiny-model`, so no download is needed and
the engine's own time is small. Usage: test_many_connections.py LLMSERVE_BINARY [N]"""

import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time

import harness

MAX_TOKENS = 48


def thread_count(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise RuntimeError("no Threads line")


async def one_stream(port, i, connected, opened, release):
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    connected.append(i)
    body = json.dumps({"model": "tiny", "prompt": f"Stream {i}:", "max_tokens": MAX_TOKENS,
                       "ignore_eos": True, "stream": True, "temperature": 0.8, "seed": i,
                       "stream_options": {"include_usage": True}}).encode()
    await release.wait()  # connect everything first, then send every request at once
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await writer.drain()
    status = await reader.readline()
    assert status.startswith(b"HTTP/1.1 200"), status
    opened.append(i)
    data = b""
    while b"data: [DONE]" not in data:
        chunk = await reader.read(65536)
        assert chunk, f"stream {i} closed before [DONE]"
        data += chunk
    writer.close()
    usage = None
    for line in data.split(b"\n"):
        if line.startswith(b"data: {"):
            event = json.loads(line[6:])
            if event.get("usage"):
                usage = event["usage"]
    assert usage is not None, f"stream {i}: no usage chunk"
    return usage["completion_tokens"]


async def storm(port, n, sample):
    connected, opened = [], []
    release = asyncio.Event()
    tasks = [asyncio.create_task(one_stream(port, i, connected, opened, release))
             for i in range(n)]
    deadline = time.time() + 60
    while len(connected) < n:
        assert time.time() < deadline, f"only {len(connected)} of {n} connections accepted"
        await asyncio.sleep(0.01)
    release.set()
    stop = asyncio.Event()

    async def sampler():
        while not stop.is_set():
            await asyncio.to_thread(sample)
            await asyncio.sleep(0.05)

    sampling = asyncio.create_task(sampler())
    tokens = await asyncio.gather(*tasks)
    stop.set()
    await sampling
    assert len(opened) == n
    return tokens


def main(binary, n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * n + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))
    results = harness.Results()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny.gguf")
        subprocess.run([binary, "tiny-model", "--out", model, "--type", "q8_0", "--layers", "2",
                        "--embd", "64", "--ff", "128", "--ctx", "2048"], check=True,
                       stderr=subprocess.DEVNULL)
        with harness.Server(binary, "--max-num-seqs", "64", "--max-queue", str(2 * n),
                            name="tiny", model=model) as srv:
            idle_threads = thread_count(srv.proc.pid)
            peak = {"threads": idle_threads, "in_engine": 0}
            key = '{model_name="tiny"}'

            def sample():
                peak["threads"] = max(peak["threads"], thread_count(srv.proc.pid))
                m = srv.metrics()
                in_engine = m["vllm:num_requests_running" + key] + m[
                    "vllm:num_requests_waiting" + key]
                peak["in_engine"] = max(peak["in_engine"], in_engine)

            def many_streams():
                t0 = time.time()
                tokens = asyncio.run(storm(srv.port, n, sample))
                print(f"{n} streams in {time.time() - t0:.1f} s; server threads idle "
                      f"{idle_threads}, peak {peak['threads']}; peak requests in the engine "
                      f"{peak['in_engine']:.0f}", flush=True)
                assert tokens == [MAX_TOKENS] * n, sorted(set(tokens))
                # No thread per connection: the count is the same as when idle.
                assert peak["threads"] == idle_threads, peak
                # The streams really overlapped: most of them were in the engine together.
                assert peak["in_engine"] >= 0.8 * n, peak

            def settled():
                m = srv.metrics()
                assert m["vllm:num_requests_running" + key] == 0, m
                assert m["vllm:num_requests_waiting" + key] == 0, m
                assert m["llmserve:kv_cache_blocks_free" + key] == m[
                    "llmserve:kv_cache_blocks_total" + key], m

            results.run("many_streams", many_streams)
            results.run("settled", settled)
            assert srv.stop() == 0
    results.finish()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
