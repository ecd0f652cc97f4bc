"""What a model server says about itself: which server it is and the model's window.

Asked once per server and model (:func:`discover`), with short timeouts, only of
servers personae talks to through a base URL:

- llama.cpp's ``llama-server``: ``GET /props`` (``default_generation_settings.n_ctx``);
- vLLM: ``GET /v1/models`` (``max_model_len`` of the model);
- Ollama: ``POST /api/show`` (``<arch>.context_length``, or ``num_ctx`` when set);
- llama-cpp-python's server tells nothing (``/v1/models`` lists ids, ``owned_by: me``):
  its window is read from the error a prompt longer than any window gets
  ("Requested tokens (N) exceed context window of W"). That request is refused before
  the model reads a token; it is only sent to a server on this machine or the local
  network.

:func:`overflow_window` reads a window from any server's overflow error, so a run
that overflows names the window and the fix.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = [
    "OVERFLOW_SOURCE",
    "SERVER_KINDS",
    "ServerFacts",
    "ServerKind",
    "discover",
    "is_local_url",
    "overflow_window",
]

ServerKind = Literal["llama.cpp", "llama-cpp-python", "vllm", "ollama", "openai", "scripted"]
"""Servers personae knows the habits of."""
SERVER_KINDS: tuple[str, ...] = (
    "llama.cpp", "llama-cpp-python", "vllm", "ollama", "openai", "scripted",
)  # fmt: skip
"""Every known server kind (config ``server:`` values)."""

_OVERFLOW = (
    re.compile(r"exceed context window of (\d+)"),  # llama-cpp-python
    re.compile(r"maximum context length is (\d+)"),  # vLLM, OpenAI
    re.compile(r"context (?:size|length|window)[^\d]{0,40}?(\d{3,7})", re.IGNORECASE),
    re.compile(r"n_ctx(?:_slot)?\s*[=:]\s*(\d+)"),  # llama.cpp's server
)

OVERFLOW_SOURCE = "the server's overflow error"
"""Where a window read from an overflow error came from (for messages)."""

PROBE_TOKENS = 1_100_000
"""Words in the overflow probe: more than any local model's window, so a server refuses it
before reading it (the request never reaches the model)."""
PROBE_TIMEOUT = 30.0
"""Seconds the overflow probe may take: the server reads (tokenizes) the whole prompt
before refusing it, about 3 s for llama-cpp-python on a quiet machine and over 10 s on a
busy one. It is sent once; the window it tells is remembered
(:mod:`personae.models.learned`)."""


@dataclass(frozen=True, kw_only=True)
class ServerFacts:
    """What discovery learned (each field ``None`` when the server did not tell)."""

    kind: ServerKind | None
    """Which server answers."""
    window: int | None
    """The model's context window on that server, in tokens."""
    source: str
    """Where the window came from, for messages (``/props``, ``overflow error`` ...)."""


def overflow_window(message: str) -> int | None:
    """The context window a server's "too long" error states, else ``None``."""
    for pattern in _OVERFLOW:
        found = pattern.search(message)
        if found:
            return int(found.group(1))
    return None


def is_local_url(url: str) -> bool:
    """``url`` points at this machine or a private network (a server the user runs)."""
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def _root(base_url: str) -> str:
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


def _get_json(client: Any, method: str, url: str, **kwargs: Any) -> Any:
    """The JSON answer of one request, ``None`` on any failure."""
    try:
        response = client.request(method, url, **kwargs)
        return response.json() if response.status_code == 200 else None
    except Exception:  # no answer, not JSON: the server just does not tell
        return None


def _ollama_window(show: dict[str, Any]) -> int | None:
    for line in str(show.get("parameters") or "").splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "num_ctx" and value.strip().isdigit():
            return int(value.strip())
    info = show.get("model_info") or {}
    for key, value in info.items():
        if str(key).endswith(".context_length") and isinstance(value, int):
            return value
    return None


def _listed(models: Any, name: str) -> dict[str, Any] | None:
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list):
        return None
    rows = [m for m in data if isinstance(m, dict)]
    for row in rows:
        if row.get("id") == name:
            return row
    return rows[0] if len(rows) == 1 else None


def _probe_overflow(client: Any, base_url: str, name: str, headers: dict[str, str]) -> int | None:
    """The window stated by the error a prompt longer than any window gets."""
    body = {
        "model": name,
        "messages": [{"role": "user", "content": "a " * PROBE_TOKENS}],
        "max_tokens": 1,
    }
    try:
        response = client.post(f"{base_url.rstrip('/')}/chat/completions", json=body,
                               headers=headers)  # fmt: skip
    except Exception:
        return None
    if response.status_code < 400:
        return None
    return overflow_window(response.text)


def discover(
    base_url: str, name: str, *, key: str | None = None, timeout: float = 3.0, probe: bool = True
) -> ServerFacts:
    """Ask the server at ``base_url`` which server it is and the window of model ``name``.

    ``probe``: when the server tells no window and runs on this machine or the local
    network, read the window from its answer to a too-long prompt.
    """
    # local import: httpx loads only when a server is asked
    import httpx

    root = _root(base_url)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(timeout=timeout, trust_env=False, headers=headers) as client:
        props = _get_json(client, "GET", f"{root}/props")
        if isinstance(props, dict):
            settings = props.get("default_generation_settings") or {}
            n_ctx = settings.get("n_ctx") or props.get("n_ctx")
            if isinstance(n_ctx, int) and n_ctx > 0:
                return ServerFacts(kind="llama.cpp", window=n_ctx, source="the server's /props")
        models = _get_json(client, "GET", f"{base_url.rstrip('/')}/models")
        row = _listed(models, name)
        if row is not None and isinstance(row.get("max_model_len"), int):
            return ServerFacts(kind="vllm", window=row["max_model_len"],
                               source="the server's /v1/models")  # fmt: skip
        owner = str(row.get("owned_by", "")) if row is not None else ""
        if owner == "scripted":  # personae's scripted server, imitating no other
            return ServerFacts(kind="scripted", window=None, source="")
        kind: ServerKind | None = "llama-cpp-python" if owner == "me" else None
        if kind is None:
            show = _get_json(client, "POST", f"{root}/api/show", json={"model": name})
            if isinstance(show, dict) and ("model_info" in show or "parameters" in show):
                window = _ollama_window(show)
                return ServerFacts(kind="ollama", window=window, source="the server's /api/show")
        if probe and is_local_url(base_url) and models is not None:
            probe_timeout = httpx.Timeout(max(PROBE_TIMEOUT, timeout), connect=timeout)
            with httpx.Client(timeout=probe_timeout, trust_env=False) as slow:
                window = _probe_overflow(slow, base_url, name, headers)
            if window is not None:
                return ServerFacts(kind=kind, window=window,
                                   source=OVERFLOW_SOURCE)  # fmt: skip
        return ServerFacts(kind=kind, window=None, source="")
