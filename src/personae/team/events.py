"""Typed run events and the bus that fans them out (store, JSON lines, live view).

Each kind of step is a frozen dataclass; :data:`Event` is their union, so a
consumer matches on the class and ends with ``assert_never``. A producer builds
the event's payload (``emit(PlanMade(...))``); the bus stamps the run id, number
and time. The JSON form (``to_json_dict``, stored rows, ``personae run --json``)
is ``{run_id, seq, kind, at, message, subtask, data}`` with the payload fields
in ``data``; :func:`event_from_json` reads it back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal, TypeAlias

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from personae.context.modes import ContextMode
from personae.store.status import CallRole, RunStatus
from personae.team.dispatch import StepAction
from personae.team.signals import (
    BlockerType,
    CompletionSignal,
    InvolvementLevel,
    SubagentStatus,
    Subtask,
    SubtaskResult,
)
from personae.tools.records import ToolCallRecord

__all__ = [
    "TRANSIENT",
    "AnswerStreamed",
    "CallProgress",
    "Corrected",
    "Event",
    "EventBus",
    "EventKind",
    "PlanMade",
    "RunFinished",
    "RunStarted",
    "RunWarning",
    "SubagentEnded",
    "SubagentStarted",
    "SubtaskStarted",
    "ToolCalled",
    "Validated",
    "WorkDone",
    "event_from_json",
]


class EventKind(StrEnum):
    """Every kind of step a run reports (the ``kind`` string of the JSON form)."""

    START = "start"
    PLAN = "plan"
    SUBTASK_START = "subtask_start"
    TOOL_CALL = "tool_call"
    WORK_RESULT = "work_result"
    VALIDATION = "validation"
    CORRECTION = "correction"
    WARNING = "warning"
    SUBAGENT = "subagent"
    FINAL = "final"
    ANSWER_DELTA = "answer_delta"
    """A piece of the final answer's text as the model streams it (:class:`AnswerStreamed`);
    not stored: the ``final`` event carries the whole answer."""
    CALL = "call"
    """A model call starts, streams or ends (:class:`CallProgress`); for live views, not stored."""


_ENVELOPE = frozenset({"run_id", "seq", "at", "message", "subtask", "extra"})


@dataclass(frozen=True, kw_only=True)
class _EventBase:
    """What every event has: the envelope the bus stamps, and the readable line."""

    kind: ClassVar[EventKind]
    """What happened (the same for every event of a class)."""

    run_id: str = ""
    """The run (set by the bus)."""
    seq: int = 0
    """Order within the run, from 1 (set by the bus)."""
    at: str = ""
    """UTC timestamp, ISO 8601 (set by the bus)."""
    message: str = ""
    """One readable line."""
    subtask: int | None = None
    """Subtask number (from 1), when the event belongs to one."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Payload keys this version does not model (read from a stored or newer event),
    kept so that the JSON form round-trips unchanged."""

    omitted_when_none: ClassVar[frozenset[str]] = frozenset()
    """Payload fields left out of ``data`` when ``None`` (only some producers have them);
    an event read back without one has ``None`` there."""

    @property
    def data(self) -> dict[str, Any]:
        """The kind-specific payload as a dict (the ``data`` of the JSON form, not JSON-coerced)."""
        payload = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in _ENVELOPE
            and not (f.name in self.omitted_when_none and getattr(self, f.name) is None)
        }
        return payload | dict(self.extra)

    def to_json_dict(self) -> dict[str, Any]:
        """The event as a JSON-safe dict (one JSON line in ``--json`` mode, one stored row)."""
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "kind": self.kind.value,
            "at": self.at,
            "message": self.message,
            "subtask": self.subtask,
            "data": to_jsonable_python(self.data),
        }


@dataclass(frozen=True, kw_only=True)
class RunStarted(_EventBase):
    """A run started (stored and shown before the team loads: :mod:`personae.team.runlog`)."""

    kind: ClassVar[EventKind] = EventKind.START
    task: str | None
    """The task as given (``None``: not known yet, asked for after the start)."""
    persona: str | None
    """The persona asked for (``None``: the default)."""
    session: str | None
    """The conversation session asked for (``None``: a new one)."""
    context_from: str | None
    """The handover file the run starts from (``None``: none)."""
    pid: int | None
    """The process running it (``None``: stored before the process was recorded)."""
    sandbox: str | None
    """How its ``run_shell`` commands run: ``bwrap (...)``, ``off (...)``,
    ``unsandboxed (reason)`` or ``refused (reason)``
    (:func:`personae.tools.sandbox.describe_mode`); ``None``: stored before it was recorded."""


@dataclass(frozen=True, kw_only=True)
class PlanMade(_EventBase):
    """The Manager broke the task into subtasks."""

    kind: ClassVar[EventKind] = EventKind.PLAN
    subtasks: list[Subtask]
    """Each subtask (``description``, ``requirements``, ``persona``, ``required_tools``)."""
    rationale: str
    """Why this plan (may be empty)."""


@dataclass(frozen=True, kw_only=True)
class SubtaskStarted(_EventBase):
    """A subtask went to a worker (``message`` is its description)."""

    kind: ClassVar[EventKind] = EventKind.SUBTASK_START
    requirements: list[str]
    """What the validator will check."""
    persona: str
    """The worker's persona."""


