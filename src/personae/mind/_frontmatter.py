"""Fast YAML frontmatter splitting for memory files.

Simple ``key: value`` headers (the common case) are parsed without YAML;
anything else goes through ``yaml.safe_load`` (libyaml when available).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

__all__ = ["FrontmatterError", "split_frontmatter"]

_SIMPLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*):[ \t]*(.*?)[ \t]*$")
_SPECIAL_START = tuple("[{|>&*!%@`\"'#")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class FrontmatterError(ValueError):
    """The frontmatter block is not valid YAML mapping."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


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
    pos = start
    while True:
        if text.startswith("---", pos) and text[pos + 3 : pos + 4] in ("", "\n", "\r"):
            return pos
        nxt = text.find("\n", pos)
        if nxt == -1:
            return None
        pos = nxt + 1


def _parse_simple(header: str) -> dict[str, Any] | None:
    """Parse ``key: plain value`` lines; None when YAML is needed."""
    data: dict[str, Any] = {}
    for raw in header.splitlines():
        if not raw.strip():
            continue
        match = _SIMPLE.match(raw)
        if match is None:
            return None
        value = match.group(2)
        if value.startswith(_SPECIAL_START) or ": " in value or " #" in value:
            return None
        if value.lower() in ("true", "false", "null", "~", "yes", "no", "on", "off", ""):
            return None
        if value[:1].isdigit() or value[:1] in "+-.":
            return None
        data[match.group(1)] = value
    return data
