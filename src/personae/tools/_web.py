"""Built-in web_fetch: one HTTP(S) GET with a total timeout and a body size cap."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field

from personae.tools._html import html_to_text
from personae.tools.base import ToolContext

__all__ = ["WebFetchArgs", "web_fetch"]

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml", "+json", "+xml")
_MAX_REDIRECTS = 5


class WebFetchArgs(BaseModel):
    """Arguments of ``web_fetch``."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="An http:// or https:// URL to GET.")


def _check_url(url: str, ctx: ToolContext) -> None:
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:
        raise ctx.error(f"invalid URL {url!r}: {exc}") from exc
    if parts.scheme.lower() not in ("http", "https"):
        raise ctx.error(f"only http and https URLs can be fetched, not {url!r}")
    if not parts.hostname:
        raise ctx.error(f"URL {url!r} has no host")
    if any(ord(c) < 0x21 for c in url.strip()):
        raise ctx.error(f"URL {url!r} contains spaces or control characters")


def _is_text(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return not kind or any(t in kind for t in _TEXT_TYPES)


def _non_global(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


def _address_guard(ctx: ToolContext) -> Callable[[httpx.Request], Awaitable[None]]:
    """An httpx request hook refusing hosts that resolve to non-global addresses.

    It runs for the first request and for every redirect. (The connection
    resolves the name again, so a DNS answer that changes in between is not
    caught; this stops plain SSRF to loopback, LAN and cloud metadata.)
    """

    async def check(request: httpx.Request) -> None:
        host = request.url.host
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ctx.error(f"cannot resolve host {host!r}: {exc}", url=str(request.url)) from None
        for info in infos:
            address = str(info[4][0])
            if _non_global(address):
                raise ctx.error(
                    f"{request.url} resolves to {address}, a loopback, private or link-local "
                    "address; web_fetch only reaches public hosts (fetch_allow_private allows it)",
                    url=str(request.url),
                )

    return check


async def _get(url: str, ctx: ToolContext) -> str:
    cap = ctx.limits.fetch_max_bytes
    async with (
        httpx.AsyncClient(
            follow_redirects=True,
            max_redirects=_MAX_REDIRECTS,
            trust_env=False,
            timeout=ctx.limits.fetch_timeout,
            headers={"User-Agent": "personae-web-fetch/0.1"},
            event_hooks={
                "request": [] if ctx.limits.fetch_allow_private else [_address_guard(ctx)]
            },
        ) as client,
        client.stream("GET", url) as response,
    ):
        kept = bytearray()
        total = 0
        async for chunk in response.aiter_bytes():
            total += len(chunk)
            room = len(chunk) if cap is None else max(0, cap - len(kept))
            kept.extend(chunk[:room])
            if cap is not None and len(kept) >= cap and total > cap:
                break  # stop downloading; the rest is not kept anyway
        content_type = response.headers.get("content-type", "")
        head = f"{response.status_code} {response.reason_phrase} from {response.url}"
        if not _is_text(content_type):
            raise ctx.error(
                f"{head}: {content_type} is not text; not returned", status=response.status_code
            )
        body = bytes(kept).decode(response.encoding or "utf-8", errors="replace")
        if cap is not None and total > cap:
            body += f"\n[body truncated at {cap} bytes]"
        if "html" in content_type.lower():
            body = html_to_text(body)
            content_type += " (converted to text)"
        if response.status_code >= 400:
            raise ctx.error(f"HTTP {head}\n{body[:2000]}", status=response.status_code)
        return f"HTTP {head}\ncontent-type: {content_type or '(none)'}\n\n{body}"


async def web_fetch(args: WebFetchArgs, ctx: ToolContext) -> str:
    """GET ``url`` and return status, content type and the text body (capped)."""
    url = args.url.strip()
    _check_url(url, ctx)
    timeout = ctx.limits.fetch_timeout
    try:
        async with asyncio.timeout(timeout):
            return await _get(url, ctx)
    except TimeoutError:
        raise ctx.error(f"fetching {url} timed out after {timeout:g}s", url=url) from None
    except httpx.TooManyRedirects:
        raise ctx.error(f"more than {_MAX_REDIRECTS} redirects from {url}", url=url) from None
    except httpx.TimeoutException:
        raise ctx.error(f"fetching {url} timed out after {timeout:g}s", url=url) from None
    except httpx.HTTPError as exc:
        raise ctx.error(f"fetching {url} failed: {exc}", url=url) from exc
