"""``context.memorySnapshot``: a small summary of the project's mind memory catalog.

Counts of memory files by type and one line per file (name, type, its
one-line description), never a file's body. Descriptions that look like
secrets, or files whose names say they hold one, are withheld; the whole text
stays under :data:`MAX_CHARS`. Read only: nothing in the memory folder or the
mind's index is changed.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from personae.errors import PersonaeError
from personae.layout import Layout
from personae.mind.memory import INDEX_NAME, MemoryDir, parse_memory
from personae.security.policy import is_secret_name, looks_like_secret, redact_secrets
from personae.security.redact import MARKER_PREFIX

__all__ = ["MAX_CHARS", "MAX_LISTED", "memory_dir_of", "memory_snapshot"]

MAX_CHARS = 2000
"""Longest snapshot text."""
MAX_LISTED = 20
"""Most files listed by name."""
_MAX_SCANNED = 500
_MAX_DESCRIPTION = 120
_TYPE = re.compile(r"[^a-z0-9_-]+")


def memory_dir_of(root: Path) -> Path:
    """The memory folder of the project ``root`` belongs to (the mind server's default:
    ``.personae/memory``)."""
    return Layout.find(root).memory


def _clean_type(value: str) -> str:
    return _TYPE.sub("-", value.lower()).strip("-")[:32] or "unknown"


def _description(name: str, text: str) -> str:
    one = " ".join(text.split())
    if is_secret_name(name.removesuffix(".md")) or looks_like_secret(one) or MARKER_PREFIX in one:
        return "(description withheld: may hold a secret)"
    one = str(redact_secrets(one))
    return one if len(one) <= _MAX_DESCRIPTION else one[: _MAX_DESCRIPTION - 1] + "…"


def memory_snapshot(root: Path) -> str | None:
    """The summary for the project at ``root``, or ``None`` without a memory folder."""
    folder = memory_dir_of(root)
    if not folder.is_dir():
        return None
    memory = MemoryDir(folder)
    names = sorted(n for n in memory.scan() if n != INDEX_NAME)
    counts: Counter[str] = Counter()
    listed: list[str] = []
    for name in names[:_MAX_SCANNED]:
        try:
            entry = parse_memory(name, memory.read(name))
        except PersonaeError:
            counts["unreadable"] += 1
            continue
        kind = _clean_type(entry.type)
        counts[kind] += 1
        if len(listed) < MAX_LISTED:
            listed.append(f"- {name} [{kind}]: {_description(name, entry.description)}")
    if len(names) > _MAX_SCANNED:
        counts["not scanned"] = len(names) - _MAX_SCANNED
    by_type = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
    lines = [f"Memory catalog (.personae/memory): {len(names)} file(s); by type: {by_type}."]
    if listed:
        more = len(names) - len(listed)
        lines.append("Files (name [type]: description; bodies not included):")
        lines.extend(listed)
        if more > 0:
            lines.append(f"... and {more} more")
    text = "\n".join(lines)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"
