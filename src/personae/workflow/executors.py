"""Executors run handover jobs; workflows do not care which one.

:class:`Executor` is the interface; :class:`LocalProcessExecutor` runs every
job as a separate local ``personae`` process (own process group, timeout,
retries), at most ``concurrency`` at a time. A distributed engine (Ray) can
implement the same interface later without any change to workflows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from personae.errors import PersonaeError
from personae.handover.child import (
    ChildOptions,
    CommandBuilder,
    personae_run_command,
    run_handover,
)
from personae.handover.schema import Results
from personae.limits import DEFAULTS

__all__ = ["Executor", "Job", "JobResult", "LocalProcessExecutor"]


@dataclass(frozen=True, kw_only=True)
class Job:
    """One handover to run."""

    key: str
    """Caller's name for the job (a step id)."""
    handover_path: Path
    """The handover file (results are written back into it)."""
    persona: str
    """Persona to run."""
    cwd: Path
    """Working directory of the child."""
    timeout: float = DEFAULTS.handover_timeout
    """Seconds per attempt."""
    attempts: int = DEFAULTS.handover_attempts
    """Attempts in total."""
    backoff: float = DEFAULTS.handover_backoff
    """First retry delay (doubles)."""
    model: str | None = None
    """Model for the child, if any."""


@dataclass(frozen=True, kw_only=True)
class JobResult:
    """How a job ended."""

    key: str
    """The job's key."""
    status: str
    """``success``, ``failure`` or ``partial``."""
    results: Results | None
    """The handover's results."""
    attempts: int
    """Attempts made."""
    duration: float
    """Seconds from first spawn to the end."""
    timed_out: bool = False
    """Whether the last attempt timed out."""
    error: str | None = None
    """Error text on failure."""


class Executor(Protocol):
    """Runs jobs, at most ``concurrency`` at once, reporting starts and ends."""

    def run(
        self,
        jobs: Sequence[Job],
        *,
        concurrency: int,
        on_start: Callable[[str, int], None] | None = None,
        on_done: Callable[[JobResult], None] | None = None,
    ) -> list[JobResult]:
        """Run every job; returns results in completion order.

        ``on_start(key, pid)`` and ``on_done(result)`` may be called from worker threads.
        """
        ...


class LocalProcessExecutor:
    """Each job is a local child process (``personae run`` by default).

    Children are not tied to this process (``tie=False`` of
    :func:`~personae.handover.child.run_child`): a chain killed with its
    children still at work adopts them on ``--resume``. Their tools still die
    with them.
    """

    def __init__(self, command: CommandBuilder = personae_run_command) -> None:
        self.command = command

    def _one(self, job: Job, on_start: Callable[[str, int], None] | None) -> JobResult:
        start = time.monotonic()
        try:
            child = ChildOptions(
                timeout=job.timeout, attempts=job.attempts, backoff=job.backoff,
                command=self.command, persona=job.persona, model=job.model, tie=False,
            )  # fmt: skip
            outcome = run_handover(
                job.handover_path,
                cwd=job.cwd,
                options=child,
                on_start=(lambda pid: on_start(job.key, pid)) if on_start else None,
            )
        except PersonaeError as exc:
            return JobResult(
                key=job.key,
                status="failure",
                results=None,
                attempts=0,
                duration=time.monotonic() - start,
                error=str(exc),
            )
        results = outcome.handover.results
        return JobResult(
            key=job.key,
            status=outcome.status,
            results=results,
            attempts=len(outcome.attempts),
            duration=time.monotonic() - start,
            timed_out=bool(outcome.attempts and outcome.attempts[-1].timed_out),
            error=results.error if results is not None else None,
        )

    def run(
        self,
        jobs: Sequence[Job],
        *,
        concurrency: int,
        on_start: Callable[[str, int], None] | None = None,
        on_done: Callable[[JobResult], None] | None = None,
    ) -> list[JobResult]:
        """Run ``jobs`` on a pool of ``concurrency`` supervising threads (one process each)."""
        done: list[JobResult] = []
        if not jobs:
            return done
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = [pool.submit(self._one, job, on_start) for job in jobs]
            for future in as_completed(futures):
                result = future.result()
                if on_done is not None:
                    on_done(result)
                done.append(result)
        return done
