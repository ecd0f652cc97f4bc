"""What a run checks before anything is stored: its cast, persona, profile and model.

A mistake (an unknown persona or profile, a persona file that does not load, a model
spec that does not parse, a missing API key or scenario file) is a
:class:`~personae.errors.UsageError` raised here, before a run record exists, so a
typo never becomes a failed run. :func:`personae.team.session.run_turn` uses the same
functions, and ``personae run`` calls :func:`check_run` before it stores the run.

Light imports only (no pydantic-ai): ``personae run`` calls this before it announces
the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from personae.context.profiles import load_profiles
from personae.errors import AmbiguousNameError, ErrorPlace, UnknownNameError, UsageError
from personae.models.resolve import ModelResolver
from personae.persona.bundled import bundled_personas
from personae.persona.cast import SPAWN_CHECK_MARK, Cast
from personae.persona.model import Persona
from personae.project import Project

__all__ = [
    "active_persona", "check_models", "check_personas", "check_run", "profile_name", "run_cast",
]  # fmt: skip


def run_cast(
    root: Path, *, cast: Cast | None = None, extra_dirs: Sequence[Path] = (),
    tools: Sequence[str] = (),
) -> Cast:  # fmt: skip
    """The run's cast: ``cast`` (copied) or the project's at ``root`` (its files may name
    the program's ``tools``), plus the bundled personas (usable from any project; the
    project's own persona of that name wins, a plugin agent's bare name too)."""
    if cast is not None:  # the caller's, copied: bundled personas are added below
        out = replace(cast, personas=dict(cast.personas), problems=list(cast.problems))
    else:
        out = Cast.load(root, extra_dirs, tools=tools)
    for name, bundled in bundled_personas().items():
        if name not in out.aliases and name not in out.ambiguous:  # a plugin agent's bare name
            out.personas.setdefault(name, bundled)
    return out


def active_persona(
    cast: Cast, name: str | None, *, flag: str | None = None, place: ErrorPlace | None = None
) -> Persona | None:
    """The persona ``name`` of ``cast`` (``None`` for none); an unknown name names the
    closest one (and ``flag``, the option it came from, or ``place``, the file and field
    that named it), a persona file that did not load says why, and a persona whose spawn
    list the cast check rejects stops the run before it starts."""
    if name and cast.find(name) is None:
        where = place or {"field": flag}
        if name in cast.ambiguous:  # two plugins' agents: plugin:name picks one
            raise AmbiguousNameError("persona", name, cast.ambiguous[name], **where)
        broken = [p for p in cast.errors if name in str(p.file)]
        if broken:  # the persona file exists but did not load: say why
            raise UsageError(broken[0].message, file=broken[0].file, line=broken[0].line)
        raise UnknownNameError("persona", name, cast.personas, **where)
    persona = cast.get(name) if name else None
    if persona is not None and persona.source is not None:
        spawn = [
            p for p in cast.errors
            if p.file == persona.source and SPAWN_CHECK_MARK in p.message
        ]  # fmt: skip
        if spawn:
            raise UsageError(spawn[0].message, file=spawn[0].file, line=spawn[0].line)
    return persona


def profile_name(root: Path, profile: str | None, persona: Persona | None) -> str | None:
    """The worker's context profile (``profile``, else the persona's); an unknown name
    names the flag or the persona file, and the closest known profile."""
    where: dict[str, Any] = {"field": "--profile"}
    name = profile
    if name is None and persona is not None and persona.profile is not None:
        where = {"file": persona.source, "field": "profile"}
        name = persona.profile
    if name is None:
        return None
    known = load_profiles(root).profiles
    if name not in known:
        raise UnknownNameError("profile", name, known, **where)
    return name


def check_run(
    root: Path,
    *,
    persona: str | None,
    model: str | None,
    profile: str | None = None,
    extra_dirs: Sequence[Path] = (),
    persona_place: ErrorPlace | None = None,
) -> None:
    """Check what a run on the project at ``root`` was asked for, storing nothing.

    Raises :class:`~personae.errors.UsageError` (or a subclass) for the first mistake:
    the project config, the persona (an unknown one named at ``persona_place``, default
    the ``--persona`` flag), the profile, then the model the persona runs with.
    """
    project = Project.open(root)
    cast = run_cast(project.root, extra_dirs=extra_dirs)
    chosen = active_persona(cast, persona, flag="--persona", place=persona_place)
    profile_name(project.root, profile, chosen)
    resolver = ModelResolver(default=model, base_url=project.config.base_url)
    resolver.check(chosen.model if chosen else None)


def check_personas(root: Path, wanted: Sequence[tuple[str, Path, str]]) -> None:
    """Check that each ``(name, file, field)`` (a chain step's or batch task's persona, as
    written in ``file``) is one a run at ``root`` can use, storing nothing.

    The first unknown name is an :class:`~personae.errors.UnknownNameError` naming the file,
    the field and the closest valid persona; a persona whose file does not load says why.
    """
    cast = run_cast(root)
    for name, file, field in wanted:
        if cast.find(name) is not None or name in cast.ambiguous:
            active_persona(cast, name, place={"file": file, "field": field})
            continue
        broken = [p for p in cast.errors if name in str(p.file)]
        if broken:
            raise UsageError(broken[0].message, file=broken[0].file, line=broken[0].line)
        raise UnknownNameError("persona", name, cast.personas, file=file, field=field)


def check_models(root: Path, wanted: Sequence[tuple[str, Path, str]]) -> None:
    """Check each ``(spec, file, field)`` (a chain step's or batch task's ``model``, as
    written in ``file``) the way a run checks ``--model`` (it parses, a ``scripted:``
    scenario loads, a provider has its URL and key), storing nothing. The first mistake is a
    :class:`~personae.errors.UsageError` naming the file and field."""
    base_url = Project.open(root).config.base_url
    for spec, file, field in dict.fromkeys(wanted):
        try:
            ModelResolver(default=spec, base_url=base_url).check(None)
        except UsageError as exc:
            raise UsageError(exc.message, file=file, field=field) from None