@dataclass(frozen=True, kw_only=True)
class ToolCalled(_EventBase):
    """A worker or sub-agent called a tool."""

    kind: ClassVar[EventKind] = EventKind.TOOL_CALL
    omitted_when_none: ClassVar[frozenset[str]] = frozenset({"reused", "depth"})
    tool: str
    """Tool name."""
    args: dict[str, Any]
    """Arguments as the model gave them (JSON: their shape is the tool's)."""
    ok: bool
    """Whether the call succeeded."""
    result: str
    """The result (its first 500 characters)."""
    persona: str | None
    """The persona that called it."""
    reused: bool | None
    """A worker's call answered from an earlier identical call (workers only; ``None``
    for a sub-agent's)."""
    depth: int | None
    """Sub-agent depth (sub-agents only; ``None`` for a worker's)."""


@dataclass(frozen=True, kw_only=True)
class WorkDone(_EventBase):
    """A worker attempt ended (``message`` is the start of its result)."""

    kind: ClassVar[EventKind] = EventKind.WORK_RESULT
    attempt: int
    """Attempt number (from 1)."""
    success: bool
    """The worker finished (not stopped by a limit or error)."""
    tools_used: list[str]
    """Tools it called successfully."""
    failed_tools: list[ToolCallRecord]
    """Calls that failed (the JSON form leaves out their dispatch details:
    :meth:`ToolCallRecord.brief`)."""
    loop_detected: bool
    """The loop detector fired."""
    result: str
    """The whole result."""
    skills: list[str]
    """Skills loaded for the worker."""
    skill_commands: list[tuple[str, str]]
    """``(command, reason)`` of skill commands run."""

    @property
    def data(self) -> dict[str, Any]:
        """The payload, each failed call as :meth:`ToolCallRecord.brief` gives it."""
        return super().data | {"failed_tools": [c.brief() for c in self.failed_tools]}


@dataclass(frozen=True, kw_only=True)
class Validated(_EventBase):
    """The validator judged a worker's result (``message``: approved or the issues)."""

    kind: ClassVar[EventKind] = EventKind.VALIDATION
    used_llm: bool
    """A model call was made (else code checks decided)."""
    skills: list[str] | None
    """Skills loaded for the validator (``None``: it loads none)."""
    approved: bool
    """Approved."""
    requirements_met: bool
    """Every requirement met."""
    issues: list[str]
    """What is wrong."""
    next_action: str
    """What the validator suggests (free text, may be empty)."""
    involvement_level: InvolvementLevel
    """minimal, standard or thorough."""
    correction: str
    """The validator's correction instruction (may be empty)."""
    completion_signal: CompletionSignal
    """The validator's completion signal."""


@dataclass(frozen=True, kw_only=True)
class Corrected(_EventBase):
    """Not approved: dispatch chose a correction (``message``: action and instruction)."""

    kind: ClassVar[EventKind] = EventKind.CORRECTION
    action: StepAction
    """retry, rephrase or decompose."""
    blocker: BlockerType | None
    """The blocker type that chose it (``None``: the validator named none)."""
    retries_used: int
    """Corrections spent on the subtask so far."""
    max_retries: int
    """The subtask's correction budget."""


@dataclass(frozen=True, kw_only=True)
class RunWarning(_EventBase):
    """Something the user should know (``message``); ``action`` names what it is about."""

    kind: ClassVar[EventKind] = EventKind.WARNING
    action: str | None
    """``context_cut``, ``skills_cut``, ``usage_cap``, ``mcp_server``, ``spawn_refused``,
    ``worker_stopped``, ``plan_unparsed``, a dispatch action (``skip``, ``escalate``, ...),
    or ``None`` (a warning about nothing in particular)."""
    details: Mapping[str, Any]
    """The warning's own fields (flat in ``data``, after ``action``; may be empty)."""

    @property
    def data(self) -> dict[str, Any]:
        """``action`` (when set) and the details, flat, then any unmodelled keys."""
        head = {"action": self.action} if self.action is not None else {}
        return head | dict(self.details) | dict(self.extra)


