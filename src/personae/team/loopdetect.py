"""Loop detection in code: the same (persona, tool, canonical arguments) within a window."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

__all__ = ["LoopDetector", "canonical_call"]


def canonical_call(persona: str, tool: str, args: dict[str, Any]) -> str:
    """A stable key for a call: arguments serialized with sorted keys, no whitespace."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)
    return f"{persona}\x1f{tool}\x1f{canonical}"


class LoopDetector:
    """Remembers the last ``window`` calls; a call already among them is a loop.

    Whatever the model says about its progress, a repeated identical call
    within the window is reported as a loop.
    """

    def __init__(self, window: int = 6) -> None:
        if window < 1:
            raise ValueError("window must be at least 1")
        self.window = window
        self._recent: deque[str] = deque(maxlen=window)
        self.detections = 0
        """How many repeated calls were seen."""

    def observe(self, persona: str, tool: str, args: dict[str, Any]) -> bool:
        """Record a call; True when it repeats one in the window."""
        key = canonical_call(persona, tool, args)
        repeated = key in self._recent
        self._recent.append(key)
        if repeated:
            self.detections += 1
        return repeated

    def reset(self) -> None:
        """Forget the window (detections are kept)."""
        self._recent.clear()
