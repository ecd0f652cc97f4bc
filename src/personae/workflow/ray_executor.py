"""The Ray executor (``personae[ray]``): every job is a Ray task on a cluster.

Each job runs as one Ray task with the same contract as a local child: the
task starts the same ``personae`` child process on its node (own process
group, timeout, retries with backoff, results written back), tied to the task's
worker (it dies with it). The task is a Ray *generator*: it yields ``start``
(the child's pid and the node's host name) as soon as the child runs, then the
job's :class:`~personae.workflow.executors.JobResult`. Ctrl-C cancels every
task (``ray.cancel``); a cancelled task kills its child's process group before
it ends. Ray's own task retries are off: retries are the job's. A job asking for
resources no node of the cluster has fails at once (Ray would wait forever).

``address=None`` starts a private local cluster bound to the loopback
interface (dashboard and usage reporting off) and shuts it down on
:meth:`RayExecutor.close`; ``"auto"`` or ``HOST:PORT`` joins a running cluster
(``ray start --head``). Nothing here is imported by ``import personae``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from personae.errors import UsageError
from personae.handover.child import CommandBuilder
from personae.lineage import Budget, Running, current, running
from personae.workflow.executors import (
    Executor,
    Job,
    JobResult,
    Report,
    Stopper,
    Work,
    run_supervised,
)

__all__ = ["LOCAL_CLUSTER_ENV", "RayExecutor", "import_ray"]

LOCAL_CLUSTER_ENV: dict[str, str] = {
    "RAY_USAGE_STATS_ENABLED": "0",
    # Ray binds its servers to the node address; with this off it takes the
    # loopback address as the node's (read when ray is first imported).
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
}
"""Environment for a private local cluster: no usage reporting, loopback only."""

_CANCEL_WAIT = 30.0
"""Seconds a cancelled task waits for its job's thread to end."""


def import_ray(*, local: bool) -> Any:
    """``import ray`` (with the local-cluster environment first when ``local``)."""
    if local:
        for name, value in LOCAL_CLUSTER_ENV.items():
            os.environ.setdefault(name, value)
    try:
        # local import: optional extra personae[ray]
        import ray
    except ImportError:
        raise UsageError(
            "the Ray executor needs Ray: pip install 'personae[ray]'", field="--executor"
        ) from None
    return ray


def _job_stream(job: Work, parent: Running | None = None) -> Iterator[tuple[str, Any]]:
    """The Ray task body: run ``job`` in a thread, yield its start(s), then its result.

    ``parent``: the driver's running run when the job was submitted (its budget left then),
    so the job's child run links to it as on the local executor."""
    events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    stopper = Stopper()
    host = socket.gethostname()

    def body() -> None:
        try:
            tell = Report(on_start=lambda _key, pid: events.put(("start", (pid, host))))
            with running(parent) if parent is not None else contextlib.nullcontext():
                result = run_supervised(job, stopper, tell, tie=True)
            events.put(("done", result))
        except BaseException as exc:  # reported to the driver, never lost
            events.put(("error", f"{type(exc).__name__}: {exc}"))

    # The child is tied to this thread (parent-death signal): it lives until the child ends.
    worker = threading.Thread(target=body, name=f"personae-job-{job.key}", daemon=True)
    worker.start()
    try:
        while True:
            try:
                kind, value = events.get(timeout=0.2)
            except queue.Empty:
                continue
            yield kind, value
            if kind != "start":
                return
    except BaseException:  # ray.cancel: KeyboardInterrupt or GeneratorExit
        stopper.stop()
        worker.join(_CANCEL_WAIT)
        raise


