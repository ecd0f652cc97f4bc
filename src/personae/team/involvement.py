"""Involvement level from the task type only (never from earlier failures)."""

from __future__ import annotations

import re

from personae.team.signals import InvolvementLevel

__all__ = ["involvement_for"]

_THOROUGH = re.compile(
    r"\b(test|tests|testing|verify|verifies|verification|validate|check that|make sure|"
    r"ensure|prove|assert)\b",
    re.IGNORECASE,
)
_INFO = re.compile(
    r"^\s*(what|who|when|where|which|why|how (?:does|do|is|are|many|much)|explain|describe|"
    r"summari[sz]e|list|show|tell me|find out|look up|read)\b",
    re.IGNORECASE,
)
_CHANGE = re.compile(
    r"\b(write|create|edit|change|modify|fix|add|remove|delete|rename|refactor|implement|"
    r"update|install|run)\b",
    re.IGNORECASE,
)


def involvement_for(task: str) -> InvolvementLevel:
    """``thorough`` for explicit test/verify requests, ``minimal`` for information-only
    requests, ``standard`` otherwise. Depends on the task text alone."""
    if _THOROUGH.search(task):
        return InvolvementLevel.THOROUGH
    if _INFO.search(task) and not _CHANGE.search(task):
        return InvolvementLevel.MINIMAL
    return InvolvementLevel.STANDARD
