"""XML boundary rendering: top-level tags wrapping Markdown, escaped so nothing breaks out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from personae.context._lru import hold

__all__ = ["SEPARATOR", "close_tag", "escape", "open_tag", "render_sections"]

SEPARATOR = "\n\n"
"""Between two sections."""


def open_tag(tag: str) -> str:
    """The opening line of a section (tag plus newline); the same string object for
    the same tag (a prompt's groups are looked up with the hashes it keeps)."""
    got = _OPEN.get(tag)
    if got is None:
        got = hold(_OPEN, tag, f"<{tag}>\n", _TAGS_MAX)
    return got


def close_tag(tag: str) -> str:
    """The closing line of a section (newline plus tag); the same string object for
    the same tag."""
    got = _CLOSE.get(tag)
    if got is None:
        got = hold(_CLOSE, tag, f"\n</{tag}>", _TAGS_MAX)
    return got


_OPEN: dict[str, str] = {}
_CLOSE: dict[str, str] = {}
_TAGS_MAX = 1024
"""Tags whose lines are held (far more than profiles name)."""


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
