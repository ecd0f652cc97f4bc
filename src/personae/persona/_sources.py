"""Find the sources of a cast: plugin folders, ``.claude/``, ``.personae/`` and ``--dir`` paths."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personae.layout import DIR_NAME, Layout
from personae.persona._files import confined_dir, iter_files
from personae.persona.loader import LoadedPersona, load_persona_file
from personae.persona.marketplace import is_marketplace_dir, load_marketplace
from personae.persona.model import PersonaFileKind, Skill
from personae.persona.plugin import is_plugin_dir, load_plugin, read_mcp_json
from personae.persona.problems import Problem
from personae.persona.skills import load_skill_file

__all__ = ["PersonaSource", "collect_dir", "collect_project"]


@dataclass
class PersonaSource:
    """One source of personas and skills; names must be unique within it."""

    label: str
    """Human label (the folder)."""
    personas: list[LoadedPersona] = field(default_factory=list)
    skills: list[Skill] = field(default_factory=list)
    plugin: str | None = None
    """The plugin's name when this source is a plugin (Claude Code lists its agents and
    skills as ``plugin:name``)."""
    folder: Path | None = None
    """The plugin's folder (agents in ``agents/sub/`` are ``plugin:sub:name``)."""

    def namespaced(self, name: str, path: Path) -> str | None:
        """How Claude Code names ``name`` (from ``path``) of this plugin, else ``None``."""
        if self.plugin is None or self.folder is None:
            return None
        try:
            subs = path.parent.relative_to(self.folder / "agents").parts
        except ValueError:
            subs = ()
        return ":".join((self.plugin, *subs, name))


def _folder_source(
    folder: Path,
    *,
    kind: PersonaFileKind,
    root: Path,
    servers: dict[str, Any],
    problems: list[Problem],
    skills_folder: Path | None = None,
    commands: bool = False,
) -> PersonaSource:
    source = PersonaSource(label=str(folder))
    if confined_dir(folder, root, problems):
        files = list(iter_files(folder, root, problems))
        # A skill's folder holds its references, examples and scripts: never personas.
        skill_dirs = {p.parent for p in files if p.name == "SKILL.md"}
        for path in files:
            if path.name != "SKILL.md" and not skill_dirs.isdisjoint(path.parents):
                continue
            if commands and "commands" in path.relative_to(folder).parts[:-1]:
                problems.append(_command_skipped(path))
                continue
            if path.name == "SKILL.md":
                skill = load_skill_file(
                    path, root=root, problems=problems, servers=servers,
                    by_folder=kind is not PersonaFileKind.PERSONAE,
                )  # fmt: skip
                if skill is not None:
                    source.skills.append(skill)
                continue
            loaded = load_persona_file(
                path, kind=kind, root=root, problems=problems, servers=servers
            )
            if loaded is not None:
                source.personas.append(loaded)
    if skills_folder is not None and confined_dir(skills_folder, root, problems):
        for path in iter_files(skills_folder, root, problems, pattern="SKILL.md"):
            skill = load_skill_file(
                path, root=root, problems=problems, servers=servers,
                by_folder=kind is not PersonaFileKind.PERSONAE,
            )  # fmt: skip
            if skill is not None:
                source.skills.append(skill)
    return source


def _command_skipped(path: Path) -> Problem:
    return Problem(
        file=path,
        line=None,
        severity="warning",
        message="in a 'commands' folder: a slash command, not an agent; skipped",
    )


def collect_project(
    root: Path, problems: list[Problem], servers: dict[str, Any]
) -> list[PersonaSource]:
    """Sources of the project at ``root``, in override order (later wins).

    1. plugin folders under ``.claude/plugins/`` and ``.personae/plugins/``;
    2. ``.claude/agents/`` and ``.claude/skills/`` (Claude Code files);
    3. ``.personae/personas/`` and ``.personae/skills/`` (personae files).

    ``servers`` receives the MCP servers configured for the project
    (``.mcp.json``, ``.personae/mcp.json`` and plugins' ``.mcp.json``).
    """
    servers.update(read_mcp_json(root / ".mcp.json", root, problems))
    servers.update(read_mcp_json(Layout(root).mcp_json, root, problems))
    sources: list[PersonaSource] = []
    for base in (root / ".claude" / "plugins", Layout(root).plugins):
        if not confined_dir(base, root, problems):
            continue
        for sub in sorted(p for p in base.iterdir() if p.is_dir()):
            if is_plugin_dir(sub) and confined_dir(sub, root, problems):
                sources.append(_plugin_source(sub, root, problems, servers))
    for host, personas, kind in (
        (".claude", "agents", PersonaFileKind.CLAUDE_CODE),
        (DIR_NAME, "personas", PersonaFileKind.PERSONAE),
    ):
        sources.append(
            _folder_source(
                root / host / personas,
                kind=kind,
                root=root,
                servers=servers,
                problems=problems,
                skills_folder=root / host / "skills",
            )
        )
    return sources


