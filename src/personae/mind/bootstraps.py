"""Which session and which host process a bootstrap belongs to (the mind's side of the gate).

One bootstrap unlocks one session. The session id comes from the host, never from the
model: the hook payload carries it for the gate; the mind server learns it per call
(:func:`host_session`) from what the host sends it (Codex: the session id in the call's
``_meta``; Claude Code: its call id in ``_meta``, matched to the claim the gate recorded
for that call; Copilot CLI: ``COPILOT_AGENT_SESSION_ID``, set for each session's own MCP
server). Where a host gives no session id, a bootstrap binds to the *nearest host
process* (:func:`nearest_host`: the first ancestor that is not a shell or a wrapper such
as ``timeout``), never to any further ancestor: a host started from a bootstrapped host's
shell tool is a host of its own.

Kept to the standard library: the hook gate imports this on every tool call. Process
identity needs ``/proc`` (Linux); elsewhere it is ``None`` and only session ids bind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from personae.layout import SESSION_ID
from personae.procid import ProcessId, proc_stat, process_id
from personae.store.bootstraps import (
    bootstrap_scope,
    find_bootstrap,
    lookup_budget,
    record_claim,
)

__all__ = [
    "PASS_THROUGH",
    "HostCall",
    "ProcessId",
    "bootstrap_scope",
    "find_bootstrap",
    "host_session",
    "lookup_budget",
    "nearest_host",
    "process_id",
    "record_claim",
]

PASS_THROUGH = frozenset(
    {"sh", "dash", "bash", "zsh", "ksh", "mksh", "ash", "busybox", "fish", "timeout", "env"}
    | {"nice", "nohup", "setsid", "stdbuf", "ionice", "chrt", "taskset", "time", "sudo"}
)
"""Programs between a host and its hook (or MCP server) that are not the host: shells and
wrappers. The gate and the server both skip them to find the host process."""
_DEPTH = 8


def _name(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", "rb") as handle:
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return None


def nearest_host(pid: int | None = None) -> ProcessId | None:
    """The host process running ``pid`` (default: this process): its nearest ancestor whose
    program is not in :data:`PASS_THROUGH`. ``None`` without ``/proc``, or when only shells
    and wrappers were found within a few levels."""
    stat = proc_stat(os.getpid() if pid is None else pid)
    for _ in range(_DEPTH):
        if stat is None or stat.parent <= 1:
            return None
        parent = stat.parent
        stat = proc_stat(parent)
        if stat is None:
            return None
        if _name(parent) not in PASS_THROUGH:
            return ProcessId(parent, stat.started)
    return None


ENV_SESSIONS = {"copilot-cli": "COPILOT_AGENT_SESSION_ID"}
"""MCP client name -> the variable in which that host gives each MCP server it starts the
session that server serves (Copilot CLI starts one server per session, also in ``--acp``)."""
_META_SESSION = ("sessionId",)
"""``_meta`` keys in which a host passes its session id with each tool call (Codex)."""
_META_CALL = ("claudecode/toolUseId", "callId")
"""``_meta`` keys in which a host passes its id of the tool call (Claude Code, Codex): the id
the hook payload has as ``tool_use_id``."""


@dataclass(frozen=True)
class HostCall:
    """What the host told the mind server about one tool call."""

    client: str | None = None
    """The MCP client's name from its ``initialize`` (``claude-code``, ``codex-mcp-client``,
    ``copilot-cli``)."""
    meta: Mapping[str, Any] = field(default_factory=dict)
    """The call's ``_meta``."""


def _valid(value: object) -> str | None:
    return value if isinstance(value, str) and SESSION_ID.fullmatch(value) else None


def host_session(
    call: HostCall,
    claimed: Callable[[str], str | None],
    env: Mapping[str, str] | None = None,
) -> str | None:
    """The host's session id for ``call``, or ``None`` when the host gave none.

    In order: a session id in ``_meta`` (Codex); the session the hook gate claimed for the
    call id in ``_meta`` (``claimed(call_id)``; Claude Code, whose server outlives
    ``/clear``); the session the host gave this server in its environment (Copilot CLI).
    """
    for key in _META_SESSION:
        if (found := _valid(call.meta.get(key))) is not None:
            return found
    for key in _META_CALL:
        if (call_id := _valid(call.meta.get(key))) is not None:
            return claimed(call_id)
    variable = ENV_SESSIONS.get(call.client or "")
    if variable is not None:
        return _valid((os.environ if env is None else env).get(variable))
    return None