@dataclass(frozen=True, kw_only=True)
class _SubagentEvent(_EventBase):
    """What a sub-agent's start and end events share (in this order in ``data``)."""

    kind: ClassVar[EventKind] = EventKind.SUBAGENT
    persona: str
    """The sub-agent's persona."""
    phase: Literal["start", "end"] = "start"
    """``start`` or ``end`` (fixed by the class, not data a producer gives)."""
    context_mode: ContextMode
    """What context it inherits."""


@dataclass(frozen=True, kw_only=True)
class SubagentStarted(_SubagentEvent):
    """The ``agent`` tool started a sub-agent."""

    phase: Literal["start"] = "start"
    """Always ``start``."""
    depth: int
    """Sub-agent depth."""
    task: str
    """The task it got."""


@dataclass(frozen=True, kw_only=True)
class SubagentEnded(_SubagentEvent):
    """A sub-agent finished; only its final message went back."""

    phase: Literal["end"] = "end"
    """Always ``end``."""
    status: SubagentStatus
    """success, partial, limit or failed."""
    progress_made: bool
    """It made measurable progress."""
    usage: dict[str, int]
    """Its usage (requests, tokens, tool calls)."""
    temp_workspace: str | None
    """Its temporary workspace (removed by now), if it had one."""


@dataclass(frozen=True, kw_only=True)
class RunFinished(_EventBase):
    """How a run ended: the final answer (``message``), or why it stopped."""

    kind: ClassVar[EventKind] = EventKind.FINAL
    status: RunStatus
    """How the run ended (done, partial, failed, cancelled): every run ends with one."""
    subtasks: list[SubtaskResult]
    """How each planned subtask ended (empty: the run stopped before it had a plan)."""
    usage: dict[str, int]
    """Usage of the whole tree of agents (requests, input and output tokens, tool calls)."""
    failure_count: int
    """Rejected validations."""
    warnings: list[str]
    """User-visible warnings of the run."""
    files_written: list[str]
    """Files the run's tools wrote or edited that still existed when it ended."""
    error: str | None
    """Why the run failed or was cancelled (``None``: it ran to its answer, ``message``)."""


@dataclass(frozen=True, kw_only=True)
class AnswerStreamed(_EventBase):
    """A piece of the final answer's text as the model streams it.

    Only broadcast: not stored and not numbered (it carries the number of the
    event before it); the ``final`` event carries the whole answer.
    """

    kind: ClassVar[EventKind] = EventKind.ANSWER_DELTA
    text: str
    """The new text."""


@dataclass(frozen=True, kw_only=True)
class CallProgress(_EventBase):
    """A model call starts (``phase`` ``start``), streams (``tokens``: the tokens arrived so
    far, a few times a second) or ends (``end``): what a live view shows while the model
    works. Only broadcast, like :class:`AnswerStreamed`: not stored, not numbered, not in
    ``--json`` output; the stored model call holds the rest."""

    kind: ClassVar[EventKind] = EventKind.CALL
    omitted_when_none: ClassVar[frozenset[str]] = frozenset({"seconds", "output_tokens"})
    phase: Literal["start", "tokens", "end"]
    """``start``, ``tokens`` or ``end``."""
    role: CallRole
    """manager, worker, validator, subagent or summarizer."""
    model: str
    """The model's label."""
    max_tokens: int
    """The output cap the request carries."""
    timeout: float
    """Seconds the call may take."""
    seconds: float | None
    """How long it has taken so far (``tokens``) or took (``end``; ``None`` at the start)."""
    output_tokens: int | None
    """Tokens the model has written so far (``tokens``: our count of what streamed) or wrote
    (``end``; ``None`` at the start)."""


TRANSIENT = (AnswerStreamed, CallProgress)
"""Events only broadcast: not recorded or stored, numbered after the event before them."""


Event: TypeAlias = (
    RunStarted
    | PlanMade
    | SubtaskStarted
    | ToolCalled
    | WorkDone
    | Validated
    | Corrected
    | RunWarning
    | SubagentStarted
    | SubagentEnded
    | RunFinished
    | AnswerStreamed
    | CallProgress
)
"""One step of a run; match on the class (``case ToolCalled(): ...``)."""

_CLASSES: dict[EventKind, type[Event]] = {
    EventKind.START: RunStarted,
    EventKind.PLAN: PlanMade,
    EventKind.SUBTASK_START: SubtaskStarted,
    EventKind.TOOL_CALL: ToolCalled,
    EventKind.WORK_RESULT: WorkDone,
    EventKind.VALIDATION: Validated,
    EventKind.CORRECTION: Corrected,
    EventKind.WARNING: RunWarning,
    EventKind.SUBAGENT: SubagentStarted,
    EventKind.FINAL: RunFinished,
    EventKind.ANSWER_DELTA: AnswerStreamed,
    EventKind.CALL: CallProgress,
}