class RayExecutor(Executor):
    """Runs jobs as Ray tasks (a local cluster, or the one at ``address``).

    ``runtime_env`` is passed to ``ray.init`` (e.g. ``{"env_vars": {...}}``);
    ``num_cpus`` sizes a private local cluster (default: this machine's CPUs).
    ``command`` replaces the child command of chain steps, as for the local
    executor (it must be importable on the cluster's nodes). Use as a context
    manager, or call :meth:`close`.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        runtime_env: Mapping[str, Any] | None = None,
        num_cpus: int | None = None,
        command: CommandBuilder | None = None,
    ) -> None:
        self.address = address
        self.runtime_env = dict(runtime_env) if runtime_env else None
        self.num_cpus = num_cpus
        self.command = command
        self._ray: Any = None
        self._remote: Any = None
        self._started = False

    def connect(self) -> Any:
        """Join (or start) the cluster once; returns the ``ray`` module."""
        if self._ray is not None:
            return self._ray
        ray = import_ray(local=self.address is None)
        if not ray.is_initialized():
            options: dict[str, Any] = {
                "log_to_driver": False,
                "configure_logging": False,
                "runtime_env": self.runtime_env,
            }
            if self.address is None:
                options |= {"num_cpus": self.num_cpus, "include_dashboard": False}
            else:
                options["address"] = self.address
            try:
                ray.init(**options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = self.address or "a local cluster"
                raise UsageError(f"cannot start Ray on {where}: {exc}", field="--address") from None
            self._started = True
        self._ray = ray
        self._remote = ray.remote(_job_stream)
        return ray

    def close(self) -> None:
        """Disconnect (a cluster this executor started is shut down with it)."""
        if self._ray is not None and self._started:
            self._ray.shutdown()
        self._ray = self._remote = None
        self._started = False

    def _submit(self, job: Work) -> Any:
        if self.command is not None and isinstance(job, Job):
            job = replace(job, command=self.command)
        options: dict[str, Any] = {
            "num_cpus": job.num_cpus if job.num_cpus is not None else 1,
            "max_retries": 0,
            "name": f"personae:{job.key}",
        }
        if job.resources:
            options["resources"] = dict(job.resources)
        parent = current()  # the chain's or batch's run: what it has left now travels along
        if parent is not None:
            left = functools.partial(Budget, **parent.budget_left().as_dict())
            parent = replace(parent, budget_left=left)
        return self._remote.options(**options).remote(job, parent)

    def _infeasible(self, job: Work, nodes: list[dict[str, float]]) -> str | None:
        """Why no node of the cluster can ever run ``job`` (Ray would wait forever)."""
        need = {"CPU": job.num_cpus if job.num_cpus is not None else 1.0, **job.resources}
        if any(all(node.get(k, 0.0) >= v for k, v in need.items()) for node in nodes):
            return None
        wanted = ", ".join(f"{k}={v:g}" for k, v in need.items())
        return f"no node of the Ray cluster offers {wanted}"

    def _failure(self, job: Work, error: str, started: float) -> JobResult:
        return JobResult(
            key=job.key, status="failure", results=None, attempts=0,
            duration=time.monotonic() - started, error=error,
        )  # fmt: skip

    def _run_all(self, jobs: list[Work], concurrency: int, report: Report) -> None:
        """Submit up to ``concurrency`` tasks at a time; report starts and ends as they come."""
        ray = self.connect()
        nodes = [dict(n.get("Resources", {})) for n in ray.nodes() if n.get("Alive")]
        waiting = list(jobs)
        running: dict[Any, tuple[Work, float]] = {}
        try:
            while waiting or running:
                while waiting and len(running) < concurrency:
                    job = waiting.pop(0)
                    why = self._infeasible(job, nodes)
                    if why is None:
                        running[self._submit(job)] = (job, time.monotonic())
                        continue
                    report.finished(self._failure(job, why, time.monotonic()))
                ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
                for stream in ready:
                    job, started = running[stream]
                    try:
                        kind, value = ray.get(next(stream))
                    except StopIteration:
                        kind, value = "error", "the task ended without a result"
                    except ray.exceptions.RayError as exc:
                        kind, value = "error", f"Ray: {str(exc).strip().splitlines()[-1]}"
                    if kind == "start":
                        report.started(job.key, int(value[0]))
                        continue
                    del running[stream]
                    report.finished(value if kind == "done" else self._failure(job, value, started))
        except BaseException:
            for stream in running:
                # The task kills its child's group, then ends; should its worker die
                # first, the child dies with it (parent-death signal).
                ray.cancel(stream)
            raise
