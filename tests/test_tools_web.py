"""web_fetch against a real loopback HTTP server started by the test."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from _helpers import builtin_subset, call_tool
from personae.errors import ToolError
from personae.tools import ToolSubset


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle(self) -> None:
        # The client gives up in the timeout tests; a broken pipe is expected.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle()

    def _send(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/hello":
            self._send(200, "héllo from loopback\n".encode())
        elif self.path == "/big":
            self._send(200, b"z" * 200_000)
        elif self.path == "/slow":
            time.sleep(3)
            self._send(200, b"late")
        elif self.path == "/drip":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            for _ in range(30):  # each chunk is quick, the whole body is slow
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.1)
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/hello")
            self.end_headers()
        elif self.path == "/page":
            page = (
                "<html><head><title>Loop  page</title><style>p{color:red}</style></head>"
                "<body><script>alert('x')</script><h1>Heading</h1><p>First &amp; only"
                " paragraph.</p><ul><li>one</li><li>two</li></ul></body></html>"
            )
            self._send(200, page.encode(), "text/html; charset=utf-8")
        elif self.path == "/to-file":
            self.send_response(302)
            self.send_header("Location", "file:///etc/passwd")
            self.end_headers()
        elif self.path == "/image":
            self._send(200, b"\x89PNG\r\n\x1a\n", "image/png")
        else:
            self._send(404, b"no such page")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _subset(root: Path, **limits: Any) -> ToolSubset:
    limits.setdefault("fetch_allow_private", True)  # the test server is on loopback
    return builtin_subset(root, ["web_fetch"], **limits)


def fetch(subset: ToolSubset, url: str) -> str:
    return call_tool(subset, "web_fetch", url=url)


def test_fetch_text(server: str, tmp_path: Path) -> None:
    out = fetch(_subset(tmp_path), server + "/hello")
    assert out.startswith(f"HTTP 200 OK from {server}/hello\ncontent-type: text/plain")
    assert out.endswith("\n\nhéllo from loopback\n")


def test_html_is_converted_to_text(server: str, tmp_path: Path) -> None:
    out = fetch(_subset(tmp_path), server + "/page")
    head, body = out.split("\n\n", 1)
    assert head.endswith("content-type: text/html; charset=utf-8 (converted to text)")
    assert body == "# Loop page\n\nHeading\n\nFirst & only paragraph.\n\n- one\n- two"
    assert "alert" not in out and "color" not in out


def test_redirect_is_followed(server: str, tmp_path: Path) -> None:
    out = fetch(_subset(tmp_path), server + "/redirect")
    assert f"from {server}/hello" in out
    assert "héllo" in out


def test_size_cap_truncates_with_notice(server: str, tmp_path: Path) -> None:
    out = fetch(_subset(tmp_path, fetch_max_bytes=1000), server + "/big")
    body = out.split("\n\n", 1)[1]
    assert body == "z" * 1000 + "\n[body truncated at 1000 bytes]"


@pytest.mark.parametrize("path", ["/slow", "/drip"])
def test_timeout(server: str, tmp_path: Path, path: str) -> None:
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"timed out after 0\.5s"):
        fetch(_subset(tmp_path, fetch_timeout=0.5), server + path)
    assert time.monotonic() - started < 2.5


def test_http_errors_and_refusals(server: str, tmp_path: Path) -> None:
    tools = _subset(tmp_path)
    with pytest.raises(ToolError, match="HTTP 404") as info:
        fetch(tools, server + "/missing")
    assert info.value.data["status"] == 404
    assert "no such page" in str(info.value)
    with pytest.raises(ToolError, match="image/png is not text"):
        fetch(tools, server + "/image")
    for url in ("file:///etc/passwd", "ftp://example.com/x", "gopher://h/", "javascript:alert(1)"):
        with pytest.raises(ToolError, match="only http and https"):
            fetch(tools, url)
    with pytest.raises(ToolError, match="failed") as info:
        fetch(tools, server + "/to-file")  # a redirect may not leave http(s)
    assert "root:" not in str(info.value)
    with pytest.raises(ToolError, match="no host"):
        fetch(tools, "http:///nohost")
    with pytest.raises(ToolError, match="failed"):
        fetch(tools, "http://127.0.0.1:1/")  # nothing listens on port 1
    assert all(not c.ok for c in tools.calls)


def test_private_addresses_are_refused_by_default(server: str, tmp_path: Path) -> None:
    """SSRF guard: loopback, LAN, link-local (cloud metadata) hosts are refused unless allowed;
    the check happens before connecting, so the loopback server never sees the request."""
    tools = _subset(tmp_path, fetch_allow_private=False)
    port = server.rsplit(":", 1)[1]
    for url in (
        server + "/hello",
        f"http://localhost:{port}/hello",
        f"http://[::ffff:127.0.0.1]:{port}/hello",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[::1]/",
        "http://0.0.0.0/",
    ):
        with pytest.raises(ToolError, match="loopback, private or link-local") as info:
            fetch(tools, url)
        assert "héllo" not in str(info.value)
    assert [c.ok for c in tools.calls] == [False] * 7
    assert "HTTP 200" in fetch(_subset(tmp_path, fetch_allow_private=True), server + "/hello")