def _plugin_source(
    folder: Path, root: Path, problems: list[Problem], servers: dict[str, Any]
) -> PersonaSource:
    plugin = load_plugin(folder, problems, root=root)
    servers.update(plugin.mcp_servers)
    return PersonaSource(
        label=str(folder), personas=plugin.personas, skills=plugin.skills,
        plugin=plugin.name, folder=folder,
    )  # fmt: skip


def collect_dir(
    folder: Path, problems: list[Problem], servers: dict[str, Any]
) -> list[PersonaSource]:
    """Sources of one ``--dir`` path (confined to that folder).

    A plugin marketplace root (``.claude-plugin/marketplace.json``) loads its
    local plugins; a plugin folder loads as a plugin; a folder with
    ``.personae/`` or ``.claude/`` loads as a project; a ``.personae`` folder
    loads its ``personas/`` and ``skills/`` (not ``directive.md``); a
    ``.claude`` folder its ``agents/`` and ``skills/`` (not ``commands/``); a folder
    of plugin folders loads each plugin (as Claude Code's ``--plugin-dir`` does);
    any other folder is a folder of persona files (personae files when it is
    named ``personas`` or lies inside ``.personae/``, otherwise Claude Code
    agent files; files in a ``commands`` folder are slash commands, skipped
    with a warning) and ``SKILL.md`` files. A ``--dir`` that yields nothing
    is a warning naming nested project folders, never silent.
    """
    if not folder.exists():
        problems.append(
            Problem(file=folder, line=None, severity="error", message="no such directory")
        )
        return []
    if not folder.is_dir():
        problems.append(
            Problem(file=folder, line=None, severity="error", message="not a directory")
        )
        return []
    before = len(problems)
    sources = _dir_sources(folder, problems, servers)
    failed = any(p.severity == "error" for p in problems[before:])
    if not failed and not any(s.personas or s.skills for s in sources):
        problems.append(_empty_dir(folder))
    return sources


def _dir_sources(
    folder: Path, problems: list[Problem], servers: dict[str, Any]
) -> list[PersonaSource]:
    if is_marketplace_dir(folder):
        sources = []
        for plugin in load_marketplace(folder, problems):
            servers.update(plugin.mcp_servers)
            sources.append(
                PersonaSource(
                    label=str(plugin.folder),
                    personas=plugin.personas,
                    skills=plugin.skills,
                    plugin=plugin.name,
                    folder=plugin.folder,
                )
            )
        return sources
    if is_plugin_dir(folder):
        return [_plugin_source(folder, folder, problems, servers)]
    if Layout(folder).dir.is_dir() or (folder / ".claude").is_dir():
        return collect_project(folder, problems, servers)
    # A project's own folder: `.claude` gives agents/ and skills/ (never commands/),
    # `.personae` gives personas/ and skills/ (not directive.md).
    own = {
        ".claude": ("agents", PersonaFileKind.CLAUDE_CODE),
        DIR_NAME: ("personas", PersonaFileKind.PERSONAE),
    }
    if folder.name in own:
        sub, kind = own[folder.name]
        return [
            _folder_source(
                folder / sub,
                kind=kind,
                root=folder,
                servers=servers,
                problems=problems,
                skills_folder=folder / "skills",
            )
        ]
    plugins = sorted(p for p in folder.iterdir() if p.is_dir() and is_plugin_dir(p))
    if plugins:  # a folder of plugins loads each one, as Claude Code's --plugin-dir does
        return [_plugin_source(p, folder, problems, servers) for p in plugins]
    resolved = folder.resolve()
    kind = (
        PersonaFileKind.PERSONAE
        if resolved.name == "personas" or DIR_NAME in resolved.parts
        else PersonaFileKind.CLAUDE_CODE
    )
    return [
        _folder_source(
            folder, kind=kind, root=folder, servers=servers, problems=problems, commands=True
        )
    ]


def _empty_dir(folder: Path) -> Problem:
    """A warning for a ``--dir`` that gave nothing, naming nested folders worth passing."""
    nested: list[str] = []
    for pattern in ("*/.claude", "*/*/.claude", "*/.personae", "*/.claude-plugin"):
        nested += sorted(str(p.parent) for p in folder.glob(pattern) if p.is_dir())
    hint = f"; pass one of these instead: {', '.join(nested[:5])}" if nested else ""
    return Problem(
        file=folder,
        line=None,
        severity="warning",
        message="no persona or skill files found here (looked for .claude/, .personae/, "
        f".claude-plugin/ and *.md agent files){hint}",
    )