_SUBAGENT_PHASES: dict[object, type[SubagentStarted | SubagentEnded]] = {
    "start": SubagentStarted,
    "end": SubagentEnded,
}
"""A ``subagent`` event's class by its ``phase`` (an unknown phase reads as a start)."""


_WRITTEN_LATER: dict[type[Event], dict[str, Any]] = {
    WorkDone: {"skills": [], "skill_commands": []},
    Validated: {"skills": None, "correction": ""},
    RunFinished: {"subtasks": [], "warnings": [], "files_written": []},
}
"""Payload fields that events stored by earlier versions lack, and what such an event
reads as (nothing loaded; an older ``final`` event's ``validated``/``not_validated``
numbers stay in its ``extra``). The one place old stored rows are read tolerantly; every
other missing field is an error."""


def event_from_json(raw: Mapping[str, Any]) -> Event:
    """An event from its JSON form (``to_json_dict``, a stored row, a ``--json`` line).

    Each payload field is read into its type (a plan's subtasks into :class:`Subtask`,
    a completion signal into :class:`CompletionSignal`, statuses into their enums ...).
    Payload keys the class does not model are kept in ``extra``. An unknown ``kind``, a
    payload without a field the event cannot be without (a ``final`` event's ``status``,
    a tool call's ``tool`` ...) or a field of the wrong shape raises ``ValueError``
    naming the event and the field.
    """
    kind = EventKind(raw["kind"])
    data = dict(raw.get("data") or {})
    cls: type[Event] = _CLASSES[kind]
    if kind is EventKind.SUBAGENT:
        cls = _SUBAGENT_PHASES.get(data.get("phase"), SubagentStarted)
    where = f"event {raw.get('seq', '?')} ({kind.value}) of run {raw.get('run_id', '?')}"
    fields: dict[str, Any]
    if cls is RunWarning:  # its payload is open: every key but ``action`` is a detail
        fields, data = {"action": data.pop("action", None), "details": data}, {}
    else:
        names = {f.name for f in dataclasses.fields(cls)} - _ENVELOPE
        fields = {name: data.pop(name) for name in list(data) if name in names}
        fields = _WRITTEN_LATER.get(cls, {}) | fields
        fields |= {n: None for n in cls.omitted_when_none if n not in fields}
        missing = sorted(n for n in _required(cls) if n not in fields)
        if missing:
            raise ValueError(f"{where} has no {', '.join(missing)}")
    envelope = {
        "run_id": str(raw.get("run_id", "")),
        "seq": int(raw.get("seq", 0)),
        "at": str(raw.get("at", "")),
        "message": str(raw.get("message", "")),
        "subtask": raw.get("subtask"),
        "extra": data,
    }
    try:
        event: Event = _reader(cls).validate_python(envelope | fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise ValueError(f"{where}: {problems}") from None
    return event


_READERS: dict[type[Event], TypeAdapter[Any]] = {}


def _reader(cls: type[Event]) -> TypeAdapter[Any]:
    """Reads an event class's fields (JSON values) into their types (made once per class)."""
    if cls not in _READERS:
        _READERS[cls] = TypeAdapter(cls)
    return _READERS[cls]


def _required(cls: type[Event]) -> list[str]:
    """The payload fields of ``cls`` without a default."""
    return [
        f.name
        for f in dataclasses.fields(cls)
        if f.name not in _ENVELOPE
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]


Listener = Callable[[Event], None]


class EventBus:
    """Numbers events and hands each to every listener, in subscription order."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._listeners: list[Listener] = []
        self._seq = 0
        self.events: list[Event] = []
        """Every event emitted so far."""

    def subscribe(self, listener: Listener) -> None:
        """Add a listener (called synchronously for every event)."""
        self._listeners.append(listener)

    def emit(self, event: Event) -> Event:
        """Stamp (run id, number, time), record and broadcast an event; returns it stamped.

        An :class:`AnswerStreamed` (a piece of the answer's text) is only broadcast: it
        is not recorded and takes no number of its own (it carries the number of
        the event before it), so stored events stay numbered 1, 2, 3 ...
        """
        transient = isinstance(event, TRANSIENT)
        if not transient:
            self._seq += 1
        event = dataclasses.replace(
            event,
            run_id=self.run_id,
            seq=self._seq,
            at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        )
        if not transient:
            self.events.append(event)
        for listener in self._listeners:
            listener(event)
        return event

    def adopt(self, event: Event) -> Event:
        """Take an event announced before the bus existed (``personae run``'s ``start``).

        It keeps its number and time; later events are numbered after it.
        Only listeners subscribed so far get it (whoever announced it has shown it).
        """
        if event.run_id != self.run_id or event.seq != self._seq + 1:
            raise ValueError(f"event {event.seq} of run {event.run_id} does not come next here")
        self._seq = event.seq
        self.events.append(event)
        for listener in self._listeners:
            listener(event)
        return event
