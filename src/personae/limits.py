"""Every default limit of personae, written once.

Settings (``PERSONAE_*``), CLI option defaults and help texts, the team loop
and the handover child runner all read their defaults from :data:`DEFAULTS`,
so a default changed here changes everywhere at once. This module imports
nothing of personae (every layer may use it).

>>> DEFAULTS.max_retries, DEFAULTS.budget_share, DEFAULTS.handover_timeout
(2, 0.3, 300.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ARG_KEEP_CHARS", "DEFAULTS", "Defaults", "cut_strings"]


@dataclass(frozen=True, kw_only=True)
class Defaults:
    """Default limits of a run, a team and a handover child."""

    max_retries: int = 2
    """Corrections per subtask before its budget is exhausted (``--max-retries``)."""
    budget_share: float = 0.30
    """Share of the model's context window the assembled context may use."""
    handover_timeout: float = 300.0
    """Seconds a handover child run (one attempt) may take before it is killed."""
    handover_retries: int = 2
    """Retries of a failed handover child after its first attempt."""
    handover_backoff: float = 1.0
    """Seconds before the first handover retry."""
    handover_backoff_factor: float = 2.0
    """Each later handover retry waits this many times longer than the one before."""
    handover_depth_cap: int = 2
    """Deepest chain of handover child processes that may hand over again."""
    subagent_depth_cap: int = 2
    """Deepest nesting of sub-agents (``agent`` tool) below a worker."""
    manager_timeout: float = 300.0
    """Seconds one Manager call (plan, decomposition, synthesis) may take."""
    worker_timeout: float = 600.0
    """Seconds one Worker call (all its steps) may take."""
    validator_timeout: float = 120.0
    """Seconds one Validator call may take (then: not validated, never approval)."""
    run_deadline: float = 3600.0
    """Seconds a run may take before no further model request starts."""

    @property
    def handover_attempts(self) -> int:
        """Attempts of a handover child in total (the first plus the retries)."""
        return self.handover_retries + 1


DEFAULTS = Defaults()
"""The defaults in use (a frozen value: build another :class:`Defaults` to differ)."""


ARG_KEEP_CHARS = 4096
"""Characters of one tool-call argument string kept wherever a call is recorded (events,
the conversation store): a 20 MiB argument is not stored several times over."""


def cut_strings(value: Any, keep: int = ARG_KEEP_CHARS) -> Any:
    """A copy of a JSON-like ``value`` with every string longer than ``keep`` cut, marked.

    >>> cut_strings({"content": "x" * 10, "n": 1}, keep=4)
    {'content': 'xxxx… [cut: 6 more characters]', 'n': 1}
    """
    if isinstance(value, str):
        if len(value) <= keep:
            return value
        return f"{value[:keep]}… [cut: {len(value) - keep} more characters]"
    if isinstance(value, dict):
        return {key: cut_strings(item, keep) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [cut_strings(item, keep) for item in value]
    return value
