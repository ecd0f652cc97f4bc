"""`personae context ...`: assemble a role's context, or show its budget report."""

from __future__ import annotations

import inspect
import json
from typing import TYPE_CHECKING, Annotated

import typer

from personae.cli._options import JsonOpt, RootOpt, with_options
from personae.cli._root import project_root
from personae.errors import CommandLineError, UnknownNameError

if TYPE_CHECKING:
    from personae.context.assemble import AssembledContext

__all__ = ["app"]

app = typer.Typer(
    help="Assemble what a role sees (fitted to a token budget) and report on it.",
    no_args_is_help=True,
)

RoleOpt = Annotated[
    str, typer.Option("--role", "-r", help="Role profile (manager, worker, client, builder, ...).")
]
PersonaOpt = Annotated[str | None, typer.Option("--persona", "-p", help="Active persona.")]
TaskOpt = Annotated[
    str | None,
    typer.Option(
        "--task",
        "-t",
        help=(
            "Task text, or the name of a task file (NAME or NAME.md) in "
            ".personae/project/tasks/ or in a goal step's tasks/ folder "
            "(.personae/project/goals/N/M/)."
        ),
    ),
]
SessionOpt = Annotated[
    str | None,
    typer.Option("--session", "-s", help="Conversation session id in .personae/state.db."),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="Model (decides tokenizer and window); default PERSONAE_MODEL."
    ),
]
BudgetOpt = Annotated[int | None, typer.Option("--budget", min=1, help="Budget in tokens.")]
WindowOpt = Annotated[
    int | None,
    typer.Option("--window", min=1, help="Context window in tokens (budget = share of it)."),
]
StepOpt = Annotated[
    str | None,
    typer.Option("--step", help="Current step (NN-goal/NN-step) under .personae/project/goals/."),
]


def _assemble_from(  # noqa: PLR0917
    role: RoleOpt,
    persona: PersonaOpt = None,
    task: TaskOpt = None,
    session: SessionOpt = None,
    model: ModelOpt = None,
    budget: BudgetOpt = None,
    window: WindowOpt = None,
    step: StepOpt = None,
    as_json: JsonOpt = False,  # declared here for both commands, read by each
    root: RootOpt = None,
) -> AssembledContext:
    """The context the options `build` and `report` share ask for.

    The signature declares those options once (:func:`with_options`); a command's own
    options are listed between ``--step`` and ``--json``.
    """
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.api.context import assemble

    if budget is not None and window is not None:
        raise typer.BadParameter("give --budget or --window, not both")
    try:
        return assemble(
            project_root(root), role, persona=persona, task=task, session=session,
            model=model, budget=budget, window=window, step=step,
        )  # fmt: skip
    except UnknownNameError as exc:  # a flag naming nothing (--persona, --role): usage
        raise CommandLineError.of(exc) from None


_assemble_options = with_options(_assemble_from, own_before="as_json")

_SHARED = tuple(inspect.signature(_assemble_from).parameters)
"""The names of the options `build` and `report` share."""


def _assemble(ctx: typer.Context) -> AssembledContext:
    """The context a `build` or `report` command line asks for (its shared options)."""
    return _assemble_from(**{name: ctx.params[name] for name in _SHARED})


@app.command("build")
@_assemble_options
def build(
    ctx: typer.Context,
    as_json: bool,
    report: Annotated[
        bool, typer.Option("--report", help="Also print the budget report (on stderr).")
    ] = False,
) -> None:
    """Print the rendered context for ROLE (or JSON with `rendered` and `report`)."""
    assembled = _assemble(ctx)
    if as_json:
        payload = {
            "rendered": assembled.render(),
            "report": assembled.report().model_dump(mode="json"),
        }
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    typer.echo(assembled.render())
    if report:
        typer.echo(assembled.report().to_text(), err=True)


@app.command("report")
@_assemble_options
def report_cmd(ctx: typer.Context, as_json: bool) -> None:
    """Print only the budget report for ROLE."""
    rep = _assemble(ctx).report()
    if as_json:
        typer.echo(json.dumps(rep.model_dump(mode="json"), ensure_ascii=False, indent=2))
    else:
        typer.echo(rep.to_text())


@app.command("roles")
def roles(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """List the role profiles (built-in and .personae/profiles.yaml) and their sections."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.context.profiles import load_profiles

    profiles = load_profiles(project_root(root))
    if as_json:
        data = {
            r: [s.model_dump(mode="json", exclude_none=True) for s in profiles.get(r).sections]
            for r in profiles.roles
        }
        typer.echo(json.dumps(data, indent=2))
        return
    for r in profiles.roles:
        p = profiles.get(r)
        typer.echo(f"{r:<16} {', '.join(s.tag for s in p.sections)}")
