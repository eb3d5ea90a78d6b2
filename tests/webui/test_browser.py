"""The web UI in a real browser: headless Chromium (tests/webui/cdp.py) against `llmserve serve`
with the small model.

Checks: both pages load with no console error (CSP violations and failed loads included); a chat
round trip streams text into the page (the body grows while the request runs) and stores exactly
the answer the API gives for the same request; the sampling settings reach the server; stop ends
the request on the server (its abort counter moves); regenerate and edit-and-resend; hostile
model text (script tags, onerror attributes, javascript: links) shows as text and runs nothing;
keyboard-only use (Enter sends, Esc stops, Tab reaches the controls); a phone-sized window has
no horizontal overflow; a wrong API key shows the server's error and the right one works; the
dashboard's figures change while a load runs.

Usage: test_browser.py LLMSERVE_BINARY
Set LLMS_WEBUI_SCREENSHOTS=DIR to write screenshots of both pages (desktop and phone) there.
"""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))

from cdp import Browser, find_chromium  # noqa: E402
from harness import SKIP, Server, require_model  # noqa: E402

SHOTS = os.environ.get("LLMS_WEBUI_SCREENSHOTS")
# Generation is slow under the sanitizers: every wait is generous, none is a speed assertion.
WAIT = 240

CONVERSATIONS = "JSON.parse(localStorage.getItem('llmserve.conversations') || '[]')"


def no_console_errors(page, what, allowed=()):
    bad = [e for e in page.console_errors if not any(a in e for a in allowed)]
    assert not bad, f"{what}: console errors: {bad}"


def set_input(page, element_id, value):
    """Sets a settings field as a user would (the page saves settings on input events)."""
    page.eval(f"(() => {{ const e = document.getElementById({json.dumps(element_id)});"
              f" e.value = {json.dumps(value)};"
              " e.dispatchEvent(new Event('input', {bubbles: true})); })()")


def last_assistant(page):
    return page.eval(f"{CONVERSATIONS}[0].messages.filter(m => m.role === 'assistant').at(-1)")


def api_answer(srv, messages, max_tokens):
    status, _, body = srv.json("POST", "/v1/chat/completions", {
        "model": srv.name, "messages": messages, "temperature": 0, "max_tokens": max_tokens,
        "seed": 7})
    assert status == 200, body
    return body["choices"][0]["message"]["content"]


def check_chat_round_trip(page, srv):
    page.goto(f"http://127.0.0.1:{srv.port}/")
    page.wait_for("document.body.dataset.state === 'idle'", timeout=30)
    page.wait_for(f"document.getElementById('model-name').textContent === {json.dumps(srv.name)}",
                  timeout=30)
    # Keyboard only: the prompt has the focus at load, Enter sends.
    assert page.eval("document.activeElement.id") == "prompt"
    page.click("#settings-toggle")
    set_input(page, "temperature", "0")
    set_input(page, "seed", "7")
    set_input(page, "max-tokens", "48")
    page.click("#settings-close")
    # Streaming: the page records, on every change of the message list, the answer's length
    # while the request runs; it must be seen at two or more lengths before the request ends.
    page.eval("window.__lengths = new Set(); new MutationObserver(() => {"
              " if (document.body.dataset.state !== 'generating') return;"
              " const b = document.querySelector('#messages .msg.assistant:last-of-type .msg-body');"
              " if (b && b.textContent.length) window.__lengths.add(b.textContent.length); })"
              ".observe(document.getElementById('messages'),"
              " {childList: true, subtree: true, characterData: true})")
    page.type_text("#prompt", "Write a Python function that adds two numbers.")
    page.press("Enter")
    page.wait_for("document.body.dataset.state === 'idle' &&"
                  " document.querySelector('#messages .msg.assistant .msg-stats') !== null",
                  timeout=WAIT)
    lengths = page.eval("[...window.__lengths]")
    assert len(lengths) >= 2, f"text did not stream in (lengths seen: {sorted(lengths)})"
    stats = page.eval("document.querySelector('#messages .msg.assistant .msg-stats').textContent")
    assert "TTFT" in stats and "tok/s" in stats and "48 tokens" in stats, stats
    stored = last_assistant(page)["content"]
    expected = api_answer(srv, [{"role": "user",
                                 "content": "Write a Python function that adds two numbers."}], 48)
    assert stored == expected, f"page stored {stored!r}, API gives {expected!r}"
    assert page.eval("document.querySelectorAll('#messages .msg.error').length") == 0
    print(f"chat round trip: streamed ({len(lengths)} lengths seen), {stats}, equal to the API")
    return expected


