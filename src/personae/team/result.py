"""A run's result: the one shape the engine returns and every surface shows.

:class:`RunResult` is what :func:`personae.team.session.run_turn` returns and what
:meth:`personae.Team.run` returns (``personae.TeamResult`` is this class). It is made in
one place, :meth:`RunResult.of`, from the run's ``final`` event
(:class:`~personae.team.events.RunFinished`, which carries the status, answer, error,
subtasks, usage, warnings and files written): the live run builds it from the event it
just emitted, :func:`stored_result` from the stored one. So ``personae run --json``'s last
line, the Python API's result, the store (``personae runs show``), the viewer and the
OpenTelemetry export all read the same fields from the same event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic

from pydantic_core import to_jsonable_python
from typing_extensions import TypeVar

from personae.store.runs import RunRecord, RunStore, StoredEvent
from personae.store.status import RunStatus
from personae.team.events import (
    TRANSIENT,
    Event,
    RunFinished,
    ToolCalled,
    event_from_json,
)
from personae.team.signals import SubtaskResult

__all__ = ["RunResult", "Usage", "files_written", "result_of", "stored_result"]

_WRITERS = frozenset({"write_file", "edit_file"})
"""Tools whose ``path`` argument names a file the run produced."""


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Usage of the whole tree of agents of a run."""

    requests: int
    """Model requests."""
    input_tokens: int
    """Input tokens the model reported."""
    output_tokens: int
    """Output tokens the model reported."""
    tool_calls: int
    """Tool calls made."""

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Usage:
        """From the run's usage totals (a key the run never counted is 0: a run that
        failed before its first request has none; other keys are left out)."""
        keys = ("requests", "input_tokens", "output_tokens", "tool_calls")
        return cls(**{k: int(data.get(k) or 0) for k in keys})


OutputT = TypeVar("OutputT", default=str)
"""The type of a run's typed answer (``RunResult.output``): ``str`` unless an
``output_type`` was asked for."""


@dataclass(frozen=True, kw_only=True)
class RunResult(Generic[OutputT]):
    """How a run ended: what :meth:`personae.Team.run` returns (``TeamResult[Answer]`` for
    ``run(..., output_type=Answer)``), and what a stored run reads back as
    (:func:`stored_result`)."""

    run_id: str
    """Stored run id (``personae runs show RUN_ID``)."""
    session_id: str | None
    """Conversation session (pass it as ``session=`` to continue; ``None``: the run
    stopped before it had one)."""
    model: str
    """Model label (``scripted:...`` for the scripted replay server)."""
    status: RunStatus
    """done (every subtask validated), partial, failed or cancelled (cancel token or
    timeout): the run's status as stored, shown by ``personae runs`` and the viewer."""
    answer: str
    """The final answer (validated work only; a code-written 'Not completed' list after it;
    with an ``output_type``, the typed answer as JSON). Empty when the run did not run to
    its answer (``error`` says why)."""
    output: OutputT | None
    """The answer as the ``output_type`` asked for, validated (without one: the answer's
    text). ``None`` when no model wrote an answer (nothing was validated, a cap, a veto or
    the deadline stopped the run, or it failed or was cancelled)."""
    error: str | None
    """Why the run failed or was cancelled (``None``: it ran to its answer)."""
    subtasks: list[SubtaskResult]
    """One per planned subtask."""
    usage: Usage
    """Usage of the whole tree of agents."""
    warnings: list[str]
    """User-visible warnings."""
    failure_count: int
    """Validations that rejected a worker's result."""
    files_written: list[str]
    """Files the run's tools wrote or edited that still existed when it ended."""
    events: list[Event]
    """Every stored event of the run, in order, ``final`` last, as the store keeps them
    (a failed tool call as its brief; the answer's text pieces are not kept)."""

    def to_json_dict(self) -> dict[str, Any]:
        """The result as JSON (``personae runs show --json``'s ``result``): every field but
        ``events`` (``final`` last of them carries the same), the output as JSON."""
        return {
            f.name: to_jsonable_python(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name != "events"
        }

    @classmethod
    def of(
        cls,
        final: RunFinished,
        *,
        session_id: str | None,
        model: str,
        events: Iterable[Event],
        output: OutputT | None = None,
        typed: bool = False,
    ) -> RunResult[Any]:
        """The result a run's ``final`` event records, with the run's session, model label
        and events. ``typed``: ``output`` is the typed answer asked for; otherwise the
        output is the answer's text."""
        answered = final.error is None
        answer = final.message if answered else ""
        text: Any = answer if answered else None
        return cls(
            run_id=final.run_id, session_id=session_id, model=model, status=final.status,
            answer=answer, output=output if typed else text,
            error=final.error, subtasks=list(final.subtasks), usage=Usage.of(final.usage),
            warnings=list(final.warnings), failure_count=final.failure_count,
            files_written=list(final.files_written),
            events=[e for e in events if not isinstance(e, TRANSIENT)],
        )  # fmt: skip


def files_written(events: Iterable[Event], root: Path) -> list[str]:
    """Files the run's tools wrote or edited that still exist, in first-write order.

    Taken from the successful ``write_file``/``edit_file`` tool-call events (workers and
    sub-agents); paths as the tools got them (relative to ``root``, the workspace the
    tools acted on). Files gone by now (a sub-agent's temporary workspace) are left out.
    """
    found: dict[str, None] = {}
    for event in events:
        if not isinstance(event, ToolCalled) or not event.ok or event.reused:
            continue
        path = (event.args or {}).get("path") if event.tool in _WRITERS else None
        if isinstance(path, str) and path.strip():
            full = Path(path) if Path(path).is_absolute() else root / path
            if full.is_file():
                found.setdefault(path, None)
    return list(found)


def stored_result(runs: RunStore, run_id: str) -> RunResult[str] | None:
    """The stored run's result (:func:`result_of` its row and events). An unknown id
    raises the store's ``UnknownNameError``."""
    record = runs.get(run_id)
    return result_of(record, runs.events(record.id))


def result_of(record: RunRecord, stored: Sequence[StoredEvent]) -> RunResult[str] | None:
    """A stored run's result, read from its ``final`` event (``None``: the run has no
    result: it is still running, or its process ended without one and the store marked
    it ``crashed``). A stored event this version cannot read raises ``ValueError`` naming
    it. Its ``output`` is the answer's text (the ``output_type`` is not stored)."""
    events = [event_from_json({"run_id": record.id, **e.model_dump()}) for e in stored]
    final = next((e for e in reversed(events) if isinstance(e, RunFinished)), None)
    if final is None or record.status is RunStatus.RUNNING:
        return None
    return RunResult.of(final, session_id=record.session_id, model=record.model, events=events)
