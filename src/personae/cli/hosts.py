"""`personae hosts ...`, `personae hook ...` and `personae doctor`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from personae.cli._options import JsonOpt, MemoryDirOpt, MindPromptOpt, RootOpt, StoreOpt
from personae.cli._root import project_root

__all__ = ["app", "hook_app", "register"]

app = typer.Typer(help="Host instruction files and hooks.", no_args_is_help=True)
hook_app = typer.Typer(help="Host hook gates.", no_args_is_help=True)


@app.command("render")
def render_command(
    write: Annotated[bool, typer.Option("--write", help="Write repo-local files.")] = False,
    gate: Annotated[
        list[str] | None, typer.Option("--gate", help="Gate pattern for the hook (repeatable).")
    ] = None,
    root: RootOpt = None,
    personae: Annotated[
        str | None,
        typer.Option(
            "--personae", help="Absolute path hooks and MCP entries run (default: this install)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Render host instructions, hook configs and MCP entries (print, or --write them)."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.hosts.render import installed_personae, plan
    from personae.hosts.render import write as write_files
    from personae.hosts.snippets import global_instructions, home_instructions

    exe = personae or installed_personae()
    if not Path(exe).is_absolute():
        raise typer.BadParameter(f"{exe!r} is not an absolute path", param_hint="--personae")
    # printing works anywhere; --write only in a project (outside one it writes nothing)
    base = project_root(root, required=write)
    changes = plan(base, list(gate or []), personae=exe)
    written = write_files(base, changes) if write else []
    home = home_instructions(exe, str(base)).rstrip("\n")
    if as_json:
        files = [
            {"path": c.path, "existed": c.existed, "changed": c.changed}
            | ({"written": c.path in written} if write else {"text": c.text})
            for c in changes
        ]
        where = [{"host": str(h), "path": p} for h, p in global_instructions().items()]
        body = {
            "root": str(base),
            "personae": exe,
            "files": files,
            "global_instructions": where,
            "home_instructions": home,
        }
        typer.echo(json.dumps(body, indent=2))
        return
    if write:
        for change in changes:
            state = "wrote" if change.path in written else "unchanged"
            typer.echo(f"{state}: {change.path}")
    else:
        for change in changes:
            typer.echo(f"===== {change.path} ({'update' if change.existed else 'new'}) =====")
            typer.echo(change.text.rstrip("\n"))
            typer.echo("")
    typer.echo("")
    typer.echo(home)


@app.command("check")
def check_command(root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """Check the host files of a repository as each host will use them; exit 1 on any FAIL."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.hosts.checkitem import item_lines
    from personae.hosts.hostcheck import check_hooks
    from personae.hosts.render import check

    base = project_root(root)
    items = check(base) + check_hooks(base)
    if as_json:
        rows = [{"name": i.name, "ok": i.ok, "detail": i.detail, "fix": i.fix} for i in items]
        ok = all(i.ok for i in items)
        typer.echo(json.dumps({"root": str(base), "ok": ok, "items": rows}, indent=2))
    else:
        for line in item_lines(items):
            typer.echo(line)
    if not all(i.ok for i in items):
        raise typer.Exit(1)


@hook_app.command(
    "pre-tool-use",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def pre_tool_use_command(ctx: typer.Context) -> None:
    """PreToolUse gate: [--gate REGEX]... [--store PATH] [--no-cache]; exit 2 blocks."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.hosts.gate import run

    raise typer.Exit(run(list(ctx.args)))


@hook_app.command(
    "post-tool-use",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def post_tool_use_command(ctx: typer.Context) -> None:
    """PostToolUse hook: record the host's tool call in the mind's journal [--host H]; exit 0."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.hosts.observe_hook import run

    raise typer.Exit(run(list(ctx.args)))


@hook_app.command("session-start")
def session_start_command() -> None:
    """SessionStart hook: tell the model its session id and to call bootstrap_session."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.hosts.gate import session_start

    raise typer.Exit(session_start())


def register(app: typer.Typer) -> None:
    """Add ``doctor`` to the main app."""

    @app.command("doctor")
    def doctor_command(  # noqa: PLR0917
        root: RootOpt = None,
        memory_dir: MemoryDirOpt = None,
        prompt: MindPromptOpt = None,
        store: StoreOpt = None,
        no_probe: Annotated[
            bool,
            typer.Option(
                "--no-probe", help="Skip the model server request and starting the MCP server."
            ),
        ] = False,
        hosts: Annotated[
            bool | None,
            typer.Option(
                "--hosts/--no-hosts",
                help="Check the host setup (default: only when host files use personae).",
                show_default=False,
            ),
        ] = None,
        timeout: Annotated[
            float, typer.Option(min=0.1, help="Seconds the model server may take to answer.")
        ] = 3.0,
        as_json: JsonOpt = False,
    ) -> None:
        """Check what each command needs: project, config, model, key, provider, store, hosts.

        Each item is OK, WARN or FAIL with the fix; exit 1 when any item fails.
        """
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.hosts.checkitem import item_lines
        from personae.hosts.doctor import diagnose
        from personae.mind.server import default_paths

        base = project_root(root)
        paths = default_paths(base, memory_dir=memory_dir, prompt=prompt, store=store)
        items = diagnose(
            base,
            paths,
            probe=not no_probe,
            hosts=hosts,
            found_from=None if root is not None else Path.cwd(),
            timeout=timeout,
        )
        counts = {
            level: sum(1 for i in items if i.level == level) for level in ("OK", "WARN", "FAIL")
        }
        if as_json:
            rows = [
                {"name": i.name, "level": i.level, "detail": i.detail, "fix": i.fix} for i in items
            ]
            typer.echo(json.dumps({"root": str(base), "items": rows, "counts": counts}, indent=2))
        else:
            for line in item_lines(items):
                typer.echo(line)
            typer.echo(f"{counts['OK']} OK, {counts['WARN']} WARN, {counts['FAIL']} FAIL")
        if counts["FAIL"]:
            sys.exit(1)
