"""A run that groups the runs a command starts: ``personae chain run`` and ``personae batch``.

A chain's steps and a batch's tasks each run as a child ``personae run``; this gives the
command a run of its own (its task names the chain or the batch, its model is ``-``), so
the children link to one parent: ``personae runs show RUN --tree`` shows the whole job,
the OpenTelemetry export puts it in one trace, and the project's ``limits:`` (or the
budget this command inherited) cap the whole job: each child gets what is left when it
starts. The group run ends ``done``, ``partial`` or ``failed`` as the command does, with
the usage of every run below it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path

from personae.errors import UsageError
from personae.lineage import Budget, inherited, running
from personae.project import Project
from personae.store.db import Store
from personae.store.runs import RunStore
from personae.store.status import RunStatus
from personae.team.runlog import end_run, start_run
from personae.team.treelink import check_cost_cap, child_usage, link_run, tree_caps

__all__ = ["GroupRun", "group_caps", "group_run"]


@dataclasses.dataclass(kw_only=True)
class GroupRun:
    """The run of a chain or batch command while it runs."""

    run_id: str
    """Its id (the children's parent run)."""
    status: RunStatus = RunStatus.DONE
    """How it ends (set by the command before the block ends)."""


def group_caps(root: Path, asked: Budget, models: Iterable[str | None]) -> Budget:
    """Check the caps a chain or batch was asked for (its flags) before anything runs: a
    cost cap needs a price for every model its children use (``models``; ``None``: a
    model not known here, not checked). One :class:`~personae.errors.UsageError` naming
    the flag or config field."""
    project = Project.open(root)
    cost, field = asked.cost, "--max-cost"
    if cost is None:
        cost, field = project.config.limits.max_cost, "limits.max_cost"
    for model in dict.fromkeys(models):
        check_cost_cap(project.price_table(), model, cost, field=field)
    check_cost_cap(project.price_table(), None, cost, field=field)  # the value itself
    return asked


@contextlib.contextmanager
def group_run(
    root: Path, task: str, *, persona: str | None = None, asked: Budget | None = None
) -> Iterator[GroupRun]:
    """Store a run for ``task`` in the project at ``root`` and make it the parent of every
    child run started in the block (any thread); ends it with the block (an exception:
    ``failed``, an interrupt: ``cancelled``). ``asked``: the command's caps (its flags),
    else the config's ``limits:``; tightened by what this process inherited."""
    project = Project.open(root)
    try:
        link = inherited()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    caps = tree_caps(asked or Budget(), project.config.limits, link.budget)
    prices = project.price_table()
    with Store(project.state_db) as store:
        runs = RunStore(store)
        started = start_run(runs, task=task, persona=persona, session=None, sandbox="-")
        runs.create(run_id=started.run_id, task=task, model="-", persona=persona)  # heartbeat
        group = GroupRun(run_id=started.run_id)
        spent = child_usage(runs, started.run_id, prices)

        def left() -> Budget:
            used = spent()
            return caps.left_after(tokens=used.tokens, cost=used.cost, calls=used.calls)

        me = dataclasses.replace(link_run(runs, started.run_id, link, caps), budget_left=left)
        status, reason = RunStatus.FAILED, "stopped before it ended"
        try:
            with running(me, process_wide=True):
                yield group
            status, reason = group.status, ""
        except (KeyboardInterrupt, SystemExit) as exc:
            code = getattr(exc, "code", 1)
            status = RunStatus.CANCELLED if isinstance(exc, KeyboardInterrupt) else (
                group.status if code in (0, None) else RunStatus.FAILED
            )  # fmt: skip
            reason = "interrupted" if status is RunStatus.CANCELLED else ""
            raise
        except BaseException as exc:
            reason = str(exc) or type(exc).__name__
            raise
        finally:
            used = spent()
            end_run(
                runs, started.run_id, status=status, reason=reason or None,
                usage={"requests": used.calls, "tokens": used.tokens},
            )  # fmt: skip
