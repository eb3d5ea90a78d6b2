"""The web UI's files over HTTP (no browser): content types, caching headers and CSP on every
embedded file, ETag revalidation, HEAD, methods, 404 for every path outside the embedded files
(traversal attempts included), the pages public under --api-key, and --no-webui.

Usage: test_webui.py LLMSERVE_BINARY
"""

import http.client
import re
import sys

from harness import Server, raw_exchange, require_model

CSP_PARTS = ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
             "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"]
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".html": "text/html; charset=utf-8"}


def raw_get(port, target, headers=None, method="GET"):
    """A request with the target sent exactly as written (http.client does not normalise it)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def check_security_headers(path, hdrs):
    csp = hdrs.get("content-security-policy", "")
    for part in CSP_PARTS:
        assert part in csp, f"{path}: CSP lacks {part!r}: {csp!r}"
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, csp
    assert hdrs.get("x-content-type-options") == "nosniff", (path, hdrs)
    assert hdrs.get("referrer-policy") == "no-referrer", (path, hdrs)


def check_pages(srv):
    seen = {}
    for page in ["/", "/dashboard"]:
        status, hdrs, body = raw_get(srv.port, page)
        assert status == 200, (page, status, body[:200])
        assert hdrs["content-type"] == TYPES[".html"], (page, hdrs)
        assert hdrs.get("cache-control") == "no-cache", (page, hdrs)
        assert re.fullmatch(r'"[0-9a-f]{20}"', hdrs.get("etag", "")), (page, hdrs)
        assert int(hdrs["content-length"]) == len(body)
        check_security_headers(page, hdrs)
        html = body.decode()
        # The CSP forbids inline script, style attributes and handlers: the pages must not need them.
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), f"{page}: inline <script>"
        assert not re.search(r"\son[a-z]+\s*=", html), f"{page}: inline event handler"
        assert not re.search(r"\sstyle\s*=", html), f"{page}: inline style attribute"
        refs = re.findall(r'(?:src|href)="(/webui/[^"]+)"', html)
        assert refs, f"{page} references no /webui/ asset"
        for ref in refs:
            seen[ref] = page
    for ref, page in sorted(seen.items()):
        status, hdrs, body = raw_get(srv.port, ref)
        assert status == 200 and body, (ref, page, status)
        ext = ref[ref.rfind("."):]
        assert hdrs["content-type"] == TYPES[ext], (ref, hdrs["content-type"])
        check_security_headers(ref, hdrs)
    print(f"pages and {len(seen)} assets: types, no-cache + ETag, CSP ok")


def check_revalidation(srv):
    status, hdrs, body = raw_get(srv.port, "/webui/chat.js")
    etag = hdrs["etag"]
    for presented in [etag, "W/" + etag, f'"nope", {etag}', "*"]:
        s, h, b = raw_get(srv.port, "/webui/chat.js", {"If-None-Match": presented})
        assert s == 304 and b == b"", (presented, s, len(b))
        assert h.get("etag") == etag, h
    s, _, b = raw_get(srv.port, "/webui/chat.js", {"If-None-Match": '"0000"'})
    assert s == 200 and b == body, s
    # HEAD: the same head, no body.
    s, h, b = raw_get(srv.port, "/", method="HEAD")
    assert s == 200 and b == b"" and int(h["content-length"]) > 0, (s, h)
    # A query string does not change what is served.
    s, _, b = raw_get(srv.port, "/?conversation=1")
    assert s == 200 and b.startswith(b"<!doctype html>"), s
    # Other methods: 405 naming the allowed ones.
    s, h, b = raw_get(srv.port, "/", method="POST", headers={"Content-Length": "0"})
    assert s == 405 and h.get("allow") == "GET, HEAD", (s, h, b)
    print("ETag revalidation (304), HEAD, query, 405 ok")


def parse_responses(raw, bodiless):
    """Splits pipelined responses; bodiless[i]: response i has no body whatever its
    Content-Length (an answer to HEAD, or a 304)."""
    out = []
    for no_body in bodiless:
        head, sep, raw = raw.partition(b"\r\n\r\n")
        assert sep, f"response {len(out)} is cut short: {head[:200]!r}"
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        n = 0 if no_body else int(hdrs["content-length"])
        out.append((status, hdrs, raw[:n]))
        raw = raw[n:]
    assert raw == b"", f"bytes after the last response: {raw[:200]!r}"
    return out


def check_pipelined_heads(srv):
    """HEAD and 304 answers carry no body, on a kept-alive connection, API routes included."""
    _, hdrs, css = raw_get(srv.port, "/webui/style.css")
    etag = raw_get(srv.port, "/webui/chat.js")[1]["etag"]
    requests = (b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n"
                b"GET /webui/chat.js HTTP/1.1\r\nHost: t\r\nIf-None-Match: " + etag.encode() +
                b"\r\n\r\n"
                b"HEAD /health HTTP/1.1\r\nHost: t\r\n\r\n"
                b"HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\n"
                b"GET /webui/style.css HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    raw = raw_exchange(srv.port, requests, timeout=30)
    got = parse_responses(raw, [True, True, True, True, False])
    assert [g[0] for g in got] == [200, 304, 405, 404, 200], [g[0] for g in got]
    assert int(got[0][1]["content-length"]) > 0
    assert got[4][2] == css, "the last response's body is not the file: stray bytes before it"
    print("pipelined HEAD / 304 / HEAD on API routes: no body, connection kept ok")


NOT_FOUND = [
    "/webui/", "/webui", "/webui/nope.js", "/index.html", "/webui/index.html", "/dashboard/",
    "/webui/../webui/chat.js", "/webui/./chat.js", "/webui/%2e%2e/%2e%2e/etc/passwd",
    "/../../../../etc/passwd", "/webui/..%2f..%2f..%2fetc%2fpasswd", "//etc/passwd",
    "/webui/chat.js/..", "/webui/chat.js%00.html", "/webui/CHAT.JS", "/webui//chat.js",
    "/%2e%2e/", "/webui/\\..\\..\\etc\\passwd",
]


def check_not_found(srv):
    for target in NOT_FOUND:
        s, h, b = raw_get(srv.port, target)
        assert s == 404, (target, s, b[:100])
        assert b"root:" not in b
        assert h["content-type"].startswith("application/json"), (target, h)
    print(f"{len(NOT_FOUND)} paths outside the embedded files: 404 ok")


def main():
    binary = sys.argv[1]
    require_model()
    with Server(binary) as srv:
        check_pages(srv)
        check_revalidation(srv)
        check_pipelined_heads(srv)
        check_not_found(srv)
        # The log names the pages.
        assert any("/dashboard" in line for line in srv.log), "".join(srv.log)
    with Server(binary, "--api-key", "sekret") as srv:
        s, _, _ = raw_get(srv.port, "/")
        assert s == 200, s  # the page is public; it asks for the key itself
        s, _, _ = raw_get(srv.port, "/v1/models")
        assert s == 401, s
        print("--api-key: pages public, API 401 ok")
    with Server(binary, "--no-webui") as srv:
        for target in ["/", "/dashboard", "/webui/chat.js"]:
            s, _, _ = raw_get(srv.port, target)
            assert s == 404, (target, s)
        s, _, _ = raw_get(srv.port, "/v1/models")
        assert s == 200, s
        print("--no-webui: 404 ok")
    print("PASS")


if __name__ == "__main__":
    main()
