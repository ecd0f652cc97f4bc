"""Personas shipped inside the package (a researcher and a git repository researcher).

``researcher`` answers one question from files (and web pages); ``repo-researcher``
clones a git repository into a fresh temporary workspace and explores it. Both
are usable from any project: a run adds them to its cast unless the project
defines a persona with the same name (the project's wins).
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from personae.persona.loader import load_persona_file
from personae.persona.model import Persona, PersonaFileKind
from personae.persona.problems import Problem

__all__ = ["BUNDLED_NAMES", "bundled_personas"]

BUNDLED_NAMES = ("researcher", "repo-researcher")
"""Names of the bundled personas."""


@functools.cache
def _load() -> tuple[Persona, ...]:
    folder = Path(str(resources.files("personae.persona") / "bundled"))
    out: list[Persona] = []
    for name in BUNDLED_NAMES:
        problems: list[Problem] = []
        loaded = load_persona_file(
            folder / f"{name}.md", kind=PersonaFileKind.PERSONAE, root=folder, problems=problems
        )
        errors = [p for p in problems if p.severity == "error"]
        if loaded is None or errors:  # a packaging defect, not user input
            raise RuntimeError(f"bundled persona {name} does not load: {errors}")
        out.append(loaded.persona.model_copy(update={"source_kind": PersonaFileKind.BUNDLED}))
    return tuple(out)


def bundled_personas() -> dict[str, Persona]:
    """The bundled personas by name (a fresh dict each call)."""
    return {p.name: p for p in _load()}
