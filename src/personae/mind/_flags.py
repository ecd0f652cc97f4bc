"""Deterministic cautionary flags for observe/reflect (no model involved)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from personae.security.redact import looks_like_secret

__all__ = ["cautionary_flags"]

_DESTRUCTIVE = [
    (re.compile(r"\brm\s+(-[a-zA-Z]*[rf][a-zA-Z]*\s+)+"), "destructive file removal (rm -r/-f)"),
    (re.compile(r"\bgit\s+push\b[^\n]*\s(--force\b|-f\b)"), "force push"),
    (re.compile(r"\bgit\s+reset\s+--hard\b"), "hard reset discards work"),
    (re.compile(r"\bdrop\s+(table|database|schema)\b", re.I), "drops database objects"),
    (re.compile(r"\btruncate\s+table\b", re.I), "truncates a table"),
    (re.compile(r"\bdelete\s+from\s+\w+\s*(;|$)", re.I), "DELETE without WHERE"),
    (re.compile(r"\bmkfs(\.\w+)?\b|\bdd\s+if="), "writes a raw device"),
    (re.compile(r"\bchmod\s+(-R\s+)?777\b"), "world-writable permissions"),
    (re.compile(r"\bsudo\b"), "runs with elevated privileges"),
]
_FAILURE = re.compile(r"(?i)\b(traceback|exception|error|failed|permission denied|not found)\b")
_CAUTION_TYPES = {"feedback", "caution", "warning", "rule", "correction"}


def cautionary_flags(
    text: str,
    *,
    result: str | None = None,
    memory_hits: Iterable[tuple[str, str]] = (),
    secret: bool = False,
) -> list[str]:
    """Flags for ``text`` (and a tool ``result``), plus cautionary memories (title, type).

    ``secret`` says the input held a credential (already redacted by the caller).
    """
    flags: list[str] = []
    for pattern, label in _DESTRUCTIVE:
        if pattern.search(text):
            flags.append(f"destructive: {label}")
    if secret or looks_like_secret(text):
        flags.append("secret: the input looks like it contains a credential; do not repeat it")
    if result is not None and _FAILURE.search(result[:4000]):
        flags.append("result: the tool result reports an error or failure")
    for title, mtype in memory_hits:
        if mtype in _CAUTION_TYPES:
            flags.append(f"memory: '{title}' ({mtype}) may apply; recall it before acting")
    return flags
