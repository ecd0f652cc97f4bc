"""Windows learned from a server's overflow error, remembered between runs.

A server that does not say its window (llama-cpp-python) states it only when it refuses
a prompt that is too long: discovery sends one such prompt, and a run whose request
overflows learns it too. Either way the window is remembered in
``<data folder>/cache/windows.json`` (``PERSONAE_HOME``, else ``~/.personae``) per
server URL and model name, so the next run against the same server and model does not
ask again. An entry is trusted for :data:`KEEP_FOR` seconds (a server restarted with
another window is asked again after that); a request that overflows rewrites it at once.
Delete the file to forget every learned window.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from personae.layout import user_data_dir

__all__ = ["KEEP_FOR", "recall", "remember", "windows_file"]

KEEP_FOR = 24 * 3600.0
"""Seconds a learned window is used without asking the server again."""


def windows_file() -> Path:
    """Where learned windows are kept."""
    return user_data_dir() / "cache" / "windows.json"


def _key(base_url: str, name: str) -> str:
    return f"{base_url.rstrip('/')} {name}"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def recall(base_url: str, name: str, *, now: float | None = None) -> tuple[int, str] | None:
    """The window learned for model ``name`` on the server at ``base_url`` and the server
    kind it was learned from, or ``None`` (never learned, or older than :data:`KEEP_FOR`)."""
    entry = _read(windows_file()).get(_key(base_url, name))
    if not isinstance(entry, dict):
        return None
    window, at, kind = entry.get("window"), entry.get("at"), entry.get("server")
    if not isinstance(window, int) or window <= 0 or not isinstance(at, int | float):
        return None
    if (time.time() if now is None else now) - at > KEEP_FOR:
        return None
    return window, str(kind or "")


def remember(base_url: str, name: str, window: int, server: str | None) -> None:
    """Keep ``window`` for model ``name`` at ``base_url`` (written atomically; a data
    folder that cannot be written keeps nothing, silently: the window is asked again)."""
    path = windows_file()
    data = _read(path)
    data[_key(base_url, name)] = {"window": window, "server": server, "at": time.time()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        return
