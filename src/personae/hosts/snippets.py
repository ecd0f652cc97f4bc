"""Host instruction snippets and hook/MCP configuration, rendered from one template.

Hosts reliably show the model their instruction files (CLAUDE.md, AGENTS.md,
.github/copilot-instructions.md), tool descriptions and tool results, not MCP
server instructions; so the bootstrap rule goes into every instruction file.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from typing import Any

from personae.hosts.adapters import ADAPTERS, Host
from personae.hosts.wrapper import hook_command

__all__ = [
    "BEGIN",
    "END",
    "GLOBAL_INSTRUCTIONS",
    "HOOK_COMMAND",
    "MAX_SNIPPET_CHARS",
    "OBSERVE_COMMAND",
    "REQUIRED_MARKERS",
    "SERVER_NAME",
    "SESSION_START_COMMAND",
    "TOML_BEGIN",
    "TOML_END",
    "claude_hooks",
    "codex_config_block",
    "copilot_hooks",
    "gate_args",
    "global_instructions",
    "home_instructions",
    "mcp_entry",
    "observe_hooks",
    "snippet",
]

SERVER_NAME = "personae"
BEGIN = "<!-- personae:bootstrap:begin (managed by `personae hosts render`) -->"
END = "<!-- personae:bootstrap:end -->"
MAX_SNIPPET_CHARS = 2_000
"""Longest managed block: under 2,048, the shortest cut a host applies to text it shows
(Claude Code's, for MCP server instructions and tool descriptions)."""
HOOK_COMMAND = "hook pre-tool-use"
"""What every personae gate command contains (after the personae path)."""
SESSION_START_COMMAND = "hook session-start"
OBSERVE_COMMAND = "hook post-tool-use"
"""What every personae observe-hook command contains (after the personae path)."""
TOML_BEGIN = "# personae:begin (managed by `personae hosts render`)"
TOML_END = "# personae:end"

REQUIRED_MARKERS = (
    "bootstrap_session",
    "observe",
    "reflect",
    "recall",
    "mind_contract_available",
    "get_system_prompt",
    "context",
    "list_memory_files",
    "degraded",
    "MCP server instructions",
    "refresh_persona",
    "surprise",
    "Body rules",
)
"""Strings every rendered snippet (and every checked file) must contain."""

_TEMPLATE = """\
{begin}
## personae mind: session bootstrap

Before the first substantive answer or any external tool call, call \
`{p}bootstrap_session()` once and treat its packet as the live mind contract. \
MCP server instructions are not reliably shown to the model; this file is.

{names}

- Tool missing? Fall back in order: `{p}get_system_prompt()`, `{p}context()`, \
`{p}list_memory_files()`.
- `mind_contract_available` false (or get_system_prompt text starts with "ERROR:"): \
say the mind is degraded and do not impersonate the persona.
- Server unreachable: say you are in degraded body-only mode before using tools \
that depend on memory or persona.
{hook_line}\
- A post-tool hook records each tool call with observe.
- Body rules (host, settings, hooks) win for security and tool use; mind rules for \
continuity and voice unless they conflict with body safety.

Per turn:
- `observe(tool_name, args)` before and `observe(tool_name, args, result)` after \
external tool calls unless a hook records them.
- `reflect(observation, kind)` for user_said, time_passed, ambient, internal.
- `recall(query, k, facet)` when an excerpt is not enough; surface cautionary_flags.
- observe `surprise` above 0.7: stop and surface it.
- Contract files edited: call `{p}refresh_persona()`.
{end}
"""

_HOOK_LINES = {
    Host.CLAUDE: "- A PreToolUse hook blocks Bash, edits and other MCP tools until "
    "bootstrap_session succeeds.\n",
    Host.CODEX: "- A PreToolUse hook blocks shell tools until bootstrap_session succeeds.\n",
    Host.COPILOT: "- A preToolUse hook blocks shell and edit tools until "
    "bootstrap_session succeeds.\n",
}


def _names_line() -> str:
    """Each host's own name of the bootstrap tool, and how each finds deferred MCP tools
    (hosts read each other's files: Copilot CLI reads CLAUDE.md and AGENTS.md too)."""
    tool = "bootstrap_session"
    claude, codex, copilot = (ADAPTERS[h].mcp_tool(tool, SERVER_NAME) for h in Host)
    return (
        f"- Its name: Copilot CLI `{copilot}`; Claude Code `{claude}` (deferred: "
        f"`ToolSearch` with `select:{claude}` first); Codex `{codex}` (if hidden, "
        f"find it with its `tool_search`: `{SERVER_NAME} {tool}`)."
    )


def snippet(host: Host | str) -> str:
    """The instruction block for ``host`` (claude, codex or copilot): the mind tools under
    the host's own names (``mcp__personae__...``, ``personae-...``)."""
    host = Host(host)
    prefix = ADAPTERS[host].mcp_tool("", SERVER_NAME)
    return _TEMPLATE.format(
        begin=BEGIN, end=END, p=prefix, hook_line=_HOOK_LINES[host], names=_names_line()
    )


def _command_hook(command: str, timeout: int) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": timeout}


def gate_args(gates: list[str]) -> str:
    """`` --gate PATTERN`` for each pattern, shell-quoted."""
    return "".join(f" --gate {shlex.quote(g)}" for g in gates)


def _gate_argv(host: Host, gates: list[str] | None) -> list[str]:
    argv = ["--host", host]
    for gate in gates or []:
        argv += ["--gate", gate]
    return argv


def _matcher(host: Host, gates: list[str] | None) -> str:
    if gates:
        # The unlock calls too: the gate records which session makes them.
        unlock = "|".join(sorted(ADAPTERS[host].unlock_tools(SERVER_NAME)))
        return "|".join(f"^(?:{g})$" for g in [*gates, unlock])
    matcher = ADAPTERS[host].matcher
    assert matcher is not None  # claude and codex have matchers
    return matcher


def claude_hooks(
    personae: str, gates: list[str] | None = None, host: Host = Host.CLAUDE
) -> dict[str, Any]:
    """The ``hooks`` entries for Claude Code settings (or, with ``host="codex"``, Codex hooks.json).

    The matcher lists the host's gated tools in its own regex dialect (no
    look-around: Codex compiles matchers with Rust's ``regex``); the gate matches
    each pattern against the whole name and decides. The command is the absolute
    ``personae`` path wrapped so a missing binary, a crash or a time-out denies.
    """
    command = hook_command(ADAPTERS[host], personae, _gate_argv(host, gates))
    return {
        "PreToolUse": [{"matcher": _matcher(host, gates), "hooks": [_command_hook(command, 10)]}],
        "SessionStart": [
            {"hooks": [_command_hook(f"{shlex.quote(personae)} hook session-start", 10)]}
        ],
    }


_OBSERVE_WRAPPER = (
    'if command -v timeout >/dev/null 2>&1; then timeout -k 1 {limit} "$0" "$@"; '
    'else "$0" "$@"; fi; exit 0'
)


def _observe_command(personae: str, host: Host, *, limit: int = 8) -> str:
    """``personae hook post-tool-use --host H``, bounded by ``timeout`` when the system has
    it, exiting 0 whatever happens (a missing binary or a crash must not block the host)."""
    argv = [personae, "hook", "post-tool-use", "--host", host]
    return "sh -c " + shlex.quote(_OBSERVE_WRAPPER.format(limit=limit)) + " " + shlex.join(argv)


def observe_hooks(personae: str, host: Host) -> dict[str, Any]:
    """The hook entries that record every tool call of ``host`` as an observation.

    Claude Code and Codex: a ``PostToolUse`` group with no matcher (every tool); Copilot
    CLI: a ``postToolUse`` command (its hooks have no matcher).
    """
    command = _observe_command(personae, host)
    if host is Host.COPILOT:
        return {"postToolUse": [{"type": "command", "bash": command, "timeoutSec": 10}]}
    return {"PostToolUse": [{"hooks": [_command_hook(command, 10)]}]}


def copilot_hooks(personae: str, gates: list[str] | None = None) -> dict[str, Any]:
    """The Copilot CLI hook file (``.github/hooks/personae.json``); Copilot has no matcher."""
    command = hook_command(ADAPTERS[Host.COPILOT], personae, _gate_argv(Host.COPILOT, gates))
    return {
        "version": 1,
        "hooks": {"preToolUse": [{"type": "command", "bash": command, "timeoutSec": 10}]},
    }


def mcp_entry(personae: str) -> dict[str, Any]:
    """The MCP server entry (stdio) for ``.mcp.json`` style configs."""
    return {"command": personae, "args": ["serve"]}


def codex_config_block(personae: str) -> str:
    """The repo-local ``.codex/config.toml`` block (dotted keys: valid before any table)."""
    return (
        f"{TOML_BEGIN}\n"
        f"mcp_servers.{SERVER_NAME}.command = {json.dumps(personae)}\n"
        f'mcp_servers.{SERVER_NAME}.args = ["serve"]\n'
        f"{TOML_END}\n"
    )


GLOBAL_INSTRUCTIONS: dict[Host, tuple[str | None, str, str]] = {
    Host.CLAUDE: ("CLAUDE_CONFIG_DIR", "~/.claude", "CLAUDE.md"),
    Host.CODEX: ("CODEX_HOME", "~/.codex", "AGENTS.md"),
    Host.COPILOT: (None, "~/.copilot", "copilot-instructions.md"),
}
"""Each host's user-level (global) instruction file: (environment variable that moves its
folder, default folder, file name). The host reads it in every project, beside the
repository's own instruction file."""


def global_instructions(env: Mapping[str, str] | None = None) -> dict[Host, str]:
    """Where each host reads its global instructions, as this environment sets them
    (``~`` left for the user's home)."""
    env = os.environ if env is None else env
    found: dict[Host, str] = {}
    for host, (variable, default, name) in GLOBAL_INSTRUCTIONS.items():
        folder = env.get(variable) if variable else None
        found[host] = f"{(folder or default).rstrip('/')}/{name}"
    return found


def home_instructions(personae: str, root: str, env: Mapping[str, str] | None = None) -> str:
    """What to paste into files in the home directory (never written by personae)."""
    entry = json.dumps({"type": "local", "command": personae, "args": ["serve"], "tools": ["*"]})
    where = global_instructions(env)
    return f"""\
Files in your home directory are never edited by personae. What each host still needs there:

0. Global instructions (every project, also those without the files above): append each
   host's block above to its user-level instruction file:
     Claude Code: {where[Host.CLAUDE]}   (the CLAUDE.md block)
     Codex:       {where[Host.CODEX]}   (the AGENTS.md block)
     Copilot CLI: {where[Host.COPILOT]}   (the .github/copilot-instructions.md block)
1. Claude Code: nothing (the project's .mcp.json and .claude/settings.json load in this
   folder). To enable personae globally, run
   `claude mcp add {SERVER_NAME} -- {shlex.quote(personae)} serve`.
2. Codex: the repo-local .codex/ files (hooks.json, config.toml with the MCP server) load
   only for trusted projects. Add to $CODEX_HOME/config.toml (default ~/.codex/config.toml):
     [projects.{json.dumps(root)}]
     trust_level = "trusted"
   and review the hook once with /hooks in an interactive session (or run
   `codex exec --dangerously-bypass-hook-trust` for throwaway runs).
3. Copilot CLI: reads the project's .mcp.json (the personae entry is there; it wins over a
   user entry of the same name). Elsewhere, add to ~/.copilot/mcp-config.json under "mcpServers":
     "{SERVER_NAME}": {entry}
   The hook file .github/hooks/personae.json loads once the folder is trusted.
"""
