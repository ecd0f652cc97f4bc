"""Load YAML keeping the line of every node, so errors can name ``file:line``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from personae.errors import ConfigError

__all__ = ["Lines", "load_with_lines"]

Lines = dict[tuple[str | int, ...], int]


def _walk(node: yaml.Node, path: tuple[str | int, ...], lines: Lines) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = yaml.safe_load(yaml.serialize(key_node))
            out[key] = _walk(value_node, (*path, str(key)), lines)
            lines[(*path, str(key))] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_walk(child, (*path, i), lines) for i, child in enumerate(node.value)]
    return yaml.safe_load(yaml.serialize(node))


def load_with_lines(text: str, file: Path | str) -> tuple[Any, Lines]:
    """Parse ``text`` (one YAML document); returns the data and a path -> line map."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise ConfigError(f"malformed YAML: {problem}", file=file, line=line) from exc
    lines: Lines = {}
    if node is None:
        return None, lines
    return _walk(node, (), lines), lines


def line_of(lines: Lines, path: tuple[str | int, ...]) -> int | None:
    """The line of ``path`` or of its nearest ancestor present in the map."""
    for k in range(len(path), -1, -1):
        if path[:k] in lines:
            return lines[path[:k]]
    return None
