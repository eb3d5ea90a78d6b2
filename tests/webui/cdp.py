"""Minimal Chrome DevTools Protocol (CDP) driver for headless Chromium.

Why this exists: the web UI tests need a real browser -- trusted input
events, CSP enforcement, console errors, layout at phone widths -- but CI
must not depend on pip packages, selenium/webdriver or a websocket library.
Chromium's ``--remote-debugging-pipe`` mode speaks CDP over two inherited
file descriptors (it reads commands from its fd 3 and writes responses and
events to its fd 4, each message one JSON text terminated by a NUL byte),
which needs nothing beyond the Python standard library.

    from cdp import Browser, find_chromium
    with Browser(find_chromium()) as b:
        page = b.new_page()
        page.goto("http://127.0.0.1:8000/")
        page.type_text("#prompt", "hello")
        page.click("#send")
        page.wait_for("document.body.dataset.state === 'idle'")
        assert not page.console_errors, page.console_errors

Every wait has a timeout (default 30 s), so a broken page or a dead browser
fails a test instead of hanging it; if Chromium exits, pending calls raise
BrowserError carrying the tail of Chromium's stderr log.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref

DEFAULT_TIMEOUT = 30.0


class BrowserError(RuntimeError):
    """A CDP error response, a JavaScript exception, or Chromium dying."""


def find_chromium():
    """$LLMS_CHROMIUM if set (even if broken, so a misconfiguration fails
    loudly), else the system's chromium; None when there is none."""
    if os.environ.get("LLMS_CHROMIUM"):
        return os.environ["LLMS_CHROMIUM"]
    for cand in ("/usr/bin/chromium", shutil.which("chromium")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def _log_tail(path, limit=3000):
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
            data = f.read().decode(errors="replace").strip()
    except OSError:
        return ""
    return f"\n--- chromium log tail ---\n{data}" if data else ""


class _Connection:
    """The CDP pipe. call() may be used from any thread; a reader thread routes
    responses by id and events to handlers[sessionId] (None = browser)."""

    def __init__(self, rfd, wfd, describe_death):
        self._rfd, self._wfd = rfd, wfd
        self._describe_death = describe_death   # () -> str, appended to errors
        self._lock = threading.Lock()           # ids, pending, dead
        self._write_lock = threading.Lock()     # the write end
        self._next_id = 0
        self._pending = {}                      # id -> [threading.Event, response]
        self.handlers = {}                      # sessionId -> WeakMethod(fn(method, params))
        self.dead = None                        # why the pipe is gone, once it is
        threading.Thread(target=self._read_loop, name="cdp-reader", daemon=True).start()

    def call(self, method, params=None, session_id=None, timeout=DEFAULT_TIMEOUT):
        msg = {"method": method, "params": params or {}}
        if session_id:
            msg["sessionId"] = session_id
        slot = [threading.Event(), None]
        with self._lock:
            if self.dead:
                raise BrowserError(f"{method}: {self.dead}")
            self._next_id += 1
            msg["id"] = mid = self._next_id
            self._pending[mid] = slot
        data = json.dumps(msg).encode() + b"\0"
        try:
            with self._write_lock:
                if self._wfd < 0:
                    raise OSError("connection closed")
                while data:
                    data = data[os.write(self._wfd, data):]
        except OSError as e:
            with self._lock:
                self._pending.pop(mid, None)
            raise BrowserError(f"{method}: cannot write to Chromium ({e})"
                               f"{self.dead or self._describe_death()}") from None
        if not slot[0].wait(timeout):
            with self._lock:
                self._pending.pop(mid, None)
            raise TimeoutError(f"CDP {method} got no answer within {timeout:g}s")
        resp = slot[1]
        if resp is None:
            raise BrowserError(f"{method}: {self.dead}")
        if "error" in resp:
            err = resp["error"]
            raise BrowserError(f"{method}: {err.get('message')} {err.get('data', '')}".rstrip())
        return resp.get("result", {})

    def close(self):
        """Close our write end (Chromium sees EOF). The read end is closed by
        the reader thread itself when Chromium's side goes away."""
        with self._write_lock:
            if self._wfd >= 0:
                os.close(self._wfd)
                self._wfd = -1

    def _read_loop(self):
        parts, reason = [], "Chromium closed the DevTools pipe"
        try:
            while True:
                chunk = os.read(self._rfd, 1 << 16)
                if not chunk:
                    break
                while (i := chunk.find(b"\0")) >= 0:   # messages end with NUL
                    parts.append(chunk[:i])
                    self._dispatch(json.loads(b"".join(parts)))
                    parts, chunk = [], chunk[i + 1:]
                parts.append(chunk)
        except Exception as e:  # a malformed message: give up on the connection
            reason = f"DevTools pipe reader failed: {e!r}"
        os.close(self._rfd)
        reason += self._describe_death()
        with self._lock:
            self.dead = reason
            pending, self._pending = self._pending, {}
        for slot in pending.values():   # wake every waiter; slot[1] stays None
            slot[0].set()
        for sid in list(self.handlers):
            self._event(sid, "cdp.disconnected", {})

    def _dispatch(self, msg):
        if "id" in msg:
            with self._lock:
                slot = self._pending.pop(msg["id"], None)
            if slot:
                slot[1] = msg
                slot[0].set()
        else:
            self._event(msg.get("sessionId"), msg.get("method"), msg.get("params", {}))

    def _event(self, sid, method, params):
        ref = self.handlers.get(sid)
        fn = ref() if ref else None
        if fn is None:
            self.handlers.pop(sid, None)
            return
        try:
            fn(method, params)
        except Exception as e:  # a handler bug must not kill the reader
            print(f"cdp: handler for {method} failed: {e!r}", file=sys.stderr)


def _shutdown(conn, proc, workdir):
    """Close Chromium politely, then by force; remove its profile. Runs once,
    from Browser.close(), garbage collection or interpreter exit."""
    if proc.poll() is None:
        try:
            conn.call("Browser.close", timeout=2)
        except Exception:
            pass            # it may exit before answering
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    try:    # Chromium runs in its own process group: take leftover helpers too
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    conn.close()
    shutil.rmtree(workdir, ignore_errors=True)


class Browser:
    """A headless Chromium with a throwaway profile. Use as a context manager."""

    def __init__(self, path=None, width=1280, height=900, timeout=DEFAULT_TIMEOUT,
                 extra_args=()):
        path = path or find_chromium()
        if not path or not os.access(path, os.X_OK):
            raise BrowserError(f"no Chromium executable at {path!r}")
        self.width, self.height, self.timeout = width, height, timeout
        self.workdir = tempfile.mkdtemp(prefix="llms-chromium-")
        self.log_path = os.path.join(self.workdir, "chromium.log")
        args = [path, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking",
                "--disable-sync", "--disable-component-update",
                "--remote-debugging-pipe", f"--user-data-dir={self.workdir}/profile",
                f"--window-size={width},{height}", *extra_args, "about:blank"]
        # Keep Chromium's config/cache writes inside the throwaway directory.
        env = dict(os.environ, XDG_CONFIG_HOME=f"{self.workdir}/config",
                   XDG_CACHE_HOME=f"{self.workdir}/cache")
        cmd_r, cmd_w = os.pipe()   # we write commands -> Chromium's fd 3
        ev_r, ev_w = os.pipe()     # Chromium's fd 4 -> we read

        def child_fds():
            # Runs in the child before exec. The pipe ends might themselves be
            # fds 3/4, so first copy them out of the way (close-on-exec copies),
            # then dup2 onto 3 and 4; dup2 makes the targets inheritable.
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD_CLOEXEC, 10)
            b = fcntl.fcntl(ev_w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        try:
            with open(self.log_path, "wb") as log:
                # close_fds=False, or Popen would close 3 and 4 after preexec_fn;
                # every other fd Python opens is close-on-exec anyway.
                self._proc = subprocess.Popen(
                    args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                    close_fds=False, preexec_fn=child_fds, start_new_session=True)
        except BaseException:
            for fd in (cmd_r, cmd_w, ev_r, ev_w):
                os.close(fd)
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        os.close(cmd_r)
        os.close(ev_w)
        proc, log_path = self._proc, self.log_path

        def describe_death():
            try:
                status = f"exited with code {proc.wait(timeout=2)}"
            except subprocess.TimeoutExpired:
                status = "still running"
            return f" (Chromium {status}){_log_tail(log_path)}"

        self._conn = _Connection(ev_r, cmd_w, describe_death)
        # Runs on close(), on garbage collection and at interpreter exit.
        self._finalizer = weakref.finalize(self, _shutdown, self._conn, proc, self.workdir)
        try:
            self.version = self._conn.call("Browser.getVersion", timeout=timeout)
        except TimeoutError as e:
            msg = f"Chromium did not answer on the DevTools pipe: {e}{_log_tail(log_path)}"
            self.close()
            raise BrowserError(msg) from None
        except BaseException:
            self.close()
            raise

    def call(self, method, params=None, timeout=None):
        """A browser-level CDP command."""
        return self._conn.call(method, params, None, timeout or self.timeout)

    def new_page(self):
        """Open a tab on about:blank and attach to it (flat session)."""
        tid = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = self.call("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        return Page(self, tid, sid)

    def close(self):
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# key name -> (code, windowsVirtualKeyCode, text)
_KEYS = {
    "Enter": ("Enter", 13, "\r"), "Escape": ("Escape", 27, None), "Tab": ("Tab", 9, None),
    "Backspace": ("Backspace", 8, None), "Delete": ("Delete", 46, None),
    "ArrowLeft": ("ArrowLeft", 37, None), "ArrowUp": ("ArrowUp", 38, None),
    "ArrowRight": ("ArrowRight", 39, None), "ArrowDown": ("ArrowDown", 40, None),
    "Home": ("Home", 36, None), "End": ("End", 35, None), " ": ("Space", 32, " "),
}

# Scroll the element into view and return its centre in viewport CSS pixels.
_CENTRE_JS = """(() => {
  const el = document.querySelector(%s);
  if (!el) return null;
  el.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});
  const r = el.getBoundingClientRect();
  return {x: r.left + r.width / 2, y: r.top + r.height / 2, w: r.width, h: r.height};
})()"""

# Focus the element with the caret at the end of its text.
_FOCUS_JS = """(() => {
  const el = document.querySelector(%s);
  if (!el) return null;
  el.focus();
  try { const n = el.value.length; el.setSelectionRange(n, n); } catch (e) {}
  return document.activeElement === el;
})()"""


def _remote_text(obj):
    """Text of a Runtime.RemoteObject, as the console would show it."""
    if isinstance(obj.get("value"), str):
        return obj["value"]
    if "value" in obj:
        return json.dumps(obj["value"])
    return str(obj.get("unserializableValue") or obj.get("description") or obj.get("type"))


def _exception_text(details):
    exc = details.get("exception") or {}
    return exc.get("description") or str(exc.get("value") or details.get("text"))


class Page:
    """One tab. console_errors / console_messages fill in as events arrive."""

    def __init__(self, browser, target_id, session_id):
        self.browser = browser          # keeps the browser alive while a page is used
        self.target_id, self.session_id = target_id, session_id
        self.timeout = browser.timeout
        self.console_errors = []        # strings: console.error/assert, uncaught, Log errors
        self.console_messages = []      # (type, text); Log entries as ("<source>:<level>", text)
        self._conn = browser._conn
        self._cond = threading.Condition()
        self._loader = None             # loaderId of the main frame's current document
        self._loaded = set()            # loaderIds whose load event has fired
        self._crashed = False
        self._conn.handlers[session_id] = weakref.WeakMethod(self._on_event)
        for method in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.call(method)
        self.call("Page.setLifecycleEventsEnabled", {"enabled": True})

    def call(self, method, params=None, timeout=None):
        """A CDP command on this page's session."""
        return self._conn.call(method, params, self.session_id, timeout or self.timeout)

    def _on_event(self, method, p):     # runs on the reader thread
        if method == "Runtime.consoleAPICalled":
            text = " ".join(_remote_text(a) for a in p.get("args", []))
            self.console_messages.append((p["type"], text))
            if p["type"] in ("error", "assert"):
                frames = (p.get("stackTrace") or {}).get("callFrames") or [{}]
                where = f"{frames[0].get('url', '')}:{frames[0].get('lineNumber', -1) + 1}"
                self.console_errors.append(f"console.{p['type']}: {text} ({where})")
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.console_errors.append(
                f"uncaught: {_exception_text(d)} ({d.get('url', '')}:{d.get('lineNumber', -1) + 1})")
        elif method == "Log.entryAdded":
            e = p["entry"]
            self.console_messages.append((f"{e['source']}:{e['level']}", e["text"]))
            if e["level"] == "error":
                self.console_errors.append(f"{e['source']}: {e['text']} ({e.get('url', '')})")
        elif method == "Page.lifecycleEvent" and p["frameId"] == self.target_id:
            with self._cond:
                if p["name"] == "init":
                    self._loader = p["loaderId"]
                elif p["name"] == "load":
                    self._loaded.add(p["loaderId"])
                self._cond.notify_all()
        elif method in ("Inspector.targetCrashed", "cdp.disconnected"):
            with self._cond:
                self._crashed = method == "Inspector.targetCrashed"
                self._cond.notify_all()

    def _wait_loaded(self, pred, what, timeout):
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._cond:
            while not pred():
                if self._crashed:
                    raise BrowserError(f"{what}: the page crashed")
                if self._conn.dead:
                    raise BrowserError(f"{what}: {self._conn.dead}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{what}: no load event within {timeout or self.timeout:g}s")
                self._cond.wait(left)

    def goto(self, url, timeout=None):
        """Navigate and wait for the load event."""
        r = self.call("Page.navigate", {"url": url}, timeout)
        if r.get("errorText"):
            raise BrowserError(f"navigating to {url}: {r['errorText']}")
        if r.get("loaderId"):    # none for a same-document (#fragment) navigation
            self._wait_loaded(lambda: r["loaderId"] in self._loaded, f"goto {url}", timeout)

    def reload(self, timeout=None):
        """Reload and wait for the new document's load event."""
        old = self._loader
        self.call("Page.reload", {}, timeout)
        self._wait_loaded(lambda: self._loader != old and self._loader in self._loaded,
                          "reload", timeout)

    def eval(self, expression, timeout=None):
        """Evaluate a JS expression (awaiting promises); return its JSON value.
        Raises BrowserError with the exception text when it throws."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True}, timeout)
        if "exceptionDetails" in r:
            raise BrowserError(f"JS exception in {expression[:200]!r}: "
                               f"{_exception_text(r['exceptionDetails'])}")
        res = r["result"]
        if "unserializableValue" in res:   # NaN, Infinity, -0, 123n
            u = res["unserializableValue"]
            return int(u[:-1]) if u.endswith("n") else float(u)
        return res.get("value")

    def wait_for(self, expression, timeout=None, interval=0.05):
        """Poll a JS expression until it is truthy (by JS rules); return its value.
        A throwing expression counts as not yet true."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        wrapped = f"Promise.resolve((\n{expression}\n)).then(v => [!!v, v])"
        last = None
        while True:
            try:
                ok, last = self.eval(wrapped, timeout=max(deadline - time.monotonic(), 1.0))
                if ok:
                    return last
            except (BrowserError, TimeoutError) as e:   # e.g. mid-navigation
                if self._conn.dead:
                    raise
                last = e
            if time.monotonic() >= deadline:
                raise TimeoutError(f"wait_for({expression!r}) not true after {timeout:g}s; "
                                   f"last value: {last!r}")
            time.sleep(interval)

    def click(self, selector):
        """A trusted left click at the element's centre. Like a user's click it
        lands on whatever is topmost at that point."""
        box = self.eval(_CENTRE_JS % json.dumps(selector))
        if box is None:
            raise BrowserError(f"click: no element matches {selector!r}")
        if not box["w"] or not box["h"]:
            raise BrowserError(f"click: {selector!r} has zero size (hidden?)")
        for kind, button in (("mouseMoved", "none"), ("mousePressed", "left"),
                             ("mouseReleased", "left")):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": box["x"], "y": box["y"],
                                                   "button": button, "clickCount": 1})

    def focus(self, selector):
        """Focus the element, with the caret at the end of its text."""
        focused = self.eval(_FOCUS_JS % json.dumps(selector))
        if focused is None:
            raise BrowserError(f"focus: no element matches {selector!r}")
        if not focused:
            raise BrowserError(f"focus: {selector!r} cannot take focus")

    def type_text(self, selector, text):
        """Focus the element (caret at the end) and insert text as typed input."""
        self.focus(selector)
        self.call("Input.insertText", {"text": text})

    def press(self, key, shift=False, ctrl=False, alt=False, meta=False):
        """Press and release a key: a name from _KEYS or a single character."""
        if key in _KEYS:
            code, vk, text = _KEYS[key]
        elif len(key) == 1:
            up = key.upper()
            code = f"Key{up}" if up.isalpha() else f"Digit{key}" if key.isdigit() else ""
            vk, text = ord(up), key
        else:
            raise ValueError(f"press: unknown key {key!r}")
        ev = {"key": key, "code": code, "windowsVirtualKeyCode": vk,
              "nativeVirtualKeyCode": vk, "modifiers": alt | ctrl << 1 | meta << 2 | shift << 3}
        down = dict(ev, type="keyDown" if text else "rawKeyDown")
        if text and not (ctrl or alt or meta):
            down.update(text=text, unmodifiedText=text)
        self.call("Input.dispatchKeyEvent", down)
        self.call("Input.dispatchKeyEvent", dict(ev, type="keyUp"))

    def set_viewport(self, width, height, mobile=False, scale=1):
        """Emulate a viewport size (mobile=True also gives meta-viewport handling)."""
        self.call("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": scale, "mobile": mobile})

    def screenshot(self, path=None, full_page=False):
        """PNG bytes of the viewport (or whole page); also written to path if given."""
        params = {"format": "png"}
        if full_page:
            m = self.call("Page.getLayoutMetrics")
            size = m.get("cssContentSize") or m["contentSize"]
            params.update(captureBeyondViewport=True, clip={
                "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        png = base64.b64decode(self.call("Page.captureScreenshot", params)["data"])
        if path:
            with open(path, "wb") as f:
                f.write(png)
        return png

    def close(self):
        self.browser.call("Target.closeTarget", {"targetId": self.target_id})
        self._conn.handlers.pop(self.session_id, None)
