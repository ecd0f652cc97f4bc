"""Parsing a YAML file's text with one clear error: ``malformed YAML`` at its line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from personae.errors import UsageError

__all__ = ["load_yaml"]


def load_yaml(text: str, *, file: Path, error: type[UsageError] = UsageError) -> Any:
    """``yaml.safe_load(text)``; malformed YAML raises ``error`` naming ``file`` and the
    line of the problem (workflows, scenarios and the project config share this)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise error("malformed YAML", file=file, line=line) from None
