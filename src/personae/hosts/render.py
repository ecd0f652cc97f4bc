"""``personae hosts render|check``: host files in a repository.

Rendering merges into existing files without losing their content: the
Markdown instruction files get one marker-delimited block (replaced on every
run, so re-running is idempotent); JSON configs get our hook and server
entries replaced or appended, other keys kept. Files in the home directory
are never written.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personae.errors import UsageError
from personae.fsutil import write_atomic
from personae.hosts.adapters import Host
from personae.hosts.checkitem import CheckItem
from personae.hosts.matchers import matcher_problem
from personae.hosts.snippets import (
    BEGIN,
    END,
    MAX_SNIPPET_CHARS,
    REQUIRED_MARKERS,
    SERVER_NAME,
    TOML_BEGIN,
    TOML_END,
    claude_hooks,
    codex_config_block,
    copilot_hooks,
    mcp_entry,
    observe_hooks,
    snippet,
)

__all__ = [
    "CLAUDE_SETTINGS",
    "CODEX_CONFIG",
    "CODEX_HOOKS",
    "COPILOT_HOOKS",
    "INSTRUCTION_FILES",
    "MCP_JSON",
    "FileChange",
    "check",
    "installed_personae",
    "load_json",
    "plan",
    "write",
]

INSTRUCTION_FILES = {
    "CLAUDE.md": Host.CLAUDE,
    "AGENTS.md": Host.CODEX,
    ".github/copilot-instructions.md": Host.COPILOT,
}
"""Instruction file (relative to the repo) -> host whose snippet it carries."""

CLAUDE_SETTINGS = ".claude/settings.json"
CODEX_HOOKS = ".codex/hooks.json"
CODEX_CONFIG = ".codex/config.toml"
COPILOT_HOOKS = ".github/hooks/personae.json"
MCP_JSON = ".mcp.json"
_OURS = (
    "personae hook pre-tool-use",
    "personae hook session-start",
    "personae hook post-tool-use",
    "personae' hook ",
)
"""Substrings of the hook commands personae writes (old and new forms)."""


@dataclass(frozen=True)
class FileChange:
    """One file ``render`` would write."""

    path: str
    text: str
    existed: bool
    changed: bool


def _block_end(existing: str, start: int, end_marker: str, *, path: str) -> int:
    """Where our block that begins at ``start`` ends (after its end marker); no end marker
    is an error: the file was edited by hand and must be fixed by hand."""
    end = existing.find(end_marker, start)
    if end < 0:
        raise UsageError(
            "personae block has a begin marker but no end marker; fix the file by hand",
            file=path,
        )
    return end + len(end_marker)


def merge_block(existing: str, block: str, *, path: str) -> str:
    """``existing`` with our marker block replaced (or appended)."""
    start = existing.find(BEGIN.split(" (")[0])
    if start < 0:
        return existing.rstrip("\n") + "\n\n" + block if existing.strip() else block
    end = _block_end(existing, start, END, path=path)
    if existing[end : end + 1] == "\n":
        end += 1
    return existing[:start] + block + existing[end:]


def _is_ours(entry: Any) -> bool:
    text = json.dumps(entry)
    return any(cmd in text for cmd in _OURS)


def installed_personae() -> str:
    """The absolute path of the installed ``personae`` entry point hooks should run.

    The console script beside the running interpreter (its virtual environment),
    else the one on PATH; UsageError when there is none.
    """
    beside = Path(sys.executable).parent / "personae"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which("personae")
    if found is not None:
        return str(Path(found).absolute())
    raise UsageError(
        "cannot find the installed `personae` entry point (not beside "
        f"{sys.executable}, not on PATH); install personae or pass --personae PATH"
    )


def merge_toml(existing: str, block: str, *, path: str) -> str:
    """``existing`` TOML with our block first (dotted keys must precede every table)."""
    start = existing.find(TOML_BEGIN)
    if start >= 0:
        end = _block_end(existing, start, TOML_END, path=path)
        existing = existing[:start] + existing[end:].lstrip("\n")
    try:
        theirs = tomllib.loads(existing)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"not valid TOML: {exc}", file=path) from None
    servers = theirs.get("mcp_servers")
    if isinstance(servers, dict) and SERVER_NAME in servers:
        raise UsageError(
            f"[mcp_servers.{SERVER_NAME}] is already defined outside the personae block; "
            "remove it so personae can manage it",
            file=path,
        )
    merged = block + ("\n" + existing if existing.strip() else "")
    try:
        tomllib.loads(merged)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"merging the personae block breaks the TOML: {exc}", file=path) from None
    return merged


def merge_hooks(config: dict[str, Any], ours: dict[str, Any], *, path: str) -> dict[str, Any]:
    """Replace our entries under ``hooks.<event>`` (keep everything else)."""
    hooks = config.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError("'hooks' must be an object", file=path, field="hooks")
    for event, entries in ours.items():
        current = hooks.get(event, [])
        if not isinstance(current, list):
            raise UsageError(f"'hooks.{event}' must be a list", file=path, field=f"hooks.{event}")
        hooks[event] = [e for e in current if not _is_ours(e)] + entries
    return config


def _read_text(path: Path, rel: str) -> str | None:
    """The file's text, ``None`` when it does not exist; UsageError when not UTF-8."""
    if not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"not UTF-8 text (byte {exc.start})", file=rel) from None


