"""`personae init`: scaffold a project."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from personae.errors import UsageError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``init`` to the main app."""

    @app.command("init")
    def init(
        directory: Annotated[
            Path, typer.Argument(help="Project folder (created if missing).")
        ] = Path("."),
        as_json: Annotated[
            bool, typer.Option("--json", help="JSON output: created, kept, unchanged.")
        ] = False,
    ) -> None:
        """Scaffold .personae/ with the example cast (three personas, two skills, a directive).

        Safe to run again: existing files are never overwritten.
        """
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.layout import Layout, user_data_dir
        from personae.persona.scaffold import init_project

        target = Layout(directory).dir
        if target.resolve() == user_data_dir().resolve():
            raise UsageError(
                "is your personae data folder (PERSONAE_HOME), never a project: a project "
                "there would take in every folder below it; run 'personae init' in the "
                "project's own folder",
                file=target,
            )
        if target.exists() and not target.is_dir():
            raise UsageError("exists but is not a folder; move it away first", file=target)
        report = init_project(directory)
        if as_json:
            listed = {
                "root": str(report.root),
                "created": [str(r) for r in report.created],
                "kept": [str(r) for r in report.kept],
                "unchanged": [str(r) for r in report.unchanged],
            }
            typer.echo(json.dumps(listed, indent=2))
            return
        for rel in report.created:
            typer.echo(f"created  {directory / rel}")
        for rel in report.kept:
            typer.echo(f"kept     {directory / rel} (differs from the example; left as is)")
        if report.changed_anything:
            n = len(report.created)
            typer.echo(
                f"personae init: created {n} file{'s' if n != 1 else ''} in {directory}"
                " (try: personae personas list)"
            )
        else:
            typer.echo(
                f"personae init: nothing to do; {directory} already has the example cast "
                f"({len(report.unchanged)} files unchanged, {len(report.kept)} kept with your "
                "changes)"
            )
