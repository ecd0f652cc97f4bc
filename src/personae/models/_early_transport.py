"""The HTTP transport that hands the engine the answer of a request sent early.

See :mod:`personae.models.early`. Loaded with the OpenAI SDK (it wraps the SDK's
``httpx2`` transport).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2

from personae.models.early import EarlyRequest, Item

__all__ = ["EarlyTransport"]

_HOP_HEADERS = frozenset({"transfer-encoding", "connection", "keep-alive"})
"""Headers of the connection itself (its chunks are already joined): not passed on."""


class _EarlyStream(httpx2.AsyncByteStream):
    """The early answer's body, as its bytes arrive."""

    def __init__(self, early: EarlyRequest, items: asyncio.Queue[Item]) -> None:
        self._early = early
        self._items = items

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            kind, value = await self._items.get()
            if kind == "data":
                yield value
            elif kind == "error":
                raise httpx2.ReadError(f"the model server's answer broke off: {value}")
            else:
                return

    async def aclose(self) -> None:
        self._early.close()


class EarlyTransport(httpx2.AsyncBaseTransport):
    """``inner`` for every request, except the one that was sent early: its answer."""

    def __init__(self, early: EarlyRequest, inner: httpx2.AsyncBaseTransport) -> None:
        self._early: EarlyRequest | None = early
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        early, self._early = self._early, None  # only the first request may be it
        if early is not None:
            items = None
            if early.matches(request.method, str(request.url), request.content):
                items = early.claim()
            if items is None:
                early.discard()
            else:
                try:
                    kind, value = await items.get()
                except BaseException:  # cancelled (a timeout, the deadline): hang up
                    early.close()
                    raise
                if kind == "head":
                    status, headers = value
                    kept = [(k, v) for k, v in headers if k.lower() not in _HOP_HEADERS]
                    return httpx2.Response(status, headers=kept, request=request,
                                           stream=_EarlyStream(early, items))  # fmt: skip
                early.close()  # it never got an answer: send it as usual
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        if self._early is not None:
            self._early.discard()
            self._early = None
        await self._inner.aclose()
