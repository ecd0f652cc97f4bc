"""Executors run jobs; workflows and batches do not care which one.

:class:`Executor` is the interface; :class:`LocalProcessExecutor` runs every
job as a separate local ``personae`` process (own process group, timeout,
retries), at most ``concurrency`` at a time, on a bounded thread pool.
:class:`~personae.workflow.ray_executor.RayExecutor` (the ``ray`` extra) runs
the same jobs as Ray tasks. A job is any :class:`Work`: a chain step's
handover (:class:`Job`) or a batch task (:class:`personae.batch.job.RunJob`).
"""

from __future__ import annotations

import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, Self

from personae.errors import PersonaeError
from personae.handover.child import (
    ChildOptions,
    CommandBuilder,
    execute_handover,
    kill_group,
    personae_run_command,
)
from personae.handover.schema import Results, ResultStatus
from personae.limits import DEFAULTS

__all__ = [
    "BaseJob",
    "Executor",
    "Job",
    "JobResult",
    "LocalProcessExecutor",
    "Report",
    "Stopper",
    "Work",
]


@dataclass(frozen=True, kw_only=True)
class JobResult:
    """How a job ended."""

    key: str
    """The job's key."""
    status: ResultStatus
    """``success``, ``failure`` or ``partial``."""
    results: Results | None
    """The handover's results (a batch task: its answer as results)."""
    attempts: int
    """Attempts made."""
    duration: float
    """Seconds from first spawn to the end."""
    timed_out: bool = False
    """Whether the last attempt timed out."""
    error: str | None = None
    """Error text on failure."""
    host: str | None = None
    """Host name of the machine that ran it (a Ray node), when known."""
    detail: Mapping[str, Any] = field(default_factory=dict)
    """Facts of the job's kind (a batch run: run id, exit code, usage)."""


class Stopper:
    """Cancellation for running jobs: kills the current child of each and refuses new ones.

    A job reports each child it starts (:meth:`started`); :meth:`stop` kills the
    process group of every running child, and a child started after it is killed
    at once (its job then ends with ``KeyboardInterrupt``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pids: dict[str, int] = {}
        self.stopped = False
        """Whether :meth:`stop` was called."""

    def started(self, key: str, pid: int) -> None:
        """Job ``key`` started child ``pid`` (a process group leader)."""
        with self._lock:
            stopped = self.stopped
            if not stopped:
                self._pids[key] = pid
        if stopped:
            kill_group(pid, grace=0.2)
            raise KeyboardInterrupt

    def ended(self, key: str) -> None:
        """Job ``key`` is over (its child is gone)."""
        with self._lock:
            self._pids.pop(key, None)

    def stop(self) -> None:
        """Kill every running child's group (SIGTERM, short grace, SIGKILL)."""
        with self._lock:
            self.stopped = True
            pids = list(self._pids.values())
            self._pids.clear()
        for pid in pids:
            kill_group(pid, grace=0.5)


class Work(Protocol):
    """Anything an executor runs: a key, what it needs, and a blocking run."""

    @property
    def key(self) -> str:
        """Caller's name for the job."""
        ...

    @property
    def num_cpus(self) -> float | None:
        """CPUs the job needs on a cluster (``None``: one)."""
        ...

    @property
    def resources(self) -> Mapping[str, float]:
        """Custom cluster resources the job needs (Ray ``resources``)."""
        ...

    def execute(self, on_start: Callable[[int], None] | None, *, tie: bool) -> JobResult:
        """Run to the end (all attempts); ``on_start(pid)`` for every child started.

        ``tie``: children die with the calling thread's process (see
        :func:`~personae.handover.child.run_child`).
        """
        ...


@dataclass(frozen=True, kw_only=True)
class BaseJob:
    """What every job in a child process has: a key, a folder, limits and resources."""

    key: str
    """Caller's name for the job (a step id, a batch task's id)."""
    cwd: Path
    """Working directory of the child."""
    timeout: float = DEFAULTS.handover_timeout
    """Seconds per attempt."""
    attempts: int = DEFAULTS.handover_attempts
    """Attempts in total."""
    backoff: float = DEFAULTS.handover_backoff
    """First retry delay (doubles)."""
    num_cpus: float | None = None
    """CPUs it needs on a cluster (``None``: one)."""
    resources: Mapping[str, float] = field(default_factory=dict)
    """Custom cluster resources it needs."""


