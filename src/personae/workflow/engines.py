"""Choosing an executor by name: ``local`` (child processes) or ``ray`` (Ray tasks)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from personae.errors import UnknownNameError, UsageError
from personae.workflow.executors import Executor, LocalProcessExecutor
from personae.workflow.ray_executor import RayExecutor

__all__ = ["EXECUTORS", "check_executor", "open_executor"]

EXECUTORS = ("local", "ray")
"""Names accepted by :func:`open_executor` (and ``--executor``)."""


def check_executor(kind: str, address: str | None = None) -> None:
    """Refuse an executor name that is not one of :data:`EXECUTORS` (naming the closest) and
    ``--address`` without ``ray``, before anything starts."""
    if kind not in EXECUTORS:
        raise UnknownNameError("executor", kind, EXECUTORS, field="--executor")
    if kind == "local" and address is not None:
        raise UsageError("--address needs --executor ray", field="--address")


@contextlib.contextmanager
def open_executor(
    kind: str, *, address: str | None = None, tie: bool = False
) -> Iterator[Executor]:
    """The executor named ``kind`` (``local`` or ``ray``), closed on exit.

    ``address`` (Ray only): ``auto`` or ``HOST:PORT`` of a running cluster;
    without it a private local cluster is started and shut down on exit (Ray is
    imported only then). ``tie``: local children die with this process (batches).
    """
    check_executor(kind, address)
    if kind == "local":
        yield LocalProcessExecutor(tie=tie)
        return
    with RayExecutor(address) as ray_executor:
        ray_executor.connect()  # a cluster that cannot start fails before any work
        yield ray_executor
