"""Default ports of the local servers, and what a command does when its default is busy.

``personae ui`` and ``personae serve --http`` have distinct defaults so both can run at
once. A port the user gave is used or refused (one line); a default that is busy gives
way to the next free one, and the command says which it took.
"""

from __future__ import annotations

import socket
import sys

from personae.errors import UsageError

__all__ = ["MIND_HTTP_PORT", "VIEWER_PORT", "pick_port", "port_taken"]

VIEWER_PORT = 8765
"""``personae ui``'s default port."""
MIND_HTTP_PORT = 8766
"""``personae serve --http``'s default port."""
_TRIES = 20
"""Ports tried from a busy default upwards."""


def port_taken(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on (``None``: it is free, or the host or port
    is one the server itself will refuse with its own message)."""
    if not 1 <= port <= 65535:
        return None
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError:
        return None
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def pick_port(host: str, port: int | None, *, default: int, command: str) -> int:
    """``port`` when given; else ``default``, or the next free port above it when it is
    busy (said on stderr, naming ``command`` and the port it took)."""
    if port is not None:
        return port
    for candidate in range(default, default + _TRIES):
        if port_taken(host, candidate) is None:
            if candidate != default:
                print(
                    f"personae: port {default} is busy; {command} took port {candidate} "
                    "(--port N picks one)",
                    file=sys.stderr,
                    flush=True,
                )
            return candidate
    raise UsageError(
        f"ports {default}-{default + _TRIES - 1} on {host} are all busy; pass --port N "
        "(0 picks a free one)",
        field="--port",
    )
