"""A run's first model request, sent before the engine (pydantic-ai, the OpenAI SDK) loads.

Loading pydantic-ai and the OpenAI SDK costs about 1.2 s of CPU, most of a run's
start-up, and the first request (the Manager's plan) does not need them to be sent:
its body is known once the turn's context is built. :meth:`EarlyRequest.send` sends
that body to the server at once over a plain HTTP connection, and a thread reads the
answer as it streams back; meanwhile the engine loads and runs as always. When the
engine then makes that very request (same URL, same JSON body), the transport of
:func:`personae.models.quirks.local_chat_model` answers it with the early request's
answer instead of sending it again, so pydantic-ai reads, streams, records and
bounds it like any other. Any other request goes out as usual, and an early request
nobody claims is hung up on (:meth:`EarlyRequest.discard`): the server stops.

Only for a server the user runs, over plain HTTP, with no proxy set for it: the same
connection the SDK would open.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
import urllib.request
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = ["EarlyRequest", "Item"]

Item = tuple[str, Any]
"""What the reader thread hands over: ``("head", (status, headers))``, ``("data",
bytes)``, ``("end", None)`` or ``("error", exception)``."""

CONNECT_TIMEOUT = 5.0
"""Seconds to connect and send (the SDK's connect timeout)."""


def _proxied(host: str) -> bool:
    """A proxy from the environment would carry requests to ``host`` (then the SDK's
    connection is not this one: no early request)."""
    proxies = urllib.request.getproxies_environment()
    if not any(k in proxies for k in ("http", "all")):
        return False
    return not urllib.request.proxy_bypass(host)


class EarlyRequest:
    """One chat request sent ahead of the engine; its answer waits to be claimed."""

    def __init__(self, url: str, body: dict[str, Any], conn: http.client.HTTPConnection,
                 loop: asyncio.AbstractEventLoop) -> None:  # fmt: skip
        self.url = url
        """Where it was sent (``http://host:port/v1/chat/completions``)."""
        self.body = body
        """The JSON body sent."""
        self.state: Literal["sent", "claimed", "discarded"] = "sent"
        """``sent``; ``claimed`` by the engine's identical request; ``discarded``."""
        self._conn = conn
        self._loop = loop
        self._items: asyncio.Queue[Item] = asyncio.Queue()
        self._reader = threading.Thread(target=self._read, name="personae-early", daemon=True)
        self._reader.start()

    @classmethod
    def send(cls, base_url: str, body: dict[str, Any], *, key: str | None) -> EarlyRequest | None:
        """POST ``body`` to ``base_url``/chat/completions now; ``None`` when it cannot go
        the way the SDK's request would (not plain HTTP, a proxy, no connection): the
        engine then sends it as usual. Call from the event loop that will claim it."""
        try:
            loop = asyncio.get_running_loop()  # the loop whose engine will claim it
        except RuntimeError:
            return None
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme != "http" or not parts.hostname or _proxied(parts.hostname):
            return None
        url = f"{base_url.rstrip('/')}/chat/completions"
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "Content-Length": str(len(data))}  # fmt: skip
        if key:
            headers["Authorization"] = f"Bearer {key}"
        conn = http.client.HTTPConnection(parts.hostname, parts.port or 80,
                                          timeout=CONNECT_TIMEOUT)  # fmt: skip
        try:
            conn.request("POST", f"{parts.path}/chat/completions", body=data, headers=headers)
            if conn.sock is not None:
                conn.sock.settimeout(None)  # the answer takes as long as the model takes
        except OSError:
            conn.close()
            return None
        return cls(url, body, conn, loop)

    def matches(self, method: str, url: str, content: bytes) -> bool:
        """``method url content`` is the request that was sent early."""
        if method != "POST" or url.rstrip("/") != self.url:
            return False
        try:
            return bool(json.loads(content) == self.body)
        except ValueError:
            return False

    def claim(self) -> asyncio.Queue[Item] | None:
        """The answer's items, for the one request that may take them (``None``: already
        claimed or discarded, or another event loop asks)."""
        try:
            same_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            same_loop = False
        if self.state != "sent" or not same_loop:
            return None
        self.state = "claimed"
        return self._items

    def discard(self) -> None:
        """Hang up (a streaming server then stops generating); nobody will read the answer."""
        if self.state == "sent":
            self.state = "discarded"
        self.close()

    def close(self) -> None:
        """Close the connection (the reader thread then ends)."""
        sock = self._conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)
        self._conn.close()

    def _put(self, item: Item) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._items.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody will read
            return False
        return True

    def _read(self) -> None:
        """The reader thread: the answer's status, headers and bytes, as they arrive."""
        try:
            reply = self._conn.getresponse()
            if not self._put(("head", (reply.status, reply.getheaders()))):
                return
            while chunk := reply.read1(65536):
                if not self._put(("data", chunk)):
                    return
            self._put(("end", None))
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self._put(("error", exc))
        finally:
            self._conn.close()
