"""XML boundary rendering: top-level tags wrapping Markdown, escaped so nothing breaks out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

__all__ = ["SEPARATOR", "close_tag", "escape", "open_tag", "render_sections"]

SEPARATOR = "\n\n"
"""Between two sections."""


def open_tag(tag: str) -> str:
    """The opening line of a section (tag plus newline); the same string object for
    the same tag (a prompt's groups are looked up with the hashes it keeps)."""
    got = _OPEN.get(tag)
    if got is None:
        got = _held(_OPEN, tag, f"<{tag}>\n")
    return got


def close_tag(tag: str) -> str:
    """The closing line of a section (newline plus tag); the same string object for
    the same tag."""
    got = _CLOSE.get(tag)
    if got is None:
        got = _held(_CLOSE, tag, f"\n</{tag}>")
    return got


_OPEN: dict[str, str] = {}
_CLOSE: dict[str, str] = {}


def _held(lines: dict[str, str], tag: str, line: str) -> str:
    """``line`` remembered for ``tag`` (the lines of the 1,024 tags met last at most)."""
    if len(lines) >= 1024:
        lines.clear()  # rare: a process renders far more tags than profiles name
    lines[tag] = line
    return line


@lru_cache(maxsize=64)
def _pattern(tags: frozenset[str]) -> re.Pattern[str]:
    names = "|".join(sorted((re.escape(t) for t in tags), key=len, reverse=True))
    # Any opening or closing form of one of our tags, in any case, with any whitespace
    # between '<', '/', and the name: '</task >', '< / TASK>', '</task\n>' ...
    return re.compile(rf"<(?=\s*/?\s*(?:{names})(?![a-z0-9_]))", re.IGNORECASE)


def escape(text: str, tags: Iterable[str]) -> str:
    """Neutralize every opening or closing form of ``tags`` inside ``text``.

    The ``<`` of each such tag becomes ``&lt;`` so section content can never
    close (or fake) one of our sections. Text without such tags is returned
    unchanged (the same object).
    """
    tagset = frozenset(tags)
    if not tagset or "<" not in text:
        return text
    return _pattern(tagset).sub("&lt;", text)


def render_sections(parts: Sequence[tuple[str, str]]) -> str:
    """``<tag>\\ncontent\\n</tag>`` for each (tag, content), joined by a blank line."""
    return SEPARATOR.join(f"{open_tag(tag)}{content}{close_tag(tag)}" for tag, content in parts)
