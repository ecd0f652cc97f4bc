"""Typed results of the Python API: a team run's result and the items ``run_stream`` yields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from personae.store.status import RunStatus
from personae.team.events import AnswerStreamed, Event, Validated
from personae.team.signals import CompletionSignal, SubtaskStatus

if TYPE_CHECKING:
    from personae.team.session import RunOutcome

__all__ = ["AnswerDelta", "Limits", "RunEnd", "StreamItem", "SubtaskResult", "TeamResult", "Usage"]


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


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Usage of the whole tree of agents of a run."""

    requests: int = 0
    """Model requests."""
    input_tokens: int = 0
    """Input tokens the model reported."""
    output_tokens: int = 0
    """Output tokens the model reported."""
    tool_calls: int = 0
    """Tool calls made."""

    @classmethod
    def of(cls, data: dict[str, int] | None) -> Usage:
        """From the run's usage dict (unknown keys ignored)."""
        data = data or {}
        return cls(**{k: int(data.get(k, 0)) for k in ("requests", "input_tokens",
                                                       "output_tokens", "tool_calls")})  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class SubtaskResult:
    """How one planned subtask ended."""

    number: int
    """Subtask number (from 1)."""
    description: str
    """What the Manager asked for."""
    status: SubtaskStatus
    """validated, partial, unvalidated, skipped or escalated."""
    result: str
    """The accepted (or last) worker result."""
    reason: str = ""
    """Why it was not validated."""
    attempts: int = 1
    """Worker attempts made."""
    signal: CompletionSignal | None = None
    """The validator's completion signal on the last attempt (``None``: never validated)."""


OutputT = TypeVar("OutputT", default=str)
"""The type of a run's typed answer (``TeamResult.output``): ``str`` unless an
``output_type`` was asked for."""


@dataclass(frozen=True, kw_only=True)
class TeamResult(Generic[OutputT]):
    """What :meth:`personae.Team.run` returns (``TeamResult[Answer]`` for
    ``run(..., output_type=Answer)``)."""

    answer: str
    """The final answer (validated work only; a code-written 'Not completed' list after it;
    with an ``output_type``, the typed answer as JSON)."""
    output: OutputT | None = None
    """The answer as the ``output_type`` asked for, validated (without one: the answer's
    text). ``None`` when no model wrote an answer (nothing was validated, a cap, a veto or
    the deadline stopped the run, or it was cancelled)."""
    status: RunStatus
    """done (every subtask validated), partial, or cancelled (cancel token or timeout): the
    run's status as stored, shown by ``personae runs`` and the viewer."""
    run_id: str
    """Stored run id (``personae runs show RUN_ID``)."""
    session_id: str
    """Conversation session (pass it as ``session=`` to continue)."""
    model: str
    """Model label (``scripted:...`` for the scripted replay server)."""
    subtasks: list[SubtaskResult] = field(default_factory=list)
    """One per planned subtask."""
    usage: Usage = field(default_factory=Usage)
    """Usage of the whole tree of agents."""
    warnings: list[str] = field(default_factory=list)
    """User-visible warnings."""
    events: list[Event] = field(default_factory=list)
    """Every stored event of the run, in order (the answer's text pieces are not kept)."""
    files_written: list[str] = field(default_factory=list)
    """Files the run's tools wrote or edited that still exist."""

    @classmethod
    def of(cls, outcome: RunOutcome) -> TeamResult[Any]:
        """From a finished run (:func:`personae.team.session.run_turn`'s outcome)."""
        signals: dict[int, CompletionSignal] = {}
        for event in outcome.events:
            if isinstance(event, Validated) and event.subtask:
                signals[event.subtask] = event.completion_signal
        result = outcome.result
        status = result.status
        typed: Any = result.output if outcome.typed else result.final_text
        return cls(
            answer=result.final_text, output=typed, status=status, run_id=outcome.run_id,
            session_id=outcome.session_id, model=outcome.model_label,
            subtasks=[
                SubtaskResult(
                    number=o.number, description=o.subtask.description, status=o.status,
                    result=o.result, reason=o.reason, attempts=o.attempts,
                    signal=signals.get(o.number),
                )
                for o in result.outcomes
            ],
            usage=Usage.of(result.usage), warnings=list(result.warnings),
            events=[e for e in outcome.events if not isinstance(e, AnswerStreamed)],
            files_written=outcome.files_written(),
        )  # fmt: skip


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

    result: TeamResult[Any]
    """The same result :meth:`personae.Team.arun` returns."""


StreamItem = Event | AnswerDelta | RunEnd
"""What :meth:`personae.Team.run_stream` yields: run events (``personae run --json``),
answer text deltas, then one :class:`RunEnd`."""
