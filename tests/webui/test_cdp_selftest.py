#!/usr/bin/env python3
"""Self-test of tests/webui/cdp.py against a throwaway local HTTP server.

Run: python3 tests/webui/test_cdp_selftest.py
Exit codes: 0 pass, 1 fail, 77 skip (no Chromium; ctest's SKIP_RETURN_CODE).
"""
import functools
import http.server
import os
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser, BrowserError, find_chromium  # noqa: E402

INDEX_HTML = """<!doctype html>
<html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">  <!-- else Chromium logs a /favicon.ico 404 -->
<title>cdp selftest</title></head>
<body>
<textarea id="prompt"></textarea>
<button id="send">Send</button>
<div id="out"></div>
<div id="keys"></div>
<script src="app.js"></script>
</body></html>
"""

APP_JS = """
window.trusted = null;
window.enters = 0;
document.getElementById('send').addEventListener('click', (e) => {
  window.trusted = e.isTrusted;
  document.getElementById('out').textContent = document.getElementById('prompt').value;
});
document.getElementById('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    window.enters++;
    document.getElementById('keys').textContent = 'enter trusted=' + e.isTrusted;
  }
});
window.boom = () => console.error('boom');
window.throwLater = () => setTimeout(() => { throw new Error('kaboom'); }, 0);
window.load404 = () => {
  const img = document.createElement('img');
  img.src = '/missing.png';
  document.body.appendChild(img);
};
"""

# An inline script under a CSP that forbids it: shows how violations surface.
CSP_HTML = """<!doctype html>
<html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="script-src 'self'">
<title>csp</title></head>
<body><script>window.inlineRan = true;</script></body></html>
"""


def serve(root):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=root))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"  ok  {what}")


def wait_errors(page, needle, timeout=5):
    """Console events arrive asynchronously: poll until one mentions needle."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(needle in e for e in page.console_errors):
            return True
        time.sleep(0.05)
    return False


def run(chromium, base, outdir):
    with Browser(chromium, width=1280, height=900) as b:
        page = b.new_page()
        page.goto(base + "/index.html")
        check(page.eval("document.title") == "cdp selftest", "goto + eval(document.title)")
        check(page.eval("Promise.resolve(6 * 7)") == 42, "eval awaits promises")

        page.type_text("#prompt", "hello")
        page.click("#send")
        page.wait_for("document.getElementById('out').textContent === 'hello'", timeout=5)
        check(page.eval("window.trusted") is True, "type_text + click: text copied, isTrusted")

        page.focus("#prompt")     # the click moved focus to the button
        page.press("Enter")
        check(page.eval("window.enters") == 1, "press Enter fires keydown handler")
        check(page.eval("document.getElementById('keys').textContent") == "enter trusted=true",
              "Enter keydown isTrusted")
        page.press("Enter", shift=True)
        check(page.eval("window.enters") == 1 and page.eval(
            "document.getElementById('prompt').value") == "hello\n",
            "Shift+Enter skips the handler and inserts a newline")

        check(page.console_errors == [], f"no console errors yet {page.console_errors}")
        page.eval("boom()")
        check(wait_errors(page, "boom"), "console.error captured")
        page.eval("throwLater()")
        check(wait_errors(page, "kaboom"), "uncaught exception from setTimeout captured")
        page.eval("load404()")
        check(wait_errors(page, "404"), "404 resource load captured")
        check(("error", "boom") in page.console_messages, "console_messages has ('error', 'boom')")

        try:
            page.eval("(() => { throw new Error('nope'); })()")
            check(False, "throwing eval raises BrowserError")
        except BrowserError as e:
            check("nope" in str(e), "throwing eval raises BrowserError")

        t0 = time.monotonic()
        try:
            page.wait_for("window.neverTrue === 1", timeout=0.5)
            check(False, "wait_for times out")
        except TimeoutError as e:
            check(time.monotonic() - t0 < 3 and "neverTrue" in str(e),
                  "wait_for raises TimeoutError on a never-true expression")

        png = page.screenshot(os.path.join(outdir, "shot.png"))
        with open(os.path.join(outdir, "shot.png"), "rb") as f:
            data = f.read()
        check(data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 100 and data == png,
              "screenshot writes a PNG")
        full = page.screenshot(full_page=True)
        check(full[:8] == b"\x89PNG\r\n\x1a\n", "full-page screenshot")

        page.set_viewport(375, 800, mobile=True)
        check(page.eval("window.innerWidth") == 375, "set_viewport -> innerWidth 375")

        page.reload()
        check(page.eval("window.trusted") is None and page.eval("window.enters") == 0,
              "reload gives a fresh document")

        n = len(page.console_errors)
        page.goto(base + "/csp.html")
        check(page.eval("window.inlineRan") is None, "CSP blocked the inline script")
        check(wait_errors(page, "Content Security Policy"), "CSP violation in console_errors")
        print("  info CSP entry:", page.console_errors[n:])

        workdir = b.workdir
    check(not os.path.exists(workdir), "profile dir removed after close")

    # A dead browser must fail fast with a BrowserError, not hang.
    b = Browser(chromium)
    page = b.new_page()
    b._proc.kill()
    t0 = time.monotonic()
    try:
        page.eval("1")
        check(False, "eval after Chromium died raises BrowserError")
    except BrowserError as e:
        check(time.monotonic() - t0 < 5 and "Chromium" in str(e),
              "eval after Chromium died raises BrowserError")
    b.close()
    check(not os.path.exists(b.workdir), "profile dir removed after kill + close")


def main():
    chromium = find_chromium()
    if not chromium:
        print("SKIP: no Chromium (install 'chromium' or set LLMS_CHROMIUM)")
        return 77
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cdp-selftest-") as root:
        for name, text in (("index.html", INDEX_HTML), ("app.js", APP_JS),
                           ("csp.html", CSP_HTML)):
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
        httpd, base = serve(root)
        try:
            run(chromium, base, root)
        except Exception:
            traceback.print_exc()
            print("FAIL")
            return 1
        finally:
            httpd.shutdown()
    print(f"PASS ({time.monotonic() - t0:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
