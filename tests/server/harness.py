"""Test harness for the `server` ctest label: starts `llmserve serve` on a free loopback port with
the small model, waits for /health 200, and gives raw-HTTP helpers. Exit code 77 (ctest skip) when
the model file is missing or the `openai` package is not installed where needed."""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time


def cache_root():
    """The cache root exactly as `llmserve` resolves it without --cache-dir (cache_root() in
    src/cli/model_registry.cpp): $LLMSERVE_CACHE when set and non-empty, taken as written (no `~`
    expansion), else $HOME/.cache/llmserve, with /tmp standing in for an unset HOME."""
    env = os.environ.get("LLMSERVE_CACHE")
    if env:
        return env
    home = os.environ.get("HOME")
    return os.path.join("/tmp" if home is None else home, ".cache", "llmserve")


# The small model: $LLMS_TEST_MODEL if set, else the registered default in the cache root.
MODEL = (os.path.expanduser(os.environ["LLMS_TEST_MODEL"]) if os.environ.get("LLMS_TEST_MODEL")
         else os.path.join(cache_root(), "models", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))
SKIP = 77


def require_model():
    if not os.path.isfile(MODEL):
        print(f"SKIP: model file {MODEL} not found")
        sys.exit(SKIP)


class Server:
    """One `llmserve serve` process. Use as a context manager; stop() sends SIGTERM and returns the
    exit status."""

    def __init__(self, binary, *extra, name="qwen", env=None, model=None):
        self.name = name
        args = [binary, "serve", "-m", model or MODEL, "--port", "0", "--served-model-name", name,
                "--max-model-len", "1024", "--kv-cache-memory", "256MiB"] + list(extra)
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     text=True, env=env)
        self.log = []
        self.port = None
        deadline = time.time() + 60
        while self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("server exited before listening:\n" + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if time.time() > deadline:
                raise RuntimeError("server did not print its port")
        threading.Thread(target=self._drain_log, daemon=True).start()
        self.health_codes = []
        while True:
            try:
                status, _, _ = self.request("GET", "/health")
                self.health_codes.append(status)
                if status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("server never became healthy:\n" + "".join(self.log))
            time.sleep(0.05)

    def _drain_log(self):
        for line in self.proc.stderr:
            self.log.append(line)

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}/v1"

    def request(self, method, path, body=None, headers=None, timeout=120):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = body
            hdrs = dict(headers or {})
            if isinstance(body, (dict, list)):
                data = json.dumps(body)
                hdrs.setdefault("Content-Type", "application/json")
            if isinstance(data, str):
                data = data.encode()
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
            return resp.status, dict(resp.getheaders()), raw
        finally:
            conn.close()

    def json(self, method, path, body=None, headers=None):
        status, hdrs, raw = self.request(method, path, body, headers)
        return status, hdrs, json.loads(raw) if raw else None

    def metrics(self):
        status, _, raw = self.request("GET", "/metrics")
        assert status == 200, status
        out = {}
        for line in raw.decode().splitlines():
            if line.startswith("#") or not line:
                continue
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
        return out

    def metric(self, name, labels=None):
        key = f'{name}{{model_name="{self.name}"{"," + labels if labels else ""}}}'
        return self.metrics()[key]

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("server did not exit after SIGTERM")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def raw_exchange(port, data, timeout=10, read_all=True):
    """Sends raw bytes and returns everything the server answers until it closes (or timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            out += chunk
            if not read_all and b"\r\n\r\n" in out:
                break
        return out
    finally:
        s.close()


class Results:
    """Counts checks; prints a closing 'N passed, N failed' line."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def run(self, name, fn, *args):
        t0 = time.time()
        try:
            fn(*args)
            self.passed += 1
            print(f"PASS {name} ({time.time() - t0:.2f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 - report every failure and go on
            self.failed += 1
            import traceback
            traceback.print_exc()
            print(f"FAIL {name}: {e!r}", flush=True)

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        sys.exit(1 if self.failed else 0)
