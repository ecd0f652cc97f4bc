"""One batch task as a job: a child ``personae run TASK --json`` with timeout and retries.

The child runs in its own process group like every child run
(:func:`~personae.handover.child.run_child`); a failed attempt (non-zero exit,
timeout, no final answer) is retried with exponential backoff. The answer is
the ``final`` event of the child's JSON event stream (or, when the answer is
longer than the captured tail of that stream, the run's stored record).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personae.batch.tasks import BatchTask
from personae.errors import PersonaeError
from personae.handover.child import AttemptOutcome, backoff_delays, run_child
from personae.handover.schema import Results
from personae.invocation import personae_argv
from personae.layout import Layout
from personae.store.db import Store
from personae.store.runs import RunStore
from personae.store.status import EXIT_PARTIAL
from personae.team.events import EventKind
from personae.workflow.executors import BaseJob, JobResult

_FINISHED = frozenset({0, EXIT_PARTIAL})
"""Exit codes of a ``personae run`` that reached its answer (done, or partial)."""

__all__ = ["RunCommand", "RunJob", "final_event"]


@dataclass(frozen=True)
class RunCommand:
    """Builds a task's child command: ``PREFIX run --json [--persona P] ... -- TASK``.

    ``prefix`` defaults to ``python -m personae`` of the process that starts the child
    (a Ray node's own interpreter). Tests put a stand-in program there.
    """

    prefix: tuple[str, ...] = ()
    """The program to run (empty: ``sys.executable -m personae``)."""

    def __call__(self, task: BatchTask) -> list[str]:
        """The argv for ``task`` (no shell is ever used)."""
        argv = [*self.prefix, "run", "--json"] if self.prefix else personae_argv("run", "--json")
        for flag, value in (
            ("--persona", task.persona), ("--model", task.model), ("--session", task.session),
        ):  # fmt: skip
            if value is not None:
                argv += [flag, value]
        return [*argv, "--", task.task]


def final_event(stdout: str) -> tuple[dict[str, Any] | None, str | None]:
    """The ``final`` event and the run id found in a ``--json`` event stream (or its tail)."""
    final: dict[str, Any] | None = None
    run_id: str | None = None
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # the first line of a tail is usually cut
        if not isinstance(event, dict):
            continue
        run_id = run_id or (str(event["run_id"]) if event.get("run_id") else None)
        if event.get("kind") == EventKind.FINAL:
            final = event
    return final, run_id


def _stored_answer(cwd: Path, run_id: str) -> dict[str, Any] | None:
    """The stored run (answer and status) when the event stream's tail lost the answer."""
    try:
        with Store(Layout(cwd).state_db) as store:
            record = RunStore(store).get(run_id)
    except PersonaeError:
        return None
    data = {"status": record.status, "usage": record.usage}
    return {"message": record.final_text or "", "data": data}


@dataclass(frozen=True, kw_only=True)
class RunJob(BaseJob):
    """A batch task to run in a child process (an :class:`~personae.workflow.executors.Work`);
    its ``key`` is the task's id, its ``cwd`` the project folder."""

    task: BatchTask
    """The task."""
    command: RunCommand = field(default_factory=RunCommand)
    """Builds the child's argv."""

    def _answer(self, a: AttemptOutcome) -> tuple[dict[str, Any] | None, str | None]:
        final, run_id = final_event(a.stdout)
        if final is None and run_id is not None and a.exit_code in _FINISHED:
            final = _stored_answer(self.cwd, run_id)
        return final, run_id

    def execute(self, on_start: Callable[[int], None] | None, *, tie: bool) -> JobResult:
        """Run the task until an attempt ends with a final answer or attempts run out."""
        start = time.monotonic()
        argv = self.command(self.task)
        delays = backoff_delays(self.attempts, self.backoff)
        error = ""
        detail: dict[str, Any] = {}
        timed_out = False
        for n in range(1, self.attempts + 1):
            a = run_child(
                argv, cwd=self.cwd, timeout=self.timeout, attempt=n, on_start=on_start, tie=tie
            )
            final, run_id = self._answer(a)
            timed_out = a.timed_out
            detail = {"run_id": run_id, "exit_code": a.exit_code}
            if final is not None and a.exit_code in _FINISHED and not a.timed_out:
                data = final.get("data") or {}
                detail |= {"run_status": data.get("status"), "usage": data.get("usage")}
                answer = Results(status="success", output=str(final.get("message") or ""))
                return JobResult(
                    key=self.key, status="success", results=answer, attempts=n,
                    duration=time.monotonic() - start, detail=detail,
                )  # fmt: skip
            error = _describe(a)
            if n < self.attempts:
                time.sleep(delays[n - 1])
        failure = f"all {self.attempts} attempt(s) failed; last: {error}"[:20_000]
        return JobResult(
            key=self.key, status="failure", results=Results(status="failure", error=failure),
            attempts=self.attempts, duration=time.monotonic() - start, timed_out=timed_out,
            error=failure, detail=detail,
        )  # fmt: skip


def _describe(a: AttemptOutcome) -> str:
    if a.error:
        return a.error
    if a.timed_out:
        return f"timed out after {a.duration:.1f}s; process group {a.pid} killed"
    tail = [line for line in a.stderr.strip().splitlines() if line.strip()][-3:]
    detail = f": {' | '.join(tail)}" if tail else ""
    if a.exit_code == 0:
        return f"the run printed no final answer{detail}"
    return f"child exited with code {a.exit_code}{detail}"
