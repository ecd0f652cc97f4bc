"""Where a model spec's requests go, which key they need, and whether that server answers.

``personae doctor`` uses this to check what ``personae run`` needs before a run
fails halfway: the provider's base URL (as :class:`~personae.models.resolve.ModelResolver`
builds it), the API key variable, and one cheap request (the model list, ``GET
{base}/models``) with a short timeout. Nothing is sent but that request and the key.
"""

from __future__ import annotations

from dataclasses import dataclass

from personae.models.resolve import Endpoint

__all__ = ["Reachability", "probe"]


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
