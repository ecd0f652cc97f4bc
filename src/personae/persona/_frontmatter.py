"""Split a Markdown file into YAML frontmatter and body, keeping line numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from personae.errors import FrontmatterError

__all__ = ["MAX_DEPTH", "MAX_VALUES", "Document", "FrontmatterError", "parse_document"]

_OFFSET = 2  # file line (1-based) of the first frontmatter line
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available
MAX_VALUES = 100_000
"""Most YAML values a frontmatter may hold, counted with aliases expanded."""
MAX_DEPTH = 50
"""Deepest nesting of lists and mappings a frontmatter may have."""


@dataclass
class Document:
    """A parsed Markdown + frontmatter file."""

    meta: dict[str, Any]
    """The frontmatter mapping."""
    body: str
    """Everything after the closing ``---`` (verbatim, leading blank lines removed)."""
    key_lines: dict[str, int] = field(default_factory=dict)
    """1-based file line of each top-level frontmatter key."""
    repaired: FrontmatterError | None = None
    """Set when strict YAML failed and the lenient reading (quoting plain values) was used."""
    comment_cuts: dict[str, str] = field(default_factory=dict)
    """Top-level plain values an unquoted `` #`` cut short (key -> the full text as written)."""

    def line_of(self, key: str) -> int:
        """The line of ``key`` (or of the frontmatter start when absent)."""
        return self.key_lines.get(key, 1)


# Claude Code's lenient pass (read from its 2.1 bundle): when strict YAML fails,
# every top-level ``key: value`` line whose key is letters, ``_`` or ``-`` and
# whose value holds one of these characters (or ``: ``) is double-quoted, unless
# the value is already quoted or a valid flow list; leading tabs become two
# spaces each; the result is parsed once more.
_CC_KEY = re.compile(r"^(?P<key>[a-zA-Z_-]+):\s+(?P<value>\S.*)$")
_CC_SPECIAL = re.compile(r"[{}\[\]*&#!|>%@`]|: ")
_LEADING_TABS = re.compile(r"^\t+", re.MULTILINE)
_HASH_COMMENT = re.compile(r"[ \t]#")


def _quote_like_claude_code(yaml_text: str) -> str:
    """Claude Code's fallback for frontmatter that strict YAML refuses (see above)."""
    out = []
    for raw in yaml_text.split("\n"):
        match = _CC_KEY.fullmatch(raw)
        if match is None:
            out.append(raw)
            continue
        value = match.group("value")
        quoted = len(value) > 1 and value[0] == value[-1] and value[0] in "\"'"
        if quoted or (value.startswith("[") and value.endswith("]") and _is_flow_list(value)):
            out.append(raw)
        elif _CC_SPECIAL.search(value):
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            out.append(f'{match.group("key")}: "{escaped}"')
        else:
            out.append(raw)
    return _LEADING_TABS.sub(lambda m: "  " * len(m.group(0)), "\n".join(out))


def _is_flow_list(value: str) -> bool:
    try:
        return isinstance(yaml.load(value, Loader=_LOADER), list)
    except yaml.YAMLError:
        return False


def _comment_cuts(yaml_text: str, meta: dict[str, Any]) -> dict[str, str]:
    """Top-level one-line plain values that an unquoted `` #`` cut short, as written in full.

    YAML (and so Claude Code) reads ``description: Use for C# code #fast`` as
    ``Use for C# code``; the returned map holds ``{"description": "Use for C# code #fast"}``.
    """
    cuts: dict[str, str] = {}
    for raw in yaml_text.split("\n"):
        match = _CC_KEY.fullmatch(raw.rstrip())
        if match is None:
            continue
        key, value = match.group("key"), match.group("value")
        if value[0] in "\"'[{|>&*!#" or not _HASH_COMMENT.search(value):
            continue
        kept = meta.get(key)
        if isinstance(kept, str) and kept != value and value.startswith(kept):
            cuts[key] = value
    return cuts


def parse_document(text: str, *, lenient: bool = False) -> Document:
    """Parse ``text``; raises :class:`FrontmatterError` with the file line on bad YAML.

    With ``lenient``, frontmatter that is not valid YAML is read again the way
    Claude Code reads it (top-level values with YAML special characters
    double-quoted, leading tabs made spaces); the document then carries the
    original error in ``repaired``.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise FrontmatterError(
            "no YAML frontmatter (the file must start with '---')", 1, missing=True
        )
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        raise FrontmatterError("frontmatter is not closed (no second '---' line)", 1)
    yaml_text = "".join(lines[1:end])
    repaired: FrontmatterError | None = None
    try:
        node, data = _load(yaml_text)
    except FrontmatterError as exc:
        if not lenient or exc.unsafe:
            raise
        try:
            node, data = _load(_quote_like_claude_code(yaml_text))
        except FrontmatterError:
            raise exc from None
        repaired = exc
    if data is None:
        data = {}
    offset = _OFFSET
    if not isinstance(data, dict):
        raise FrontmatterError("frontmatter must be a YAML mapping of keys to values", offset)
    key_lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key_lines[str(key_node.value)] = key_node.start_mark.line + offset
    body = "".join(lines[end + 1 :]).lstrip("\r\n")
    meta = {str(k): v for k, v in data.items()}
    cuts = _comment_cuts(yaml_text, meta) if repaired is None else {}
    return Document(meta=meta, body=body, key_lines=key_lines, repaired=repaired, comment_cuts=cuts)


def _load(yaml_text: str) -> tuple[yaml.Node | None, Any]:
    # One pass: compose the node tree (for key lines), then build values from it.
    loader = _LOADER(yaml_text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_shape(node)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + _OFFSET if mark is not None else 1
        problem = getattr(exc, "problem", None) or "syntax error"
        raise FrontmatterError(f"malformed YAML frontmatter: {problem}", line) from exc
    finally:
        loader.dispose()
    return node, data


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_shape(root: yaml.Node) -> None:
    """Refuse recursive aliases, alias bombs and deep nesting before building values.

    Such values load cheaply (aliases share objects) but blow up whoever later
    walks them (JSON output, export, pydantic). Iterative, so it cannot overflow.
    """
    done: dict[int, tuple[int, int]] = {}  # id(node) -> (values with aliases expanded, depth)
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        line = node.start_mark.line + _OFFSET
        if finished:
            kids = [done[id(k)] for k in _children(node)]
            size = 1 + sum(k[0] for k in kids)
            depth = 1 + max((k[1] for k in kids), default=0)
            if size > MAX_VALUES:
                raise FrontmatterError(
                    f"frontmatter too large: more than {MAX_VALUES} values (YAML aliases expanded)",
                    line,
                    unsafe=True,
                )
            if depth > MAX_DEPTH:
                raise FrontmatterError(
                    f"frontmatter nested too deeply (more than {MAX_DEPTH} levels)",
                    line,
                    unsafe=True,
                )
            on_path.discard(key)
            done[key] = (size, depth)
            continue
        if key in done:
            continue
        on_path.add(key)
        stack.append((node, True))
        for kid in _children(node):
            if id(kid) in on_path:
                raise FrontmatterError(
                    "frontmatter holds a recursive YAML alias (a value that contains itself)",
                    kid.start_mark.line + _OFFSET,
                    unsafe=True,
                )
            if id(kid) not in done:
                stack.append((kid, False))