@dataclass(frozen=True, kw_only=True)
class Job(BaseJob):
    """One handover to run (a chain step)."""

    handover_path: Path
    """The handover file (results are written back into it)."""
    persona: str
    """Persona to run."""
    model: str | None = None
    """Model for the child, if any."""
    command: CommandBuilder = personae_run_command
    """Builds the child's argv (``personae run --context-from ...``)."""

    def execute(self, on_start: Callable[[int], None] | None, *, tie: bool) -> JobResult:
        """Run the handover in a child until it succeeds or attempts run out."""
        start = time.monotonic()
        try:
            child = ChildOptions(
                timeout=self.timeout, attempts=self.attempts, backoff=self.backoff,
                command=self.command, persona=self.persona, model=self.model, tie=tie,
            )  # fmt: skip
            outcome = execute_handover(
                self.handover_path, cwd=self.cwd, options=child, on_start=on_start
            )
        except PersonaeError as exc:
            return JobResult(
                key=self.key, status="failure", results=None, attempts=0,
                duration=time.monotonic() - start, error=str(exc),
            )  # fmt: skip
        results = outcome.handover.results
        return JobResult(
            key=self.key,
            status=outcome.status,
            results=results,
            attempts=len(outcome.attempts),
            duration=time.monotonic() - start,
            timed_out=bool(outcome.attempts and outcome.attempts[-1].timed_out),
            error=results.error if results is not None else None,
        )


@dataclass
class Report:
    """Where an executor reports each job's start and end (completion order)."""

    on_start: Callable[[str, int], None] | None = None
    """Called with ``(key, pid)`` when a job's child runs."""
    on_done: Callable[[JobResult], None] | None = None
    """Called with each result as it comes."""
    done: list[JobResult] = field(default_factory=list)
    """The results so far, in completion order."""

    def started(self, key: str, pid: int) -> None:
        """Job ``key``'s child runs as ``pid``."""
        if self.on_start is not None:
            self.on_start(key, pid)

    def finished(self, result: JobResult) -> None:
        """A job ended."""
        if self.on_done is not None:
            self.on_done(result)
        self.done.append(result)


class Executor(ABC):
    """Runs jobs, at most ``concurrency`` at once, reporting starts and ends.

    A subclass implements :meth:`_run_all` (see :class:`LocalProcessExecutor`) and,
    when it holds something (a cluster connection), :meth:`close`. ``with executor:``
    closes it on the way out.
    """

    def close(self) -> None:  # noqa: B027 (optional: only an executor holding something)
        """Release what the executor holds (local processes: nothing)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def run(
        self,
        jobs: Sequence[Work],
        *,
        concurrency: int,
        on_start: Callable[[str, int], None] | None = None,
        on_done: Callable[[JobResult], None] | None = None,
    ) -> list[JobResult]:
        """Run every job; returns results in completion order.

        ``on_start(key, pid)`` and ``on_done(result)`` may be called from worker
        threads. Ctrl-C (``KeyboardInterrupt``) kills the running children and is
        raised again once they are gone.
        """
        report = Report(on_start=on_start, on_done=on_done)
        if jobs:
            self._run_all(list(jobs), max(1, concurrency), report)
        return report.done

    @abstractmethod
    def _run_all(self, jobs: list[Work], concurrency: int, report: Report) -> None:
        """Run the (non-empty) ``jobs``, ``concurrency`` (at least 1) at once, into ``report``."""


def run_supervised(job: Work, stopper: Stopper, report: Report, *, tie: bool) -> JobResult:
    """``job.execute`` with its children known to ``stopper`` (cancellation) and their
    starts told to ``report``; the result names this host."""

    def started(pid: int) -> None:
        stopper.started(job.key, pid)
        report.started(job.key, pid)

    try:
        result = job.execute(started, tie=tie)
    finally:
        stopper.ended(job.key)
    return result if result.host else replace(result, host=socket.gethostname())


class LocalProcessExecutor(Executor):
    """Each job is a local child process (``personae run`` by default).

    ``command`` replaces the child command of chain steps (tests run a stand-in
    program). ``tie=False`` (chains): children are not tied to this process, so
    a chain killed with its children still at work adopts them on ``--resume``;
    their tools still die with them. ``tie=True`` (batches): children die with
    this process. Ctrl-C kills the running children either way.
    """

    def __init__(self, command: CommandBuilder | None = None, *, tie: bool = False) -> None:
        self.command = command
        self.tie = tie

    def _run_all(self, jobs: list[Work], concurrency: int, report: Report) -> None:
        """Run ``jobs`` on a pool of ``concurrency`` supervising threads (one process each)."""
        if self.command is not None:
            jobs = [replace(j, command=self.command) if isinstance(j, Job) else j for j in jobs]
        stopper = Stopper()
        pool = ThreadPoolExecutor(max_workers=concurrency)
        futures: set[Future[JobResult]] = {
            pool.submit(run_supervised, job, stopper, report, tie=self.tie) for job in jobs
        }
        try:
            while futures:
                finished, futures = wait(futures, timeout=0.5, return_when="FIRST_COMPLETED")
                for future in finished:
                    report.finished(future.result())
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            stopper.stop()
            # Their children are being killed; let them record it. (A future the shutdown
            # cancelled is never "done" for wait(): leave those out.)
            wait([f for f in futures if not f.cancelled()], timeout=30)
            raise
        pool.shutdown(wait=True)
