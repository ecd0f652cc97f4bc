"""HTTP clients for model providers that share the process's one TLS context.

A provider left to itself builds an HTTP client, and the client a TLS context
that loads the system's certificate bundle: 45 to 70 ms of CPU for every model
built, even one that talks plain HTTP to a loopback server. The client here is
the provider's own default (pydantic-ai's timeouts, connection limits and user
agent) with one TLS context built once per process, the same way the client would
build it (``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` honoured).

A client given its own transport no longer reads proxy settings from the
environment, so when a proxy variable is set this returns ``None`` and the
provider builds its own client, proxies and all.
"""

from __future__ import annotations

import functools
import ssl
import urllib.request
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx2

__all__ = ["shared_tls_client", "tls_transport"]


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The process's TLS context, built as the HTTP client builds its own."""
    # local import: the HTTP stack loads with the first model, not with the CLI
    import httpx2

    return httpx2.create_ssl_context()


def tls_transport() -> httpx2.AsyncHTTPTransport:
    """A new transport on the process's TLS context, with pydantic-ai's documented pool
    (1,000 connections, 100 kept alive) and no proxy."""
    # local import: the HTTP stack loads with the first model, not with the CLI
    import httpx2

    limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
    return httpx2.AsyncHTTPTransport(verify=_tls_context(), limits=limits)


def shared_tls_client() -> httpx2.AsyncClient | None:
    """A new provider HTTP client on the process's TLS context; ``None`` when a proxy
    variable (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``) is set."""
    if {"http", "https", "all"} & set(urllib.request.getproxies()):
        return None
    # local import: the HTTP stack loads with the first model, not with the CLI
    from pydantic_ai.models import create_async_httpx2_client

    return create_async_httpx2_client(transport=tls_transport())
