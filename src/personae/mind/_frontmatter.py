"""Fast YAML frontmatter splitting for memory files.

Simple ``key: value`` headers (the common case) are parsed without YAML;
anything else goes through ``yaml.safe_load`` (libyaml when available).
"""

from __future__ import annotations

from typing import Any

import yaml

from personae.errors import FrontmatterError

__all__ = ["FrontmatterError", "split_frontmatter"]

_SPECIAL_START = tuple("[{|>&*!%@`\"'#")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def split_frontmatter(text: str) -> tuple[dict[str, Any], str, bool]:
    """Split ``text`` into (frontmatter mapping, body, had_frontmatter).

    Raises FrontmatterError for an unterminated block or malformed YAML.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return {}, text, False
    start = text.index("\n") + 1
    end = _closing(text, start)
    if end is None:
        raise FrontmatterError("frontmatter block is not closed with '---'", line=1)
    header = text[start:end]
    after = text.find("\n", end + 1)
    body = "" if after == -1 else text[after + 1 :]
    data = _parse_simple(header)
    if data is None:
        try:
            loaded = yaml.load(header, Loader=_Loader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 2 if mark is not None else None
            raise FrontmatterError("malformed YAML in frontmatter", line=line) from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise FrontmatterError("frontmatter must be a mapping", line=2)
        data = {str(k): v for k, v in loaded.items()}
    return data, body, True


def _closing(text: str, start: int) -> int | None:
    pos = start - 1  # the newline ending the opening line
    while True:
        pos = text.find("\n---", pos)
        if pos == -1:
            return None
        if text[pos + 4 : pos + 5] in ("", "\n", "\r"):
            return pos + 1
        pos += 4


_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_YAML_WORDS = frozenset(("true", "false", "null", "~", "yes", "no", "on", "off", ""))


def _parse_simple(header: str) -> dict[str, Any] | None:
    """Parse ``key: plain value`` lines; None when YAML is needed."""
    data: dict[str, Any] = {}
    for raw in header.split("\n"):
        key, sep, value = raw.partition(":")
        if not sep:
            if raw.strip():
                return None
            continue
        if not key or not _KEY_CHARS.issuperset(key) or key[0] in "-0123456789":
            return None
        value = value.strip()
        if (
            value.startswith(_SPECIAL_START)
            or ": " in value
            or " #" in value
            or value.lower() in _YAML_WORDS
            or value[0].isdigit()
            or value[0] in "+-."
        ):
            return None
        data[key] = value
    return data
