"""`personae personas ...`: list, show, check and export the cast."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from personae.cli._options import JsonOpt, RootOpt
from personae.cli._root import project_root
from personae.errors import AmbiguousNameError, CommandLineError, UnknownNameError, UsageError

if TYPE_CHECKING:
    from personae.persona import Cast, Persona
    from personae.persona.problems import Problem

__all__ = ["app", "note_lines"]

app = typer.Typer(help="List, show, check and export personas.", no_args_is_help=True)

DirsOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--dir",
        "-d",
        help="Extra folder of persona/agent files, a plugin folder or a project (repeatable; "
        "later ones override earlier ones).",
    ),
]


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _safe(text: str) -> str:
    """``text`` with terminal control characters shown as ``\\xNN`` (files may be untrusted:
    an ESC sequence in a description must not retitle or clear the user's terminal)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _load(root: Path | None, dirs: list[Path] | None) -> Cast:
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.persona import Cast

    return Cast.load(project_root(root), dirs or [])


def _named(cast: Cast, name: str) -> Persona:
    """The persona ``name`` of ``cast``; an unknown NAME is usage (exit 2) naming the closest,
    a persona file that did not load says why (exit 1)."""
    found = cast.find(name)
    if found is not None:
        return found
    if name in cast.ambiguous:  # two plugins' agents share it: plugin:name picks one
        raise CommandLineError.of(AmbiguousNameError("persona", name, cast.ambiguous[name]))
    broken = [p for p in cast.errors if name in str(p.file)]
    if broken:  # the persona file exists but did not load: say why
        raise UsageError(broken[0].message, file=broken[0].file, line=broken[0].line)
    raise CommandLineError.of(UnknownNameError("persona", name, cast.personas))


def _summary(persona: Persona) -> dict[str, Any]:
    return {
        "name": persona.name,
        "description": persona.description,
        "source": str(persona.source) if persona.source else None,
        "source_kind": persona.source_kind,
        "tools": persona.tools,
        "unavailable_tools": persona.unavailable_tools,
        "model": persona.model,
        "max_steps": persona.max_steps,
        "context": persona.context.value,
        "skills": persona.skills,
    }


def _problem_hint(cast: Cast) -> None:
    if not cast.personas:
        typer.echo("personae: no personas found; `personae init` creates an example cast", err=True)
    if cast.problems:
        typer.echo(
            f"personae: {len(cast.errors)} errors, {len(cast.warnings)} warnings while loading;"
            " run `personae personas check` for details",
            err=True,
        )


@app.command("list")
def list_personas(dirs: DirsOpt = None, root: RootOpt = None, as_json: JsonOpt = False) -> None:
    """List the personas of the project (and --dir folders)."""
    cast = _load(root, dirs)
    people = [cast.personas[n] for n in sorted(cast.personas)]
    if as_json:
        typer.echo(json.dumps([_summary(p) for p in people], indent=2))
        _problem_hint(cast)
        return
    # local import: CLI start-up (rich's console loads only when this command prints)
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from personae.persona.render import tools_summary

    table = Table(title=f"{len(people)} personas, {len(cast.skills)} skills")
    for column in ("name", "kind", "tools", "context", "description"):
        table.add_column(column, overflow="fold")
    for p in people:
        desc = " ".join(p.description.split())
        # Text, not str: rich would read '[bold]' or '[/x]' in a description as markup.
        cells = (p.name, p.source_kind, tools_summary(p), p.context.value, desc)
        table.add_row(*(Text(_safe(t)) for t in cells))
    Console(width=160 if not sys.stdout.isatty() else None).print(table)
    _problem_hint(cast)


@app.command()
def show(
    name: Annotated[str, typer.Argument(help="Persona name.")],
    dirs: DirsOpt = None,
    root: RootOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one persona: every field and its system prompt (bundled ones too, as runs
    see them: researcher, repo-researcher)."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.persona.preflight import run_cast

    cast = run_cast(project_root(root), extra_dirs=dirs or [])
    persona = _named(cast, name)
    if cast.problems:
        _problem_hint(cast)
    if as_json:
        data = persona.model_dump(mode="json")
        data["context_gives"] = persona.context.gives
        data["context_default"] = "context" not in persona.model_fields_set
        data["skill_details"] = [
            {"name": s.name, "description": s.description, "location": str(s.path)}
            for s in cast.persona_skills(name)
        ]
        typer.echo(json.dumps(data, indent=2))
        return
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.persona.render import tools_summary

    rows = [
        ("name", persona.name),
        ("description", " ".join(persona.description.split())),
        ("source", f"{persona.source} ({persona.source_kind})"),
        ("tools", tools_summary(persona)),
        ("unavailable tools", ", ".join(persona.unavailable_tools) or "-"),
        ("model", persona.model or "-"),
        ("max steps", str(persona.max_steps) if persona.max_steps is not None else "-"),
        ("temp workspace", "yes" if persona.needs_temp_workspace else "no"),
        ("context", persona.context_summary),
        ("skills", ", ".join(persona.skills) or "-"),
        ("mcp servers", ", ".join(persona.mcp_servers) or "-"),
        ("version", persona.version or "-"),
    ]
    for key, value in rows:
        typer.echo(f"{key + ':':<19}{_safe(value)}")
    typer.echo("\n--- system prompt ---")
    typer.echo(_safe(persona.system_prompt.rstrip()))


def note_lines(notes: list[Problem], shown: int = 6) -> list[str]:
    """One line per group of notes: how many files, the first ``shown`` of them (where
    Claude Code is silent, personae says it once, not once per file)."""
    groups: dict[str, list[Problem]] = {}
    for note in notes:
        groups.setdefault(note.group or note.message, []).append(note)
    lines = []
    for group, members in groups.items():
        files = [m.file.name if m.file.name != "SKILL.md" else m.file.parent.name
                 for m in members]  # fmt: skip
        more = f" and {len(files) - shown} more" if len(files) > shown else ""
        count = f"{len(files)} file{'s' if len(files) != 1 else ''}"
        lines.append(f"note: {count} {group}: {', '.join(files[:shown])}{more} "
                     "(--json lists each)")  # fmt: skip
    return lines


@app.command()
def check(
    dirs: DirsOpt = None,
    root: RootOpt = None,
    strict: Annotated[bool, typer.Option("--strict", help="Fail on warnings too.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Validate every persona, skill and plugin; print each problem as file:line: message.

    Exit 1 on any error (or any warning with --strict), else 0.
    """
    cast = _load(root, dirs)
    if as_json:
        payload = {
            "personas": len(cast.personas),
            "skills": len(cast.skills),
            "errors": len(cast.errors),
            "warnings": len(cast.warnings),
            "notes": len(cast.notes),
            "problems": [p.to_dict() for p in cast.problems],
        }
        typer.echo(json.dumps(payload, indent=2))
    else:
        for p in cast.problems:
            if p.severity != "note":
                where = f"{p.file}:{p.line}" if p.line is not None else str(p.file)
                typer.echo(_safe(f"{where}: {p.severity}: {p.message}"))
        for line in note_lines(cast.notes):
            typer.echo(_safe(line))
        typer.echo(
            f"checked {len(cast.personas)} personas, {len(cast.skills)} skills: "
            f"{len(cast.errors)} errors, {len(cast.warnings)} warnings"
        )
    if cast.errors or (strict and cast.warnings):
        raise typer.Exit(1)


@app.command()
def export(
    name: Annotated[str, typer.Argument(help="Persona name.")],
    fmt: Annotated[str, typer.Option("--format", help="Output format: claude-code.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="File to write.")] = None,
    dirs: DirsOpt = None,
    root: RootOpt = None,
) -> None:
    """Export a persona as a Claude Code agent file (to --out, or stdout)."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.persona.export import to_claude_code
    from personae.persona.preflight import run_cast

    if fmt != "claude-code":
        raise CommandLineError.of(
            UnknownNameError("export format", fmt, ["claude-code"], field="--format")
        )
    cast = run_cast(project_root(root), extra_dirs=dirs or [])
    text = to_claude_code(cast.as_written(_named(cast, name).name))
    if out is None:
        typer.echo(text, nl=False)
        return
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.persona.scaffold import write_text_atomic

    write_text_atomic(out, text)
    typer.echo(f"wrote {out}")
