"""Serve the viewer with uvicorn on a loopback address only.

The socket is bound here before uvicorn starts, so a taken port is one clear
error line and the address printed is the one actually served (``--port 0``
picks a free port).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import sys
import threading
from pathlib import Path
from types import FrameType

from personae.errors import ConfigError, UsageError

__all__ = ["bind", "check_host", "serve_viewer"]


def check_host(host: str) -> str:
    """The loopback address to bind for ``host``; anything else is a UsageError."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise UsageError(
            f"{host!r} is not a loopback address; personae ui serves 127.0.0.1 only",
            field="--host",
        ) from None
    if not address.is_loopback:
        raise UsageError(
            f"{host} is not a loopback address; personae ui serves 127.0.0.1 only "
            "(it shows every prompt of the project)",
            field="--host",
        )
    return str(address)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (loopback only); a taken port is a UsageError."""
    address = check_host(host)
    if not 0 <= port <= 65535:
        raise UsageError(
            f"{port} is not a port number (0-65535; 0 picks a free one)", field="--port"
        )
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        reason = "already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        raise UsageError(f"cannot listen on {address}:{port}: {reason}", field="--port") from None
    sock.set_inheritable(True)
    return sock


def serve_viewer(root: Path, *, port: int, host: str = "127.0.0.1") -> None:
    """Serve the viewer for the project at ``root`` until interrupted."""
    if not root.is_dir():
        raise UsageError("not a folder", file=root, field="--root")
    try:
        # local import: optional extra personae[ui] (uvicorn, starlette): loads only when serving
        import uvicorn

        from personae.ui.app import create_app
    except ImportError as exc:
        raise ConfigError(
            f"personae ui needs {exc.name}; install it with: pip install 'personae[ui]'"
        ) from None
    sock = bind(host, port)
    address, real_port = sock.getsockname()[:2]
    shown = f"[{address}]" if ":" in address else address
    stopping = threading.Event()

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            stopping.set()  # open event streams end now, not at the shutdown timeout
            super().handle_exit(sig, frame)

    config = uvicorn.Config(
        create_app(root, stopping=stopping),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
        lifespan="on",
    )
    print(
        f"personae ui: http://{shown}:{real_port}/ (project {root.resolve()}; read-only; "
        "Ctrl-C stops it)",
        flush=True,
    )
    try:
        _Server(config).run(sockets=[sock])
    finally:
        sock.close()
        sys.stdout.flush()
