"""Problems found while loading a cast: errors and warnings, each with a place."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Problem", "Severity"]

Severity = Literal["error", "warning"]
"""How bad a problem is: an ``error`` makes ``personae personas check`` fail."""


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
        }
