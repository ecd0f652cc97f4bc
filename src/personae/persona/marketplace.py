"""Load a Claude Code plugin marketplace root (``.claude-plugin/marketplace.json``).

A marketplace lists plugins; each entry has a ``name`` and a ``source``: a path
relative to the marketplace root (``./plugins/x``, or ``x`` under
``metadata.pluginRoot``) or a remote source (``{"source": "github", ...}``).
Local plugins load as plugin folders (their agents and skills, never their
``commands/``), with the entry's fields filling what ``plugin.json`` leaves out
and standing in for a missing one. Remote sources are not fetched: each is
reported as a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personae.persona._files import confined_dir
from personae.persona.plugin import Plugin, load_plugin, read_json
from personae.persona.problems import Problem, Severity

__all__ = ["is_marketplace_dir", "load_marketplace"]


def is_marketplace_dir(folder: Path) -> bool:
    """Whether ``folder`` has a ``.claude-plugin/marketplace.json``."""
    return (folder / ".claude-plugin" / "marketplace.json").is_file()


def load_marketplace(folder: Path, problems: list[Problem]) -> list[Plugin]:
    """The local plugins the marketplace at ``folder`` lists, in its order."""
    manifest = folder / ".claude-plugin" / "marketplace.json"
    data = read_json(manifest, folder, problems)
    if data is None:
        return []
    entries = data.get("plugins") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        problems.append(_problem(manifest, "error", "marketplace.json: 'plugins' must be a list"))
        return []
    meta = data.get("metadata")
    base = meta.get("pluginRoot") if isinstance(meta, dict) else None
    plugins: list[Plugin] = []
    for index, entry in enumerate(entries):
        where = f"marketplace.json: plugins[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            problems.append(_problem(manifest, "error", f"{where} needs a 'name'"))
            continue
        where = f"marketplace.json: plugin {entry['name']!r}"
        sub = _local_source(folder, entry.get("source"), base)
        if sub is None:
            problems.append(
                _problem(
                    manifest,
                    "warning",
                    f"{where} has a remote source {entry.get('source')!r}; not fetched, not loaded",
                )
            )
            continue
        if not sub.is_dir():
            problems.append(_problem(manifest, "error", f"{where}: no plugin folder at {sub}"))
            continue
        if not confined_dir(sub, folder, problems):
            continue
        defaults = {k: v for k, v in entry.items() if k != "source"}
        plugins.append(load_plugin(sub, problems, root=folder, defaults=defaults))
    return plugins


def _local_source(folder: Path, source: Any, base: Any) -> Path | None:
    """The plugin folder of a local ``source`` (``None`` for a remote one)."""
    local = isinstance(source, dict) and source.get("source") in (None, "local", "directory")
    if local and isinstance(source.get("path"), str):
        source = source["path"]
    if not isinstance(source, str) or "://" in source or source.startswith("git@"):
        return None
    if isinstance(base, str) and not source.startswith(("./", "../", "/")):
        return folder / base / source
    return folder / source


def _problem(path: Path, severity: Severity, message: str) -> Problem:
    return Problem(file=path, line=None, severity=severity, message=message)