def load_json(path: Path, rel: str) -> dict[str, Any]:
    text = _read_text(path, rel)
    if text is None:
        return {}
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise UsageError(f"not valid JSON: {exc.msg}", file=rel, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise UsageError("top level must be a JSON object", file=rel)
    return data


def plan(
    root: Path, gates: list[str] | None = None, *, personae: str | None = None
) -> list[FileChange]:
    """Every file change ``render --write`` would make under ``root``.

    ``personae`` is the absolute path hooks and MCP entries run (default: the
    installed entry point, :func:`installed_personae`).
    """
    for gate in gates or []:
        for dialect in ("ecmascript", "rust"):
            problem = matcher_problem(f"^(?:{gate})$", dialect)
            if problem is not None:
                raise UsageError(f"--gate {gate!r}: {problem}", field="--gate")
    exe = personae or installed_personae()
    out: list[tuple[str, str]] = []
    for rel, host in INSTRUCTION_FILES.items():
        path = root / rel
        existing = _read_text(path, rel) or ""
        out.append((rel, merge_block(existing, snippet(host), path=rel)))
    for rel, host in ((CLAUDE_SETTINGS, Host.CLAUDE), (CODEX_HOOKS, Host.CODEX)):
        ours = claude_hooks(exe, gates, host) | observe_hooks(exe, host)
        config = merge_hooks(load_json(root / rel, rel), ours, path=rel)
        out.append((rel, json.dumps(config, indent=2) + "\n"))
    existing_toml = _read_text(root / CODEX_CONFIG, CODEX_CONFIG) or ""
    out.append(
        (CODEX_CONFIG, merge_toml(existing_toml, codex_config_block(exe), path=CODEX_CONFIG))
    )
    copilot = copilot_hooks(exe, gates)
    config = load_json(root / COPILOT_HOOKS, COPILOT_HOOKS)
    config.setdefault("version", 1)
    ours = copilot["hooks"] | observe_hooks(exe, Host.COPILOT)
    config = merge_hooks(config, ours, path=COPILOT_HOOKS)
    out.append((COPILOT_HOOKS, json.dumps(config, indent=2) + "\n"))
    mcp = load_json(root / MCP_JSON, MCP_JSON)
    servers = mcp.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise UsageError("'mcpServers' must be an object", file=MCP_JSON, field="mcpServers")
    servers[SERVER_NAME] = mcp_entry(exe)
    out.append((MCP_JSON, json.dumps(mcp, indent=2) + "\n"))
    changes = []
    for rel, text in out:
        path = root / rel
        old = _read_text(path, rel)
        changes.append(FileChange(rel, text, old is not None, old != text))
    return changes


def write(root: Path, changes: list[FileChange]) -> list[str]:
    """Write the changed files atomically; refuses the home directory itself."""
    resolved = root.resolve()
    if resolved == Path.home().resolve():
        raise UsageError(
            f"{resolved} is your home directory; personae never writes there. "
            "Run this in a repository, and paste the printed home-dir snippets by hand."
        )
    written = []
    for change in changes:
        if not change.changed:
            continue
        path = resolved / change.path
        if not path.resolve().is_relative_to(resolved):
            raise UsageError(f"{change.path} resolves outside {resolved}; not written")
        path.parent.mkdir(parents=True, exist_ok=True)
        # Keep the user's permissions; new host files are rw-r--r--.
        write_atomic(path, change.text.encode("utf-8"), new_mode=0o644)
        written.append(change.path)
    return written


def _block_of(text: str) -> str | None:
    start = text.find(BEGIN.split(" (")[0])
    end = text.find(END, start)
    return None if start < 0 or end < 0 else text[start : end + len(END)]


def check(root: Path) -> list[CheckItem]:
    """Check the instruction files and MCP entry of the repository at ``root``.

    The hooks are checked by :func:`personae.hosts.hostcheck.check_hooks`.
    """
    items: list[CheckItem] = []
    fix = "run `personae hosts render --write`"
    for rel in INSTRUCTION_FILES:
        path = root / rel
        if not path.is_file():
            items.append(CheckItem(rel, "FAIL", "missing", fix))
            continue
        try:
            block = _block_of(_read_text(path, rel) or "")
        except UsageError as exc:
            items.append(CheckItem(rel, "FAIL", str(exc), "convert it to UTF-8, then " + fix))
            continue
        if block is None:
            items.append(CheckItem(rel, "FAIL", "no personae bootstrap block", fix))
            continue
        missing = [m for m in REQUIRED_MARKERS if m not in block]
        if missing:
            items.append(CheckItem(rel, "FAIL", f"block lacks: {', '.join(missing)}", fix))
        elif len(block) > MAX_SNIPPET_CHARS:
            too_long = f"block is {len(block)} chars (> {MAX_SNIPPET_CHARS})"
            items.append(CheckItem(rel, "FAIL", too_long, fix))
        else:
            items.append(CheckItem(rel, "OK", f"bootstrap block complete ({len(block)} chars)"))
    try:
        mcp = load_json(root / MCP_JSON, MCP_JSON)
    except UsageError as exc:
        items.append(CheckItem(MCP_JSON, "FAIL", str(exc), "fix the JSON, then " + fix))
        return items
    servers = mcp.get("mcpServers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    if not isinstance(entry, dict):
        items.append(CheckItem(MCP_JSON, "FAIL", "no personae server", fix))
    elif (problem := _command_problem(entry.get("command"))) is not None:
        items.append(CheckItem(MCP_JSON, "FAIL", f"personae server {problem}", fix))
    else:
        items.append(CheckItem(MCP_JSON, "OK", f"personae MCP server runs {entry['command']}"))
    return items


def _command_problem(command: object) -> str | None:
    """Why a host cannot start ``command`` (``None``: it can): a program name is looked up
    on PATH, a path must be an executable file (a deleted virtual environment is not)."""
    if not isinstance(command, str) or not command.strip():
        return "has no command"
    if os.sep not in command:
        return None if shutil.which(command) else f"runs {command}, not found on PATH"
    if not (os.path.isfile(command) and os.access(command, os.X_OK)):
        return f"runs {command}, which is not an executable file"
    return None
