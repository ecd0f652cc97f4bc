"""Load YAML fast, and find the line of any node only when an error needs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from personae.errors import ConfigError, yaml_error_line

__all__ = ["Lines", "line_of", "load_with_lines"]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Lines:
    """Path -> line map of one YAML text, built on first use."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._map: dict[tuple[str | int, ...], int] | None = None

    def _walk(self, node: yaml.Node, path: tuple[str | int, ...]) -> None:
        assert self._map is not None
        self._map[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = (*path, str(key_node.value))
                self._walk(value_node, key)
                self._map[key] = key_node.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, child in enumerate(node.value):
                self._walk(child, (*path, i))

    def get(self, path: tuple[str | int, ...]) -> int | None:
        """The line of ``path`` (1-based), if present."""
        if self._map is None:
            self._map = {}
            node = yaml.compose(self._text, Loader=_Loader)
            if node is not None:
                self._walk(node, ())
        return self._map.get(path)


def load_with_lines(text: str, file: Path | str) -> tuple[Any, Lines]:
    """Parse ``text`` (one YAML document); returns the data and its lazy line map."""
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise ConfigError(
            f"malformed YAML: {problem}", file=file, line=yaml_error_line(exc)
        ) from exc
    return data, Lines(text)


def line_of(lines: Lines, path: tuple[str | int, ...]) -> int | None:
    """The line of ``path`` or of its nearest ancestor present in the map."""
    for k in range(len(path), -1, -1):
        line = lines.get(path[:k])
        if line is not None:
            return line
    return None
