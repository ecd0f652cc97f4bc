"""Running a batch: skip tasks that already have a result, run the rest on an executor.

Each task becomes a :class:`~personae.batch.job.RunJob` (a child
``personae run``) handed to the executor (local processes on a bounded thread
pool, or Ray tasks); each result is appended to the result file as soon as the
task ends. Killed and started again, a batch runs only the tasks without a
result line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personae.batch.job import RunCommand, RunJob
from personae.batch.progress import Progress
from personae.batch.results import ResultLog, read_results
from personae.batch.tasks import BatchTask, load_tasks
from personae.handover.child import EXIT_FAILURE, EXIT_SUCCESS
from personae.handover.schema import now_iso
from personae.limits import DEFAULTS
from personae.workflow.executors import Executor, JobResult

__all__ = ["BatchOptions", "BatchOutcome", "default_results_path", "run_batch"]


@dataclass(frozen=True, kw_only=True)
class BatchOptions:
    """How to run a batch (the flags of ``personae batch``)."""

    cwd: Path
    """The project folder every run works in."""
    out: Path | None = None
    """The result file (default: ``TASKS.results.jsonl`` beside the task file)."""
    concurrency: int = 2
    """Tasks at once."""
    timeout: float = DEFAULTS.handover_timeout
    """Seconds per attempt (a task's ``timeout`` overrides it)."""
    retries: int = 1
    """Retries after a failed attempt (a task's ``retries`` overrides it)."""
    backoff: float = DEFAULTS.handover_backoff
    """First retry delay in seconds (doubles)."""
    num_cpus: float | None = None
    """CPUs each task needs on a Ray cluster (``None``: one)."""
    command: RunCommand = field(default_factory=RunCommand)
    """Builds each child's command."""


@dataclass(frozen=True, kw_only=True)
class BatchOutcome:
    """The end of a batch run."""

    results: Path
    """The result file."""
    total: int
    """Tasks in the file."""
    skipped: int
    """Tasks that had a result already (not run again)."""
    ok: int
    """Tasks that ended with an answer in this run."""
    failed: int
    """Tasks that failed in this run."""

    @property
    def exit_code(self) -> int:
        """0 when no task failed in this run, else 3."""
        return EXIT_SUCCESS if self.failed == 0 else EXIT_FAILURE


def default_results_path(tasks: Path) -> Path:
    """``tasks.jsonl`` -> ``tasks.results.jsonl`` (same folder)."""
    return tasks.with_name(tasks.name.removesuffix(".jsonl") + ".results.jsonl")


def _row(task: BatchTask, result: JobResult) -> dict[str, Any]:
    r = result.results
    return {
        "id": task.id,
        "status": result.status,
        "output": r.output if r is not None else None,
        "error": result.error,
        "task": task.task,
        "persona": task.persona,
        "model": task.model,
        "session": task.session,
        "attempts": result.attempts,
        "duration": round(result.duration, 3),
        "run_id": result.detail.get("run_id"),
        "exit_code": result.detail.get("exit_code"),
        "host": result.host,
        "finished_at": now_iso(),
    }


def _job(task: BatchTask, options: BatchOptions) -> RunJob:
    return RunJob(
        key=task.id, task=task, cwd=options.cwd,
        timeout=task.timeout if task.timeout is not None else options.timeout,
        attempts=(task.retries if task.retries is not None else options.retries) + 1,
        backoff=options.backoff, command=options.command, num_cpus=options.num_cpus,
    )  # fmt: skip


def run_batch(
    tasks_file: Path, options: BatchOptions, *, executor: Executor, progress: Progress
) -> BatchOutcome:
    """Run every task of ``tasks_file`` that has no result yet; returns the counts."""
    tasks = load_tasks(tasks_file)  # every line is checked before anything runs
    out = options.out or default_results_path(tasks_file)
    by_id = {t.id: t for t in tasks}
    with ResultLog(out) as log:
        done = read_results(out)
        todo = [t for t in tasks if t.id not in done]
        progress.begin(len(tasks), len(tasks) - len(todo))
        jobs = [_job(t, options) for t in todo]
        counts = {"ok": 0, "failed": 0}

        def finished(result: JobResult) -> None:
            row = _row(by_id[result.key], result)
            log.append(row)
            counts["failed" if row["status"] == "failure" else "ok"] += 1
            progress.finished(row)

        executor.run(
            jobs, concurrency=options.concurrency,
            on_start=lambda key, _pid: progress.started(key), on_done=finished,
        )  # fmt: skip
    progress.end(str(out))
    return BatchOutcome(
        results=out, total=len(tasks), skipped=len(tasks) - len(todo), ok=counts["ok"],
        failed=counts["failed"],
    )  # fmt: skip
