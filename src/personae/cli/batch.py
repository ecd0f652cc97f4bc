"""`personae batch TASKS.jsonl`: many independent team runs, resumable, locally or on Ray."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from personae.cli._options import (
    AddressOpt,
    ExecutorOpt,
    MaxCostOpt,
    MaxRequestsOpt,
    MaxTokensTotalOpt,
)
from personae.limits import DEFAULTS

if TYPE_CHECKING:
    from personae.lineage import Budget

__all__ = ["register"]


def _caps(
    root: Path, models: list[str | None], flags: tuple[int | None, int | None, float | None]
) -> Budget:
    """The batch's caps from its flags, checked before any task runs (a cost cap needs a
    price for every task's model; a task without one runs on the default model)."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.lineage import Budget
    from personae.project import Project
    from personae.settings import PersonaeSettings, chosen_model
    from personae.team.grouprun import group_caps

    calls, tokens, cost = flags
    default = chosen_model(None, PersonaeSettings(), Project.open(root).config.model)[0]
    return group_caps(root, Budget(tokens=tokens, cost=cost, calls=calls),
                      [m or default for m in models])  # fmt: skip


def register(app: typer.Typer) -> None:
    """Add ``batch`` to the main app."""

    @app.command("batch")
    def batch(  # noqa: PLR0917
        tasks: Annotated[Path, typer.Argument(help="Task file: one JSON object per line.")],
        executor: ExecutorOpt = "local",
        address: AddressOpt = None,
        concurrency: Annotated[
            int, typer.Option("--concurrency", min=1, max=1024, help="Runs at once.")
        ] = 2,
        out: Annotated[
            Path | None,
            typer.Option("--out", help="Result file (default: TASKS.results.jsonl)."),
        ] = None,
        timeout: Annotated[
            float, typer.Option("--timeout", min=0.1, help="Seconds per attempt.")
        ] = DEFAULTS.handover_timeout,
        retries: Annotated[
            int, typer.Option("--retries", min=0, max=10, help="Retries per task.")
        ] = 1,
        num_cpus: Annotated[
            float | None,
            typer.Option("--num-cpus", min=0.01, help="CPUs per task on Ray (default 1)."),
        ] = None,
        root: Annotated[
            Path | None, typer.Option("--root", help="Project folder the runs work in.")
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="JSON events on stdout (begin, start, done, end).")
        ] = False,
        max_requests: MaxRequestsOpt = None,
        max_tokens_total: MaxTokensTotalOpt = None,
        max_cost: MaxCostOpt = None,
    ) -> None:
        """Run every task of TASKS.jsonl as its own team run (a child `personae run`).

        Fields per line: task (or prompt), and optional id, persona, model, session,
        timeout, retries. One JSON result line per task goes to the result file as it
        ends; run again, a batch skips the tasks that have a result. Exit 0 when no
        task failed, 3 when some did.
        """
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.batch.engine import BatchOptions, run_batch
        from personae.batch.progress import Progress
        from personae.batch.tasks import load_tasks
        from personae.cli._preflight import before_run
        from personae.cli._root import project_root
        from personae.persona.preflight import check_models, check_personas
        from personae.workflow.engines import check_executor, open_executor

        with before_run():  # a bad line or flag: one line, exit 2, before any cluster starts
            loaded = load_tasks(tasks)
            check_executor(executor, address)
            cwd = project_root(root, required=True)  # runs store nothing outside a project
            check_personas(
                cwd, [(t.persona, tasks, f"task {t.id!r} persona") for t in loaded if t.persona]
            )
            check_models(cwd, [(t.model, tasks, f"task {t.id!r} model") for t in loaded if t.model])
            caps = _caps(cwd, [t.model for t in loaded],
                         (max_requests, max_tokens_total, max_cost))  # fmt: skip
        progress = Progress(
            "json" if as_json else ("tty" if sys.stderr.isatty() else "plain"),
            sys.stderr, sys.stdout,
        )  # fmt: skip
        options = BatchOptions(
            cwd=cwd, out=out, concurrency=concurrency, timeout=timeout,
            retries=retries, num_cpus=num_cpus,
        )  # fmt: skip
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.store.status import RunStatus
        from personae.team.grouprun import group_run

        # The batch is a run of its own: its tasks' runs link to it (`runs show RUN --tree`).
        with group_run(options.cwd, f"batch {tasks.name}", asked=caps) as group:
            with open_executor(executor, address=address, tie=True) as runner:
                outcome = run_batch(tasks, options, executor=runner, progress=progress)
            group.status = RunStatus.DONE if outcome.failed == 0 else (
                RunStatus.PARTIAL if outcome.ok else RunStatus.FAILED
            )  # fmt: skip
        if not as_json:
            typer.echo(f"batch run {group.run_id}; its tree: personae runs show "
                       f"{group.run_id} --tree", err=True)  # fmt: skip
        raise typer.Exit(outcome.exit_code)
