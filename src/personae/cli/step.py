"""`personae research-step`: research one step, written to its ``RESEARCH.md``."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from personae.cli import _options
from personae.cli._root import project_root

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``research-step`` to the main app."""

    @app.command("research-step")
    def research_step_command(
        step: Annotated[
            str | None,
            typer.Argument(
                help="The step (NN-goal/NN-step or its folder name); default: the current one."
            ),
        ] = None,
        persona: Annotated[str | None, typer.Option(help="The researching persona.")] = None,
        model: Annotated[
            str | None, typer.Option(help="provider:name (e.g. openai:gpt-4o, ollama:llama3).")
        ] = None,
        max_requests: _options.MaxRequestsOpt = None,
        as_json: _options.JsonOpt = False,
    ) -> None:
        """Research one step with the deep researcher's context profile and write the
        findings to the step's RESEARCH.md (the planner's step_research section).

        The step's text and the user's decisions for it reach the researcher in its
        instructions. Only a run whose every subtask was validated is written; the
        file is replaced atomically and nothing else is written by this command.
        """
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.api.results import Limits
        from personae.api.step_research import research_step, step_research_brief
        from personae.api.team import Team

        root = project_root(required=True)
        brief = step_research_brief(root, step)  # no steps, an unknown one: one line
        if not as_json:
            typer.echo(f"researching step {brief.step} (profile deep_researcher)", err=True)
        team = Team.from_project(
            root, model=model, persona=persona, limits=Limits(max_requests=max_requests)
        )
        done = research_step(team, step=brief.step)
        result = done.result
        if as_json:
            typer.echo(json.dumps({
                "step": done.step, "path": str(done.path), "written": done.written,
                "status": str(result.status), "run_id": result.run_id,
                "files_written_by_run": result.files_written,
            }))  # fmt: skip
        else:
            typer.echo(result.answer)
            if done.written:
                typer.echo(f"wrote {done.path}", err=True)
            else:
                typer.echo(
                    f"not written: the run ended {result.status} (only a run whose every "
                    f"subtask was validated is written); details: personae runs show "
                    f"{result.run_id}",
                    err=True,
                )
        if not done.written:
            raise typer.Exit(result.status.exit_code or 1)