def finished_requests(srv):
    return srv.metric("vllm:request_success_total")


def check_regenerate_and_edit(page, srv, first_answer):
    done_before = finished_requests(srv)
    page.click("#messages .msg.assistant .regenerate")
    deadline = time.time() + WAIT
    while finished_requests(srv) < done_before + 1:
        assert time.time() < deadline, "regenerate sent no request"
        time.sleep(0.1)
    page.wait_for("document.body.dataset.state === 'idle' &&"
                  f" {CONVERSATIONS}[0].messages.length === 2 &&"
                  " document.querySelector('#messages .msg.assistant .msg-stats') !== null",
                  timeout=WAIT)
    assert last_assistant(page)["content"] == first_answer, "regenerate (greedy) changed the answer"
    page.click("#messages .msg.user .edit")
    page.wait_for("document.querySelector('#messages .msg.user .edit-area') !== null")
    page.eval("document.querySelector('#messages .msg.user .edit-area').value = ''")
    page.type_text("#messages .msg.user .edit-area", "Say hello in French.")
    page.click("#messages .msg.user .save-edit")
    page.wait_for("document.body.dataset.state === 'idle' &&"
                  f" {CONVERSATIONS}[0].messages.length === 2 &&"
                  f" {CONVERSATIONS}[0].messages[0].content === 'Say hello in French.' &&"
                  " document.querySelector('#messages .msg.assistant .msg-stats') !== null",
                  timeout=WAIT)
    expected = api_answer(srv, [{"role": "user", "content": "Say hello in French."}], 48)
    assert last_assistant(page)["content"] == expected
    print("regenerate (same greedy answer) and edit-and-resend (history cut, new answer) ok")


def check_stop(page, srv):
    aborted = srv.metric("llmserve:requests_aborted_by_client_total")
    set_input(page, "max-tokens", "")  # to the end of the context
    page.click("#new-chat")
    page.type_text("#prompt", "Count from 1 to 1000, one number per line.")
    page.click("#send")
    page.wait_for("document.body.dataset.state === 'generating' &&"
                  " (document.querySelector('#messages .msg.assistant .msg-body') || {})"
                  ".textContent?.length > 5", timeout=WAIT)
    assert page.eval("document.activeElement.id") == "stop", "Stop does not take the focus"
    page.press("Escape")  # keyboard: Esc stops
    page.wait_for("document.body.dataset.state === 'idle'", timeout=30)
    stats = page.eval("document.querySelector('#messages .msg.assistant .msg-stats').textContent")
    assert "stopped" in stats, stats
    deadline = time.time() + 60
    while srv.metric("llmserve:requests_aborted_by_client_total") < aborted + 1:
        assert time.time() < deadline, "the server never counted the abort"
        time.sleep(0.1)
    while srv.metric("vllm:num_requests_running") != 0:
        assert time.time() < deadline, "the stopped request kept running on the server"
        time.sleep(0.1)
    set_input(page, "max-tokens", "48")
    print(f"stop: request aborted on the server ({stats})")


def check_structured(page, srv):
    schema = {"type": "object", "properties": {"count": {"type": "integer"}},
              "required": ["count"], "additionalProperties": False}
    set_input(page, "json-schema", json.dumps(schema))
    page.click("#new-chat")
    page.type_text("#prompt", "How many legs does a cat have? Answer in JSON.")
    page.press("Enter")
    page.wait_for("document.body.dataset.state === 'idle' &&"
                  " document.querySelector('#messages .msg.assistant .msg-stats') !== null",
                  timeout=WAIT)
    answer = json.loads(last_assistant(page)["content"])
    assert isinstance(answer.get("count"), int) and set(answer) == {"count"}, answer
    shown = page.eval("document.querySelector('#messages .msg.assistant code.lang-json').textContent")
    assert json.loads(shown) == answer, shown
    set_input(page, "json-schema", "")
    print(f"structured output: {answer} shown as indented JSON")


HOSTILE = ("<script>window.__xss = 1</script> and <img src=x onerror=\"window.__xss = 2\"> "
           "[click](javascript:window.__xss=3) <b onmouseover=alert(1)>bold</b>\n\n"
           "```html\n<script>window.__xss = 4</script>\n```\n\n| a | <iframe src=x> |\n|---|---|\n"
           "| `<svg onload=window.__xss=5>` | ok |")


