"""Typed run events and the bus that fans them out (store, JSON lines, live view)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Event", "EventBus", "EventKind"]


class EventKind(StrEnum):
    """Every kind of step a run reports."""

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
    """A piece of the final answer's text as the model streams it (``data["text"]``);
    not stored: the ``final`` event carries the whole answer."""


class Event(BaseModel):
    """One step of a run."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    """The run."""
    seq: int
    """Order within the run (from 1)."""
    kind: EventKind
    """What happened."""
    at: str
    """UTC timestamp (ISO 8601)."""
    message: str = ""
    """One readable line."""
    subtask: int | None = None
    """Subtask number (from 1), when the event belongs to one."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Kind-specific payload (JSON-safe)."""

    def to_json_dict(self) -> dict[str, Any]:
        """The event as a JSON-safe dict (one JSON line in ``--json`` mode)."""
        return self.model_dump(mode="json")


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

    def emit(
        self,
        kind: EventKind,
        message: str = "",
        *,
        subtask: int | None = None,
        **data: Any,
    ) -> Event:
        """Create, record and broadcast an event.

        An ``answer_delta`` (a piece of the answer's text) is only broadcast: it
        is not recorded and takes no number of its own (it carries the number of
        the event before it), so stored events stay numbered 1, 2, 3 ...
        """
        transient = kind is EventKind.ANSWER_DELTA
        if not transient:
            self._seq += 1
        event = Event(
            run_id=self.run_id,
            seq=self._seq,
            kind=kind,
            at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            message=message,
            subtask=subtask,
            data=data,
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
