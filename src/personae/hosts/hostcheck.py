"""``personae hosts check`` for hooks: what each host will actually do with the files.

For Claude Code, Codex and Copilot CLI: the personae hook is present; every
matcher in the file compiles under that host's regex rules (Codex drops the
whole hook group for one bad matcher) and covers the host's gated tools and
personae's unlock tools (the gate binds a bootstrap to its session when it sees
that call); the hook command is an absolute path that exists and runs in the
self-bounding wrapper (:mod:`personae.hosts.wrapper`: a hook the host kills at its
own limit lets the tool run); and, run once the way the host runs it (``sh -c``, a
gated tool, no bootstrap, a PATH without ``timeout``), it denies in that host's
contract. The repo-local Codex MCP entry runs an executable path. Each
failure names the fix. ``personae doctor`` calls :func:`check_hooks` too.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from personae.errors import UsageError
from personae.hosts.adapters import ADAPTERS, Host, HostAdapter
from personae.hosts.checkitem import CheckItem
from personae.hosts.matchers import matcher_problem
from personae.hosts.render import (
    CLAUDE_SETTINGS,
    CODEX_CONFIG,
    CODEX_HOOKS,
    COPILOT_HOOKS,
    load_json,
)
from personae.hosts.snippets import SERVER_NAME
from personae.hosts.wrapper import LIMIT_SECONDS, bounds_itself, split_hook_command

__all__ = ["check_hooks", "hook_binary", "probe_hook"]

_FIX = "run `personae hosts render --write`"
_FILES = (
    (CLAUDE_SETTINGS, Host.CLAUDE, "PreToolUse"),
    (CODEX_HOOKS, Host.CODEX, "PreToolUse"),
    (COPILOT_HOOKS, Host.COPILOT, "preToolUse"),
)
_WRAPPER_TOOLS = ("sh", "sleep", "mkdir", "rm")
"""Programs the hook wrapper runs besides shell builtins."""
_PROBE_TOOL = {Host.CLAUDE: "Bash", Host.CODEX: "Bash", Host.COPILOT: "bash"}


def hook_binary(command: str) -> str | None:
    """The program a hook command runs (inside personae's ``sh -c`` wrapper, its ``$0``)."""
    split = split_hook_command(command)
    if split is not None:
        return split[1][0]
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    return argv[0] if argv else None


def _commands(entry: Any, host: Host) -> list[str]:
    if not isinstance(entry, dict):
        return []
    if host is Host.COPILOT:
        value = entry.get("bash")
        return [value] if isinstance(value, str) else []
    hooks = entry.get("hooks")
    return (
        [
            h["command"]
            for h in hooks or []
            if isinstance(h, dict) and isinstance(h.get("command"), str)
        ]
        if isinstance(hooks, list)
        else []
    )


def _probe_payload(host: Host, cwd: Path) -> bytes:
    tool = _PROBE_TOOL[host]
    if host is Host.COPILOT:
        data: dict[str, Any] = {"sessionId": "personae-check", "cwd": str(cwd), "toolName": tool}
        data["toolArgs"] = {"command": "true"}
    else:
        data = {
            "session_id": "personae-check",
            "transcript_path": str(cwd / "no-transcript.jsonl"),
            "cwd": str(cwd),
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": {"command": "true"},
        }
        if host is Host.CODEX:
            data["turn_id"] = "personae-check"
    return json.dumps(data).encode()


def _path_without_timeout(folder: Path) -> str:
    """A PATH as on stock macOS: no ``timeout``; ``folder`` gets links to the programs the
    wrapper uses, and every folder of PATH that holds a ``timeout`` is left out."""
    folder.mkdir()
    for tool in _WRAPPER_TOOLS:
        found = shutil.which(tool)
        if found is not None:
            (folder / tool).symlink_to(found)
    kept = [
        d
        for d in os.environ.get("PATH", os.defpath).split(os.pathsep)
        if d and not os.path.exists(os.path.join(d, "timeout"))
    ]
    return os.pathsep.join([str(folder), *kept])


def probe_hook(host: HostAdapter, command: str) -> tuple[bool, str]:
    """Run ``command`` as the host would for a gated tool with no bootstrap, with no
    ``timeout(1)`` on PATH: does it deny?"""
    with tempfile.TemporaryDirectory(prefix="personae-check-") as tmp:
        env = dict(os.environ)
        env["PATH"] = _path_without_timeout(Path(tmp) / "bin")
        try:
            done = subprocess.run(
                ["/bin/sh", "-c", command],
                input=_probe_payload(host.name, Path(tmp)),
                capture_output=True,
                cwd=tmp,
                env=env,
                timeout=15,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"the hook did not finish: {exc}"
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    if host.json_deny:
        try:
            decision = json.loads(out.strip().splitlines()[-1]).get("permissionDecision")
        except (ValueError, IndexError, AttributeError):
            decision = None
        ok = done.returncode == 0 and decision == "deny"
        seen = f"exit {done.returncode}, permissionDecision {decision!r}"
    else:
        ok = done.returncode == 2 and bool(err.strip())
        seen = f"exit {done.returncode}" + (", reason on stderr" if err.strip() else "")
    return ok, seen


def _matcher_items(rel: str, host: HostAdapter, entries: list[Any]) -> list[CheckItem]:
    items: list[CheckItem] = []
    if host.dialect is None:
        return items
    for entry in entries:
        matcher = entry.get("matcher") if isinstance(entry, dict) else None
        if not isinstance(matcher, str) or not matcher:
            continue
        problem = matcher_problem(matcher, host.dialect)
        if problem is not None:
            items.append(
                CheckItem(
                    f"{rel} matcher",
                    "FAIL",
                    f"{matcher!r} does not compile as {host.title} ({host.dialect}) regex: "
                    f"{problem}; {host.title} skips the whole hook group",
                    "rewrite the matcher without that construct, then " + _FIX
                    if "hook pre-tool-use" not in json.dumps(entry)
                    else _FIX,
                )
            )
    return items


def _ours(rel: str, host: HostAdapter, entries: list[Any]) -> list[CheckItem]:
    mine = [e for e in entries if "hook pre-tool-use" in json.dumps(e)]
    if not mine:
        return [CheckItem(rel, "FAIL", "no hook running `personae hook pre-tool-use`", _FIX)]
    items: list[CheckItem] = []
    entry = mine[-1]
    if host.dialect is not None:
        matcher = str(entry.get("matcher", ""))
        literal = [g for g in host.gated if re.fullmatch(r"\w+", g)]
        literal += sorted(host.unlock_tools(SERVER_NAME))
        try:
            missed = [g for g in literal if not re.search(matcher, g)]
        except re.error:
            missed = []  # reported by the matcher check
        if missed:
            items.append(CheckItem(f"{rel} matcher", "FAIL", f"misses {', '.join(missed)}", _FIX))
        elif host.dialect is not None and matcher_problem(matcher, host.dialect) is None:
            items.append(
                CheckItem(
                    f"{rel} matcher",
                    "OK",
                    f"compiles as {host.dialect} regex and covers {len(literal) - 2} gated "
                    "tools and the 2 unlock tools",
                )
            )
    for command in _commands(entry, host.name):
        binary = hook_binary(command)
        if binary is None or not os.path.isabs(binary):
            items.append(
                CheckItem(
                    f"{rel} command",
                    "FAIL",
                    f"runs {binary!r}, not an absolute path: when it is not on the host's PATH "
                    "the hook fails and the host lets the tool run",
                    _FIX,
                )
            )
            continue
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            items.append(
                CheckItem(
                    f"{rel} command", "FAIL", f"{binary} does not exist or is not executable", _FIX
                )
            )
        items.append(_bound_item(rel, host, command))
        ok, seen = probe_hook(host, command)
        detail = (
            f"denies {_PROBE_TOOL[host.name]} before bootstrap in {host.title}'s contract ({seen})"
            if ok
            else f"does not deny {_PROBE_TOOL[host.name]} before bootstrap as {host.title} "
            f"needs ({seen})"
        )
        items.append(CheckItem.judged(f"{rel} gate", ok, detail, _FIX))
    return items


def _bound_item(rel: str, host: HostAdapter, command: str) -> CheckItem:
    """Whether the hook command bounds itself (the host kills a slow hook and runs the tool)."""
    if bounds_itself(host, command):
        return CheckItem(
            f"{rel} time limit",
            "OK",
            f"the hook denies by itself after {LIMIT_SECONDS} s (no timeout(1) needed)",
        )
    return CheckItem(
        f"{rel} time limit",
        "FAIL",
        "the hook command does not bound itself: when it hangs (or timeout(1) is missing, "
        f"as on stock macOS) {host.title} kills it at its own limit and runs the tool",
        _FIX,
    )


def _server_command(root: Path) -> CheckItem:
    """The Codex MCP entry exists and runs an executable absolute path."""
    rel = CODEX_CONFIG
    try:
        data = tomllib.loads((root / rel).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return CheckItem(rel, "FAIL", "missing (Codex has no personae MCP server)", _FIX)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return CheckItem(rel, "FAIL", f"unreadable: {exc}", "fix the TOML, then " + _FIX)
    servers = data.get("mcp_servers")
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    command = entry.get("command") if isinstance(entry, dict) else None
    if not isinstance(command, str):
        return CheckItem(rel, "FAIL", f"no [mcp_servers.{SERVER_NAME}] command", _FIX)
    if not (os.path.isabs(command) and os.access(command, os.X_OK)):
        return CheckItem(rel, "FAIL", f"MCP command {command!r} is not an executable path", _FIX)
    return CheckItem(rel, "OK", f"Codex MCP server runs {command}")


def check_hooks(root: Path) -> list[CheckItem]:
    """Check each host's hook file under ``root`` as that host will run it."""
    items: list[CheckItem] = []
    for rel, name, event in _FILES:
        host = ADAPTERS[name]
        try:
            config = load_json(root / rel, rel)
        except UsageError as exc:
            items.append(CheckItem(rel, "FAIL", str(exc), "fix the JSON, then " + _FIX))
            continue
        hooks = config.get("hooks")
        entries = hooks.get(event, []) if isinstance(hooks, dict) else []
        entries = entries if isinstance(entries, list) else []
        items += _matcher_items(rel, host, entries)
        items += _ours(rel, host, entries)
    items.append(_server_command(root))
    return items