def check_hostile_text(page, srv):
    conversation = [{"id": "hostile", "title": "<img src=x onerror=window.__xss=6>",
                     "messages": [{"role": "user", "content": "<script>window.__xss=7</script>"},
                                  {"role": "assistant", "content": HOSTILE}]}]
    page.eval(f"localStorage.setItem('llmserve.conversations', {json.dumps(json.dumps(conversation))});"
              " localStorage.setItem('llmserve.current', 'hostile')")
    page.reload()
    page.wait_for("document.body.dataset.state === 'idle'", timeout=30)
    time.sleep(0.5)
    assert page.eval("window.__xss") is None, "hostile text ran script"
    counts = page.eval("['script', 'img', 'iframe', 'svg', '[onerror]', '[onmouseover]', '[onload]',"
                       " 'a[href^=\"javascript\"]'].map(s => document.querySelectorAll("
                       "'#messages ' + s + ', #conversations ' + s).length)")
    assert counts == [0] * 8, f"hostile markup became elements: {counts}"
    text = page.eval("document.getElementById('messages').textContent")
    for visible in ["<script>window.__xss = 1</script>", "onerror=\"window.__xss = 2\"",
                    "<iframe src=x>", "<svg onload=window.__xss=5>"]:
        assert visible in text, f"{visible!r} not shown as text"
    assert page.eval("document.querySelectorAll('#messages table, #messages .code-block').length") == 2
    no_console_errors(page, "hostile text")
    print("hostile model text shown as text, nothing ran")


RENDER_CASES = [
    # (markdown, JS predicate over the rendered fragment `f` in a div `d`)
    ("# Learn C#", "d.querySelector('h3').textContent === 'Learn C#'"),
    ("## Title ##", "d.querySelector('h4').textContent === 'Title'"),
    ("1. Step:\n   ```python\n   x = 1\n\n   y = 2\n   ```\n2. Step two\n\nend",
     "d.querySelectorAll('pre code').length === 1 &&"
     " d.querySelector('pre code').textContent === 'x = 1\\n\\ny = 2' &&"
     " d.querySelectorAll('ol > li').length === 2 && d.lastChild.textContent === 'end'"),
    ("```python```\nafter", "d.querySelectorAll('.code-block').length === 0"),
    ("```\na\n```python\nb\n```", "d.querySelector('pre code').textContent === 'a\\n```python\\nb'"),
    ("*see `a*b`*", "d.querySelector('em code').textContent === 'a*b'"),
    ("a | b\n---", "d.querySelectorAll('table').length === 0"),
    ("> " * 5000 + "deep", "d.textContent.includes('deep')"),
    ("- + " * 1250 + "x", "d.textContent.includes('x')"),
    ("1. " * 2300 + "y", "d.textContent.includes('y')"),
    ("# a" + " " * 5000 + "b", "d.querySelector('h3').textContent.startsWith('a')"),
    ("[" * 100000 + "](http://x)", "d.querySelectorAll('a').length <= 1"),
    ("[a](http://x y)" * 2000, "d.querySelectorAll('a').length === 0"),
]


def check_renderer_edge_cases(page):
    """Markdown shapes code models write, and hostile nesting and runs: right elements, no throw
    (a stack overflow or a regex that backtracks for minutes would end in the wait's timeout)."""
    for text, predicate in RENDER_CASES:
        ok = page.eval(f"(() => {{ const d = document.createElement('div');"
                       f" d.appendChild(LlmsMarkdown.render({json.dumps(text)}));"
                       f" return {predicate}; }})()", timeout=60)
        assert ok is True, f"render of {text[:60]!r}...: {predicate}"
    print(f"renderer: {len(RENDER_CASES)} edge cases (fences in lists, headings, deep nesting, runs)")


