"""One check result, shared by ``personae doctor`` and ``personae hosts check``.

A :class:`CheckItem` names what was checked, its :data:`Level` (OK, WARN or FAIL), what
was seen, and the fix. ``hosts check`` only ever passes or fails (:meth:`CheckItem.judged`);
``doctor`` also warns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["CheckItem", "Level", "item_lines"]

Level = Literal["OK", "WARN", "FAIL"]
"""How a check came out: OK, WARN (works, with a caveat) or FAIL."""


@dataclass(frozen=True)
class CheckItem:
    """One ``doctor`` / ``hosts check`` result."""

    name: str
    level: Level
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        """Not a failure (OK or WARN)."""
        return self.level != "FAIL"

    @classmethod
    def judged(cls, name: str, ok: bool, detail: str, fix: str = "") -> CheckItem:
        """An OK item when ``ok``, else a FAIL item carrying ``fix`` (an OK item has no fix)."""
        return cls(name, "OK", detail) if ok else cls(name, "FAIL", detail, fix)


def item_lines(items: Sequence[CheckItem]) -> list[str]:
    """The text lines for ``items``: ``LEVEL name: detail``, then the fix of each not-OK item."""
    lines = []
    for item in items:
        lines.append(f"{item.level:<4} {item.name}: {item.detail}")
        if item.level != "OK" and item.fix:
            lines.append(f"     fix: {item.fix}")
    return lines
