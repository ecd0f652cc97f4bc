"""The Cast: every persona and skill of a project, with the problems found loading them.

Names are Claude Code's: a plugin's agents and skills are ``plugin:name`` (an agent in
``agents/sub/`` is ``plugin:sub:name``); a bare name finds the one plugin entry that has
it, unless a persona or skill of no plugin owns it; one two plugins share names neither
(:class:`~personae.errors.AmbiguousNameError` lists both).

Load order (later sources override earlier ones of the same name, with a warning):

1. plugin folders (``.claude/plugins/*/``, ``.personae/plugins/*/``);
2. ``.claude/agents/`` and ``.claude/skills/`` (Claude Code files);
3. ``.personae/personas/`` and ``.personae/skills/`` (personae files);
4. each ``extra_dirs`` path, in the order given.

Two personas (or skills) with the same name in one source is an error naming
both files; the first one is kept. A file with an error is left out and the
rest of the cast still loads; ``problems`` lists everything found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from personae.errors import AmbiguousNameError, UnknownNameError, closest_name
from personae.persona._sources import PersonaSource, collect_dir, collect_project
from personae.persona._tools import program_tools
from personae.persona.bundled import bundled_personas
from personae.persona.loader import LoadedPersona
from personae.persona.model import Persona, Skill
from personae.persona.problems import Problem, Severity
from personae.persona.render import (
    render_available_agents,
    render_available_skills,
    render_execution_block,
    render_validation_context,
)
from personae.tools.grants import effective_tool_names

__all__ = ["SPAWN_CHECK_MARK", "Cast"]

SPAWN_CHECK_MARK = "may spawn"
"""Text every spawn-check problem message contains (a run refuses a persona with one)."""


_Item = TypeVar("_Item")
_LISTED = 8
"""Children named in one grouped spawn warning (the rest are counted)."""


def _chosen(
    table: Mapping[str, _Item], names: Sequence[str] | None, get: Callable[[str], _Item]
) -> list[_Item]:
    """``names`` looked up with ``get`` (an unknown name raises), or all of ``table`` by name."""
    if names is not None:
        return [get(n) for n in names]
    return [table[n] for n in sorted(table)]


def _name_bare(
    bare: str, spaced: str | None, table: Mapping[str, Any],
    aliases: dict[str, str], ambiguous: dict[str, list[str]],
) -> None:  # fmt: skip
    """Give ``bare`` to what owns it after ``spaced`` (a plugin's ``plugin:name`` entry of
    ``table``; ``None``: the entry ``bare`` itself, of no plugin) was added: an entry of
    no plugin owns its bare name; one plugin entry has it as an alias; two or more plugin
    entries make it :attr:`Cast.ambiguous` (as Claude Code lists only ``plugin:name``)."""
    if spaced is None:  # an entry of no plugin takes the bare name
        aliases.pop(bare, None)
        ambiguous.pop(bare, None)
    elif bare in table:
        return
    elif bare in ambiguous:
        if spaced not in ambiguous[bare]:
            ambiguous[bare].append(spaced)
    elif bare in aliases and aliases[bare] != spaced:
        ambiguous[bare] = [aliases.pop(bare), spaced]
    else:
        aliases[bare] = spaced


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


@dataclass
class Cast:
    """The registry of personas and skills (see the module docstring for load order)."""

    personas: dict[str, Persona] = field(default_factory=dict)
    """Personas by name."""
    skills: dict[str, Skill] = field(default_factory=dict)
    """Skills by name (L1 metadata; bodies and files are read on demand)."""
    problems: list[Problem] = field(default_factory=list)
    """Every error and warning found while loading."""
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    """MCP servers configured for the project (``.mcp.json``, plugins)."""
    aliases: dict[str, str] = field(default_factory=dict)
    """Bare names of plugin agents to their names here: a plugin agent is named as Claude
    Code lists it, ``plugin:agent`` (``plugin:sub:agent`` in ``agents/sub/``); its bare name
    is a lookup alias while no other persona has it."""
    ambiguous: dict[str, list[str]] = field(default_factory=dict)
    """Bare names two or more plugins' agents share, to their ``plugin:name`` names (each
    of those is a persona here; the bare name names none of them)."""
    skill_aliases: dict[str, str] = field(default_factory=dict)
    """Bare names of plugin skills to their ``plugin:skill`` names (as :attr:`aliases`)."""
    ambiguous_skills: dict[str, list[str]] = field(default_factory=dict)
    """Bare names two or more plugins' skills share, to their ``plugin:skill`` names."""
    written: dict[str, Persona] = field(default_factory=dict)
    """Each persona as its file wrote it (name, spawn list and skills not namespaced):
    what an export writes back."""

    @classmethod
    def load(
        cls, root: Path, extra_dirs: Sequence[Path] = (), *, tools: Iterable[str] = ()
    ) -> Cast:
        """Load the project at ``root`` plus ``extra_dirs`` (never raises for bad files).

        ``tools``: names of the program's own tools (Python function tools) persona and
        skill files may list beside the built-in ones."""
        with program_tools(tools):
            return cls._load(Path(root).absolute(), extra_dirs)

    @classmethod
    def _load(cls, root: Path, extra_dirs: Sequence[Path]) -> Cast:
        """:meth:`load` with the program's tool names in place."""
        problems: list[Problem] = []
        servers: dict[str, Any] = {}
        sources = collect_project(root, problems, servers)
        for extra in extra_dirs:
            sources.extend(collect_dir(Path(extra).absolute(), problems, servers))
        cast = cls(problems=problems, mcp_servers=servers)
        winners: dict[str, LoadedPersona] = {}
        for source in sources:
            cast._merge_source(source, winners)
        cast._resolve_namespaced(winners)
        cast._check_skill_refs(winners)
        cast._check_spawn(winners)
        # A --dir that is also part of the project loads the same files twice:
        # report each problem once.
        cast.problems[:] = list(dict.fromkeys(cast.problems))
        return cast

    def _merge_source(self, source: PersonaSource, winners: dict[str, LoadedPersona]) -> None:
        here: dict[str, LoadedPersona] = {}
        for loaded in source.personas:
            name = loaded.persona.name
            spaced = source.namespaced(name, loaded.path)
            key = spaced or name
            if key in here:
                self._add(
                    loaded.path,
                    loaded.lines.get("name"),
                    "error",
                    f"duplicate persona name {name!r}: also defined in "
                    f"{here[key].path}; this file is ignored",
                )
                continue
            here[key] = loaded
            if key in winners and _same_file(winners[key].path, loaded.path):
                continue  # the same file reached twice (a --dir inside the project)
            if key in winners:
                self._add(
                    loaded.path,
                    loaded.lines.get("name"),
                    "warning",
                    f"persona {key!r} overrides the one from {winners[key].path}",
                )
            self.written[key] = loaded.persona
            if spaced is not None:
                loaded.persona = loaded.persona.model_copy(update={"name": spaced})
            winners[key] = loaded
            self.personas[key] = loaded.persona
            _name_bare(name, spaced, self.personas, self.aliases, self.ambiguous)
        seen: dict[str, Skill] = {}
        for skill in source.skills:
            key = f"{source.plugin}:{skill.name}" if source.plugin is not None else skill.name
            if key in seen:
                self._add(
                    skill.path,
                    None,
                    "error",
                    f"duplicate skill name {skill.name!r}: also defined in "
                    f"{seen[key].path}; this file is ignored",
                )
                continue
            seen[key] = skill
            if key in self.skills and _same_file(self.skills[key].path, skill.path):
                continue
            if key in self.skills:
                self._add(
                    skill.path,
                    None,
                    "warning",
                    f"skill {key!r} overrides the one from {self.skills[key].path}",
                )
            spaced = key if source.plugin is not None else None
            self.skills[key] = skill.model_copy(update={"name": key}) if spaced else skill
            _name_bare(skill.name, spaced, self.skills, self.skill_aliases, self.ambiguous_skills)

    def _resolve_namespaced(self, winners: dict[str, LoadedPersona]) -> None:
        """Spawn lists and ``skills`` that use bare names of plugin agents and skills are
        rewritten to their names here (``plugin:name``; a plugin's own agent or skill of
        that name first), so a persona stays one persona whichever name is used."""
        for key, loaded in winners.items():
            persona = loaded.persona
            plugin = key.split(":", 1)[0] if ":" in key else None
            update: dict[str, Any] = {}
            if persona.subagents:
                names = [
                    self._in(plugin, n, self.personas, self.aliases) for n in persona.subagents
                ]
                if names != persona.subagents:
                    update["subagents"] = names
            skills = [self._in(plugin, n, self.skills, self.skill_aliases) for n in persona.skills]
            if skills != persona.skills:
                update["skills"] = skills
            if update:
                loaded.persona = persona.model_copy(update=update)
                if self.personas.get(key) is persona:
                    self.personas[key] = loaded.persona

    @staticmethod
    def _in(
        plugin: str | None, name: str, table: Mapping[str, Any], aliases: Mapping[str, str]
    ) -> str:
        """The name here of ``name`` as a persona of ``plugin`` wrote it."""
        if name in table:
            return name
        if plugin is not None and f"{plugin}:{name}" in table:
            return f"{plugin}:{name}"
        return aliases.get(name, name)

    def resolve(self, name: str) -> str:
        """``name``, or the ``plugin:name`` of the plugin agent whose bare name it is."""
        return name if name in self.personas else self.aliases.get(name, name)

    def find(self, name: str) -> Persona | None:
        """The persona called ``name`` (a plugin agent's ``plugin:agent``, or its bare name
        while that is unique)."""
        return self.personas.get(self.resolve(name))

    def _check_skill_refs(self, winners: dict[str, LoadedPersona]) -> None:
        for loaded in winners.values():
            for ref in loaded.persona.skills:
                if ref in self.skills:
                    continue
                if ref in self.ambiguous_skills:
                    self._add(
                        loaded.path,
                        loaded.lines.get("skills"),
                        "error" if loaded.strict else "warning",
                        f"skill {ref!r} is ambiguous: name one of "
                        f"{', '.join(sorted(self.ambiguous_skills[ref]))}",
                    )
                    continue
                hint = closest_name(ref, self.skills)
                close = f"; did you mean {hint!r}?" if hint else ""
                self._add(
                    loaded.path,
                    loaded.lines.get("skills"),
                    "error" if loaded.strict else "warning",
                    f"unknown skill {ref!r}{close}",
                )

    def _check_spawn(self, winners: dict[str, LoadedPersona]) -> None:
        """Every persona a parent may spawn must have tools within the parent's.

        An explicit spawn list (``subagents`` or ``Agent(a, b)``) makes a mismatch or an
        unknown name an error; a parent that may spawn any persona gets one warning naming
        the children whose tools reach beyond its own.
        """
        known = {**bundled_personas(), **self.personas}
        for loaded in winners.values():
            parent = loaded.persona
            if parent.tools is None or "agent" not in parent.tools:
                continue
            explicit = parent.subagents is not None
            # Implicit ("any persona"): the project's own personas; bundled ones are narrowed
            # at spawn like any child but would warn in every project.
            names = parent.subagents if parent.subagents is not None else sorted(self.personas)
            mine = set(parent.tools) - set(parent.disallowed_tools)
            line = loaded.lines.get("subagents") or loaded.lines.get("tools")
            wider: list[str] = []  # implicit: children with tools outside the parent's
            for name in names:
                child = known.get(name)
                if child is None and name in self.ambiguous:
                    message = (f"{SPAWN_CHECK_MARK} {name!r}, which plugins share: name one of "
                               f"{', '.join(self.ambiguous[name])}")  # fmt: skip
                    self._add(loaded.path, line, "error", message)
                    continue
                if child is None:
                    hint = closest_name(name, known)
                    close = f"; did you mean {hint!r}?" if hint else ""
                    message = f"{SPAWN_CHECK_MARK} unknown persona {name!r}{close}"
                    self._add(loaded.path, line, "error", message)
                    continue
                if name == parent.name or child.tools is None:
                    continue
                extra = sorted(set(child.tools) - set(child.disallowed_tools) - mine)
                if extra and not explicit:
                    wider.append(f"{name} ({', '.join(extra)})")
                elif extra:
                    where = child.source or "bundled"
                    self._add(
                        loaded.path,
                        line,
                        "error",
                        f"persona {parent.name!r} ({loaded.path}) {SPAWN_CHECK_MARK} {name!r} "
                        f"({where}), "
                        f"whose tools {', '.join(extra)} are not in {parent.name!r}'s tools; a "
                        "sub-agent's tools must be within its parent's",
                    )
            if wider:  # one warning per parent, not one per child
                shown = ", ".join(wider[:_LISTED]) + (
                    f" and {len(wider) - _LISTED} more" if len(wider) > _LISTED else ""
                )
                self._add(
                    loaded.path,
                    line,
                    "warning",
                    f"persona {parent.name!r} {SPAWN_CHECK_MARK} any persona of the cast; "
                    f"{len(wider)} of them have tools not in its own: {shown}; a sub-agent's "
                    "tools must be within its parent's (give a spawn list: subagents or "
                    "Agent(...))",
                )

    def _add(self, file: Path, line: int | None, severity: Severity, message: str) -> None:
        self.problems.append(Problem(file=file, line=line, severity=severity, message=message))

    @property
    def errors(self) -> list[Problem]:
        """Problems of severity ``error``."""
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        """Problems of severity ``warning``."""
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def notes(self) -> list[Problem]:
        """Problems of severity ``note``: where Claude Code is silent."""
        return [p for p in self.problems if p.severity == "note"]

    def get(self, name: str) -> Persona:
        """The persona called ``name``; :class:`UnknownNameError` (with the closest) if none,
        :class:`AmbiguousNameError` for a bare name plugins share."""
        found = self.find(name)
        if found is None:
            if name in self.ambiguous:
                raise AmbiguousNameError("persona", name, self.ambiguous[name])
            raise UnknownNameError("persona", name, self.personas) from None
        return found

    def as_written(self, name: str) -> Persona:
        """The persona ``name`` as its file wrote it (what an export writes back): a plugin
        agent's own name, its spawn list and skills as written."""
        found = self.get(name)
        return self.written.get(found.name, found)

    def skill(self, name: str) -> Skill:
        """The skill called ``name`` (a plugin skill's ``plugin:skill``, or its bare name
        while that is unique); :class:`UnknownNameError` if none, :class:`AmbiguousNameError`
        for a bare name plugins share."""
        found = self.skills.get(name) or self.skills.get(self.skill_aliases.get(name, name))
        if found is not None:
            return found
        if name in self.ambiguous_skills:
            raise AmbiguousNameError("skill", name, self.ambiguous_skills[name])
        raise UnknownNameError("skill", name, self.skills)

    def spawnable(self, name: str) -> list[str]:
        """Personas of this cast that persona ``name`` may spawn as sub-agents, sorted.

        Empty unless it gets the agent tool, read as the runtime grants it (no ``tools``
        list: every tool; ``Task``/``Agent`` are its Claude Code names; ``disallowedTools``
        wins); its spawn list (``subagents``) when it has one, else every persona of the
        cast; never itself. Unknown names raise :class:`UnknownNameError`.
        """
        persona = self.get(name)
        if not effective_tool_names(persona, ["agent"]):
            return []
        names = persona.subagents if persona.subagents is not None else self.personas
        return [n for n in sorted(names) if n != persona.name and n in self.personas]

    def persona_skills(self, name: str) -> list[Skill]:
        """The loaded skills a persona names (unknown names skipped), in its order."""
        return [self.skills[s] for s in self.get(name).skills if s in self.skills]

    def available_agents_xml(self, names: Sequence[str] | None = None) -> str:
        """``<available_agents>``: name and description of each persona (default: all, sorted)."""
        return render_available_agents(_chosen(self.personas, names, self.get))

    def available_skills_xml(self, names: Sequence[str] | None = None) -> str:
        """``<available_skills>``: name, description and location of each skill."""
        return render_available_skills(_chosen(self.skills, names, self.skill))

    def execution_block(self, name: str) -> str:
        """What the worker/manager see: the prompt verbatim, its skills' L1, its tools."""
        return render_execution_block(self.get(name), self.persona_skills(name))

    def validation_context(self, name: str) -> str:
        """What the validator sees; never contains the persona's execution prompt."""
        return render_validation_context(self.get(name), self.persona_skills(name))
