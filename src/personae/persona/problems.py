"""Problems found while loading a cast: errors and warnings, each with a place."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["LENIENT_GROUP", "UNAVAILABLE_GROUP", "Problem", "Severity"]

Severity = Literal["error", "warning", "note"]
"""How bad a problem is: an ``error`` makes ``personae personas check`` fail; a ``note`` is
something personae reads differently from strict YAML or cannot provide where Claude Code
is silent (``check`` prints each group of notes as one line; ``--strict`` ignores them)."""

LENIENT_GROUP = (
    "read leniently, as Claude Code reads them (values with YAML special characters quoted)"
)
"""The group of the notes for frontmatter that strict YAML refuses and Claude Code reads."""
UNAVAILABLE_GROUP = "name tools personae does not provide (left out of their tools)"
"""The group of the notes for Claude Code tools personae has no counterpart of."""


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One thing wrong (or doubtful) in a persona, skill or plugin file."""

    file: Path
    """The file (or folder) the problem is in."""
    line: int | None
    """1-based line number, when the problem has one."""
    severity: Severity
    """``error`` or ``warning``."""
    message: str
    """What is wrong, in one line."""
    group: str | None = None
    """For a note: what it has in common with others (one line in ``check`` per group)."""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else str(self.file)
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view (``file`` as a string)."""
        return {
            "file": str(self.file),
            "line": self.line,
            "severity": self.severity,
            "message": self.message,
            **({"group": self.group} if self.group is not None else {}),
        }
