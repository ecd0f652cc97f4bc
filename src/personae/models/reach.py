"""Where a model spec's requests go, which key they need, and whether that server answers.

``personae doctor`` uses this to check what ``personae run`` needs before a run
fails halfway: the provider's base URL (as :class:`~personae.models.resolve.ModelResolver`
builds it), the API key variable, and one cheap request (the model list, ``GET
{base}/models``) with a short timeout. Nothing is sent but that request and the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from personae.models.resolve import ModelSpec

__all__ = ["Endpoint", "Reachability", "endpoint_for", "probe", "scenario_path"]

_OPENAI_URL = "https://api.openai.com/v1"
_ANTHROPIC_URL = "https://api.anthropic.com/v1"
_OLLAMA_URL = "http://127.0.0.1:11434/v1"


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """The server a spec talks to."""

    provider: str
    """``openai``, ``anthropic``, ``ollama``, ``openai-compatible`` or ``scripted``."""
    base_url: str | None
    """Base URL requests go to (``None``: scripted, served on a fresh loopback port per run;
    or openai-compatible without a URL)."""
    key_env: str | None
    """Environment variable holding the API key (``None``: no key used)."""
    key_required: bool
    """Runs fail without the key."""

    @property
    def key(self) -> str | None:
        """The key from the environment (``None`` when unset or blank)."""
        value = os.environ.get(self.key_env) if self.key_env else None
        return value if value and value.strip() else None


def endpoint_for(spec: ModelSpec, *, config_base_url: str | None = None) -> Endpoint:
    """The endpoint ``spec`` resolves to, by the rules ModelResolver applies."""
    if spec.provider == "scripted":
        return Endpoint(provider="scripted", base_url=None, key_env=None, key_required=False)
    if spec.provider == "anthropic":
        url = os.environ.get("ANTHROPIC_BASE_URL") or _ANTHROPIC_URL
        return Endpoint(
            provider="anthropic",
            base_url=url.rstrip("/") + ("" if url.rstrip("/").endswith("/v1") else "/v1"),
            key_env="ANTHROPIC_API_KEY",
            key_required=True,
        )
    base = os.environ.get("OPENAI_BASE_URL") or config_base_url
    if spec.provider == "ollama":
        base = os.environ.get("OLLAMA_BASE_URL") or base or _OLLAMA_URL
        return Endpoint(provider="ollama", base_url=base, key_env=None, key_required=False)
    return Endpoint(
        provider=spec.provider,
        base_url=base or (_OPENAI_URL if spec.provider == "openai" else None),
        key_env="OPENAI_API_KEY",
        key_required=base is None,  # a local server (base URL set) takes any key
    )


@dataclass(frozen=True, kw_only=True)
class Reachability:
    """The answer to one probe."""

    ok: bool
    """The server answered and did not refuse the key."""
    url: str
    """The URL asked."""
    detail: str
    """What happened, for one doctor line."""


def probe(endpoint: Endpoint, *, timeout: float = 3.0) -> Reachability:
    """``GET {base}/models`` with the key; ``timeout`` seconds at most for connect and read.

    200 is reachable; 401/403 is reachable with a refused key (not ok); 404 is a server
    without a model list (ok: it answered); anything else, or no answer, is not ok.
    """
    # local import: httpx loads only when a provider is probed
    import httpx

    if endpoint.base_url is None:
        raise ValueError(f"{endpoint.provider} has no fixed URL to probe")
    url = endpoint.base_url.rstrip("/") + "/models"
    headers: dict[str, str] = {}
    key = endpoint.key
    if endpoint.provider == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
        if key:
            headers["x-api-key"] = key
    elif key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        with httpx.Client(timeout=timeout, trust_env=True) as client:
            response = client.get(url, headers=headers)
    except httpx.TimeoutException:
        return Reachability(ok=False, url=url, detail=f"no answer from {url} in {timeout:g} s")
    except httpx.HTTPError as exc:
        reason = str(exc) or type(exc).__name__
        return Reachability(ok=False, url=url, detail=f"cannot connect to {url}: {reason}")
    code = response.status_code
    if code == 200:
        return Reachability(ok=True, url=url, detail=f"{url} answered 200")
    if code in (401, 403):
        return Reachability(ok=False, url=url, detail=f"{url} refused the key (HTTP {code})")
    if code == 404:
        return Reachability(ok=True, url=url, detail=f"{url} answered (HTTP 404: no model list)")
    return Reachability(ok=False, url=url, detail=f"{url} answered HTTP {code}")


def scenario_path(spec: ModelSpec) -> Path:
    """The scenario file of a ``scripted:`` spec."""
    return Path(spec.name).expanduser()