def check_keyboard_and_phone(page, srv):
    # Tab reaches the main controls from the top of the page.
    page.eval("document.activeElement.blur()")
    seen = []
    for _ in range(12):
        page.press("Tab")
        seen.append(page.eval("document.activeElement.id || document.activeElement.className"))
    for control in ["settings-toggle", "new-chat", "prompt", "send"]:
        assert control in seen, f"Tab never reaches #{control}: {seen}"
    assert page.eval("getComputedStyle(document.activeElement).outlineStyle") != "none", \
        "the focused control shows no focus outline"
    page.set_viewport(375, 740, mobile=True)
    page.reload()
    page.wait_for("document.body.dataset.state === 'idle'", timeout=30)
    overflow = page.eval("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"phone-sized window scrolls sideways by {overflow}px"
    visible = page.eval("['prompt', 'send', 'sidebar-toggle'].map(id => {"
                        " const r = document.getElementById(id).getBoundingClientRect();"
                        " return r.width > 0 && r.right <= innerWidth && r.bottom <= innerHeight; })")
    assert visible == [True, True, True], f"controls off screen on a phone: {visible}"
    if SHOTS:
        page.screenshot(os.path.join(SHOTS, "webui-chat-phone.png"))
    page.set_viewport(1280, 900)
    print(f"keyboard: Tab order {seen[:8]}...; phone width: no overflow")


DIALOG_OPEN = "document.getElementById('api-key-dialog').open"


def answer_key_dialog(page, key, submit_with_enter=False):
    """Waits for the API-key dialog, types `key` into it (replacing what is there) and submits."""
    page.wait_for(DIALOG_OPEN, timeout=30)
    page.eval("document.getElementById('api-key-input').value = ''")
    page.type_text("#api-key-input", key)
    if submit_with_enter:
        page.press("Enter")
    else:
        page.click("#api-key-save")


def check_api_key(browser, binary):
    with Server(binary, "--api-key", "right-key") as srv:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{srv.port}/")
        answer_key_dialog(page, "wrong-key", submit_with_enter=True)
        page.wait_for(f"{DIALOG_OPEN} && document.getElementById('api-key-message').textContent"
                      ".includes('Incorrect or missing API key')", timeout=30)
        answer_key_dialog(page, "right-key")
        page.wait_for(f"!{DIALOG_OPEN} &&"
                      f" document.getElementById('model-name').textContent === {json.dumps(srv.name)}",
                      timeout=30)
        set_input(page, "max-tokens", "8")
        page.type_text("#prompt", "Hi")
        page.press("Enter")
        page.wait_for("document.body.dataset.state === 'idle' &&"
                      " document.querySelector('#messages .msg.assistant .msg-stats') !== null",
                      timeout=WAIT)
        assert page.eval("document.querySelectorAll('#messages .msg.error').length") == 0
        # A key changed to a wrong one: the request's error is the server's, shown in the chat.
        set_input(page, "api-key", "stale-key")
        page.type_text("#prompt", "Hi again")
        page.press("Enter")
        page.wait_for("document.querySelectorAll('#messages .msg.error').length === 1", timeout=30)
        error = page.eval("document.querySelector('#messages .msg.error .msg-body').textContent")
        assert "Incorrect or missing API key" in error, error
        # The 401 asks for the key again; the failed message stays on screen but is not sent
        # again: roles keep alternating.
        answer_key_dialog(page, "right-key")
        page.wait_for(f"!{DIALOG_OPEN}", timeout=30)
        page.eval("window.__bodies = []; const realFetch = window.fetch;"
                  " window.fetch = (url, init) => { if (init && init.body)"
                  " window.__bodies.push(JSON.parse(init.body)); return realFetch(url, init); }")
        page.type_text("#prompt", "Third")
        page.press("Enter")
        page.wait_for("document.body.dataset.state === 'idle' &&"
                      " document.querySelectorAll('#messages .msg.assistant .msg-stats').length === 2",
                      timeout=WAIT)
        sent = page.eval("window.__bodies[0].messages.map(m => m.role + ':' + m.content.slice(0, 8))")
        assert [m.split(":")[0] for m in sent] == ["user", "assistant", "user"], sent
        assert sent[0] == "user:Hi" and sent[2] == "user:Third", sent
        # Chromium logs each 401 response as a failed resource load; nothing else may appear.
        no_console_errors(page, "api key", allowed=("401",))
        page.close()
        print("API key: asked for, wrong key shows the server's error, right key works")


def run_load(srv, stop_event):
    while not stop_event.is_set():
        srv.json("POST", "/v1/completions", {"model": srv.name, "prompt": "def fib(n):",
                                             "max_tokens": 24, "temperature": 0})


def check_dashboard(page, srv):
    page.goto(f"http://127.0.0.1:{srv.port}/dashboard")
    page.wait_for("Number(document.body.dataset.scrapes) >= 2", timeout=30)
    finished_before = page.eval("Number(document.getElementById('dash-finished-total').dataset.value)")
    stop_event = threading.Event()
    workers = [threading.Thread(target=run_load, args=(srv, stop_event)) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        page.wait_for("Number(document.getElementById('dash-running').dataset.value) >= 1",
                      timeout=60)
        page.wait_for("Number(document.getElementById('dash-gen-tps').dataset.value) > 0",
                      timeout=60)
        page.wait_for("Number(document.getElementById('dash-kv').dataset.value) > 0", timeout=60)
        if SHOTS:
            time.sleep(8)
            page.screenshot(os.path.join(SHOTS, "webui-dashboard.png"), full_page=True)
    finally:
        stop_event.set()
        for w in workers:
            w.join()
    page.wait_for(f"Number(document.getElementById('dash-finished-total').dataset.value) > {finished_before}"
                  " && document.getElementById('dash-ttft-p50').dataset.value !== ''"
                  " && Number(document.getElementById('dash-running').dataset.value) === 0",
                  timeout=60)
    ttft = page.eval("Number(document.getElementById('dash-ttft-p50').dataset.value)")
    assert 0 < ttft < 60, ttft
    assert page.eval("document.querySelectorAll('#dash-charts svg').length") >= 3
    no_console_errors(page, "dashboard")
    print(f"dashboard: running, tokens/s, KV usage and finished moved with the load; TTFT p50 {ttft:.3f} s")


def check_dashboard_speculative(browser, binary):
    """With speculative decoding on, the dashboard shows its acceptance (hidden otherwise)."""
    # A fixed draft length, so drafts happen however fast this machine's steps are.
    with Server(binary, "--speculative-method", "ngram", "--speculative-config",
                '{"fixed_length": true}') as srv:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{srv.port}/dashboard")
        page.wait_for("Number(document.body.dataset.scrapes) >= 1", timeout=30)
        # A prompt whose continuation repeats it gives prompt lookup drafts to verify.
        text = "alpha beta gamma delta epsilon zeta eta theta iota kappa " * 4
        srv.json("POST", "/v1/completions", {"model": srv.name, "prompt": text, "max_tokens": 48,
                                             "temperature": 0})
        # (The server reports the speculative metrics once a step has run with them.) Once the
        # request is past the 10 s rate window, the card shows the lifetime ratio.
        page.wait_for("!document.getElementById('dash-spec-card').hidden &&"
                      " document.getElementById('dash-spec-accept').dataset.value !== '' &&"
                      " document.getElementById('dash-spec-window').textContent"
                      ".includes('since start')", timeout=60)
        accept = page.eval("Number(document.getElementById('dash-spec-accept').dataset.value)")
        drafted = srv.metric("vllm:spec_decode_num_draft_tokens_total")
        accepted = srv.metric("vllm:spec_decode_num_accepted_tokens_total")
        assert drafted > 0 and abs(accept - accepted / drafted) < 1e-9, (accept, accepted, drafted)
        no_console_errors(page, "dashboard (speculative)")
        page.close()
        print(f"dashboard: speculative acceptance {accept:.2f} = {accepted:.0f}/{drafted:.0f} drafted")


def main():
    binary = sys.argv[1]
    require_model()
    chromium = find_chromium()
    if not chromium:
        print("SKIP: no Chromium (install Debian's chromium: scripts/install-deps.sh)")
        sys.exit(SKIP)
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
    with Browser(chromium, width=1280, height=900) as browser:
        with Server(binary) as srv:
            page = browser.new_page()
            answer = check_chat_round_trip(page, srv)
            check_regenerate_and_edit(page, srv, answer)
            check_stop(page, srv)
            check_structured(page, srv)
            no_console_errors(page, "chat")
            if SHOTS:
                page.reload()
                page.wait_for("document.body.dataset.state === 'idle'", timeout=30)
                page.screenshot(os.path.join(SHOTS, "webui-chat.png"))
            check_hostile_text(page, srv)
            check_renderer_edge_cases(page)
            check_keyboard_and_phone(page, srv)
            no_console_errors(page, "chat")
            page.close()
            check_dashboard(browser.new_page(), srv)
        check_api_key(browser, binary)
        check_dashboard_speculative(browser, binary)
    print("PASS")


if __name__ == "__main__":
    main()
