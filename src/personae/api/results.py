"""Typed results of the Python API: a team run's result and the items ``run_stream`` yields.

The result itself is :class:`personae.team.result.RunResult` (``TeamResult`` names it
here), made by the engine; this module adds the run's limits and the stream's items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from personae.team.events import Event
from personae.team.result import RunResult, Usage
from personae.team.signals import SubtaskResult

__all__ = [
    "AnswerDelta",
    "Limits",
    "RunEnd",
    "RunResult",
    "StreamItem",
    "SubtaskResult",
    "TeamResult",
    "Usage",
]


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Limits of one run; ``None`` takes the setting (``PERSONAE_*`` env, then the default).

    Example: ``Limits(max_retries=1, max_requests=20, budget_share=0.25, timeout=120)``.
    """

    max_retries: int | None = None
    """Corrections per subtask (``personae run --max-retries``)."""
    max_requests: int | None = None
    """Most model requests for the whole run, all agents and the runs it starts in other
    processes (``--max-requests``; ``None``: the config's ``limits:``, else no cap)."""
    max_tokens: int | None = None
    """Most tokens (input plus output, as the model reports them) for the whole run, all
    agents and the runs it starts in other processes; no request starts once they are used
    (``--max-tokens-total``; ``None``: the config's ``limits:``, else no cap)."""
    max_tool_calls: int | None = None
    """Most tool calls for the whole run, all agents; the call past it is refused and the
    run stops (``None``: no cap)."""
    max_cost: float | None = None
    """Most cost for the whole tree of runs, by the config's ``prices:`` (``--max-cost``;
    ``None``: the config's ``limits:``, else no cap)."""
    budget_share: float | None = None
    """Share of the model's window the assembled context may use."""
    timeout: float | None = None
    """Seconds the run may take; past it the run is cancelled (status ``cancelled``)."""
    window: int | None = None
    """The model's context window in tokens (``--window``); ``None``: the config's
    ``models:`` entry, what the server tells, else personae's table."""
    call_timeout: float | None = None
    """Seconds each model call may take, every role (``--call-timeout``); ``None``: the
    config's ``timeouts:``, else the roles' defaults."""
    deadline: float | None = None
    """Seconds after which no model request starts; the run then ends with what is done
    (``--deadline``); ``None``: the config's ``timeouts.run``, else one hour."""


TeamResult = RunResult
"""What :meth:`personae.Team.run` returns: the run's result, the one shape every surface
shows (:class:`personae.team.result.RunResult`; ``TeamResult[Answer]`` for
``run(..., output_type=Answer)``)."""


@dataclass(frozen=True, kw_only=True)
class AnswerDelta:
    """A piece of the final answer's text, as the model streams it (``run_stream`` only).

    The deltas of a run joined are the model's answer; the ``final`` event's
    message is the complete answer (it may add a code-written 'Not completed' list).
    """

    run_id: str
    """The run."""
    index: int
    """Order of this delta (from 0)."""
    text: str
    """The new text."""


@dataclass(frozen=True, kw_only=True)
class RunEnd:
    """The last item ``run_stream`` yields: the run's typed result."""

    result: RunResult[Any]
    """The same result :meth:`personae.Team.arun` returns."""


StreamItem = Event | AnswerDelta | RunEnd
"""What :meth:`personae.Team.run_stream` yields: run events (``personae run --json``),
answer text deltas, then one :class:`RunEnd`."""
