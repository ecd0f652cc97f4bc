"""Load Claude Code plugin folders and ``.mcp.json`` files.

A plugin folder has ``.claude-plugin/plugin.json`` (only ``name`` required, as
Claude Code reads it; ``description`` and ``version`` optional), ``agents/*.md``,
``skills/*/SKILL.md`` and an optional ``.mcp.json`` (``{"mcpServers": {...}}`` or a
bare map of servers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personae.persona._files import iter_files, read_confined
from personae.persona.loader import LoadedPersona, load_persona_file
from personae.persona.model import PersonaFileKind, Skill
from personae.persona.problems import Problem
from personae.persona.skills import load_skill_file

__all__ = ["Plugin", "is_plugin_dir", "load_plugin", "read_json", "read_mcp_json"]


@dataclass
class Plugin:
    """What one plugin folder contributes to a cast."""

    folder: Path
    """The plugin root."""
    name: str | None = None
    """``plugin.json`` name (``None`` when the manifest is broken)."""
    version: str | None = None
    """``plugin.json`` version."""
    description: str | None = None
    """``plugin.json`` description."""
    personas: list[LoadedPersona] = field(default_factory=list)
    """Agents from ``agents/``."""
    skills: list[Skill] = field(default_factory=list)
    """Skills from ``skills/*/SKILL.md``."""
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    """Servers from ``.mcp.json`` (and an inline ``mcpServers`` in ``plugin.json``)."""


def is_plugin_dir(folder: Path) -> bool:
    """Whether ``folder`` has a ``.claude-plugin/plugin.json``."""
    return (folder / ".claude-plugin" / "plugin.json").is_file()


def read_json(path: Path, root: Path, problems: list[Problem]) -> Any:
    """The JSON value of ``path`` (confined to ``root``); ``None`` with an error when broken."""
    text = read_confined(path, root, problems)
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(
            Problem(
                file=path, line=exc.lineno, severity="error", message=f"malformed JSON: {exc.msg}"
            )
        )
        return None


def read_mcp_json(path: Path, root: Path, problems: list[Problem]) -> dict[str, Any]:
    """MCP servers from ``path`` (either layout); empty when absent or broken."""
    if not path.is_file() and not path.is_symlink():
        return {}
    data = read_json(path, root, problems)
    if data is None:
        return {}
    if isinstance(data, dict) and isinstance(data.get("mcpServers"), dict):
        data = data["mcpServers"]
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        problems.append(
            Problem(
                file=path,
                line=None,
                severity="error",
                message='MCP config must be {"mcpServers": {name: {...}}} or {name: {...}}',
            )
        )
        return {}
    return {str(k): v for k, v in data.items()}


def load_plugin(
    folder: Path,
    problems: list[Problem],
    *,
    root: Path | None = None,
    defaults: dict[str, Any] | None = None,
) -> Plugin:
    """Load a plugin folder; every problem is appended to ``problems``.

    ``defaults`` is a marketplace entry: its fields fill what ``plugin.json``
    leaves out, and it stands in for a missing ``plugin.json`` (a marketplace
    entry with ``"strict": false``). Agents come from ``agents/`` plus any
    ``agents`` paths the manifest lists, skills likewise; ``commands/`` holds
    slash commands and is never read as agents.
    """
    confine = root if root is not None else folder
    plugin = Plugin(folder=folder)
    manifest = folder / ".claude-plugin" / "plugin.json"
    if defaults is not None and not manifest.is_file() and not manifest.is_symlink():
        data: Any = dict(defaults)
    else:
        data = read_json(manifest, confine, problems)
        if defaults is not None and isinstance(data, dict):
            data = {**defaults, **data}
    if data is not None and not isinstance(data, dict):
        problems.append(
            Problem(
                file=manifest, line=1, severity="error", message="plugin.json must be a JSON object"
            )
        )
    elif isinstance(data, dict):
        for key in ("name", "description", "version"):
            value = data.get(key)
            if key != "name" and value is None:
                continue  # optional, as Claude Code reads a manifest: only `name` is required
            if not isinstance(value, str) or not value.strip():
                problems.append(
                    Problem(
                        file=manifest,
                        line=None,
                        severity="error",
                        message=f"plugin.json: missing required field {key!r}",
                    )
                )
            else:
                setattr(plugin, key, value.strip())
        inline = data.get("mcpServers")
        if isinstance(inline, dict):
            plugin.mcp_servers.update(inline)
    listed = data if isinstance(data, dict) else {}
    if _agents_not_files(listed, manifest, problems):
        return plugin  # Claude Code loads nothing of a plugin whose manifest it refuses
    plugin.mcp_servers.update(read_mcp_json(folder / ".mcp.json", confine, problems))
    servers = set(plugin.mcp_servers)
    for path in _component_files(folder, "agents", listed, confine, problems, pattern="*.md"):
        loaded = load_persona_file(
            path, kind=PersonaFileKind.PLUGIN, root=confine, problems=problems, servers=servers
        )
        if loaded is not None:
            plugin.personas.append(loaded)
    for path in _component_files(folder, "skills", listed, confine, problems, pattern="SKILL.md"):
        skill = load_skill_file(
            path, root=confine, problems=problems, servers=servers, by_folder=True
        )
        if skill is not None:
            plugin.skills.append(skill)
    return plugin


def _agents_not_files(manifest: dict[str, Any], file: Path, problems: list[Problem]) -> bool:
    """``True`` (and an error) when the manifest's ``agents`` names anything but ``.md``
    files: Claude Code 2.1's manifest schema wants agent files there (``./agents/x.md``),
    its validator refuses a folder (``agents.0: must end with ".md"``) and it loads none of
    that plugin's agents or skills."""
    value = manifest.get("agents")
    items = [(None, value)] if isinstance(value, str) else list(enumerate(value or []))
    if not isinstance(value, (str, list)):
        return False
    for index, item in items:
        if isinstance(item, str) and item.endswith(".md"):
            continue
        where = "agents" if index is None else f"agents.{index}"
        problems.append(
            Problem(
                file=file,
                line=None,
                severity="error",
                message=f"plugin.json: {where}: {item!r} is not a path ending in '.md' (agent "
                "files are listed one by one; agents/ is read anyway); Claude Code does not "
                "load this plugin, nor does personae",
            )
        )
        return True
    return False


def _component_files(
    folder: Path,
    kind: str,
    manifest: dict[str, Any],
    root: Path,
    problems: list[Problem],
    *,
    pattern: str,
) -> list[Path]:
    """Files of one component: the default ``folder/kind`` plus the manifest's own paths
    (a string or list of ``./``-relative files or folders, added to the default)."""
    extra = manifest.get(kind)
    paths = [extra] if isinstance(extra, str) else extra if isinstance(extra, list) else []
    folders = [folder / kind]
    found: list[Path] = []
    for item in paths:
        if not isinstance(item, str):
            continue
        target = folder / item
        if target.is_file():
            found.append(target)
        elif target.is_dir():
            folders.append(target)
    seen: set[Path] = set()
    for sub in folders:
        if sub.is_dir() and sub.resolve() not in seen:
            seen.add(sub.resolve())
            found += iter_files(sub, root, problems, pattern=pattern)
    return list(dict.fromkeys(found))
