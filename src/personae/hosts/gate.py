"""The PreToolUse hook gate: gated tools only after a successful bootstrap.

Input (stdin JSON): Claude Code / Codex PreToolUse (``session_id``,
``transcript_path``, ``cwd``, ``tool_name``, ...) or Copilot CLI
(``sessionId``, ``toolName``, ``toolArgs``, ``cwd``). ``--host`` names the
host (else it is inferred from the payload's shape). A tool whose name fully
matches one of the host's gate patterns (:mod:`personae.hosts.adapters`, or
``--gate``) passes only when

1. (Claude Code) the latest completed call of the configured server's
   ``bootstrap_session`` (or the taught fallback ``get_system_prompt``) in an
   assistant entry of this session's transcript succeeded, or
2. the transcript has no completed call (none, lagging, too big to scan in
   time, not Claude's format) and the mind server recorded a successful
   bootstrap of this project for the payload's session id; only when the payload
   has none, for the nearest host process running this hook (never a further
   ancestor: a host started from a bootstrapped host's shell is another host).

When the host calls an unlock tool, the gate records a claim (the payload's session
id and call id) before allowing it: the mind server binds the bootstrap to that
session (:mod:`personae.mind.bootstraps`).

Everything else is denied in the host's own contract (exit 2 + stderr, or
Copilot's JSON ``permissionDecision``). The decision is bounded: stdin and
files are read with limits and without blocking opens, and a timer denies
when the gate has not decided within :data:`BUDGET_SECONDS` (a project whose store is
on PostgreSQL gets :data:`~personae.store.bootstraps.POSTGRES_BUDGET`). Kept free of
heavy imports: it runs on every tool call.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personae.hosts._transcript import latest_bootstrap
from personae.hosts.adapters import ADAPTERS, Host, HostAdapter
from personae.layout import SESSION_ID, Layout
from personae.mind.bootstraps import find_bootstrap, lookup_budget, nearest_host, record_claim

__all__ = [
    "BUDGET_SECONDS",
    "DEFAULT_GATES",
    "Decision",
    "HookInput",
    "HookInputError",
    "compile_gates",
    "decide",
    "parse_hook_input",
    "run",
    "session_start",
]

DEFAULT_GATES = ADAPTERS[Host.CLAUDE].gated
"""Claude Code's gated tool-name patterns (each host's are in its adapter)."""

BUDGET_SECONDS = 0.6
"""The gate denies when it has not decided within this many seconds (of its own run;
Python start-up comes on top, and the whole hook process stays under 1 s)."""
_SCAN_SHARE = 0.4
"""Seconds of the budget the transcript scan may use before the store is asked."""
_MAX_STDIN = 10_000_000


class HookInputError(ValueError):
    """The hook's stdin is not a hook payload we understand."""


class _OutOfTimeError(BaseException):
    """The gate's budget ran out. A BaseException, so that code which turns any Exception into
    an answer of its own does not swallow it: psycopg's import caught it and raised
    ImportError, and the gate said "psycopg is not installed" on a loaded machine."""


_timed_out: list[bool] = []
"""Set when the budget ran out, even where the alarm was caught and turned into another
error: any denial of such a run names the budget, not the error."""


@dataclass(frozen=True)
class HookInput:
    """The fields of a PreToolUse payload the gate uses."""

    host: Host
    """``claude``, ``codex`` or ``copilot``."""
    tool_name: str
    session_id: str | None
    transcript_path: Path | None
    cwd: Path | None
    call_id: str | None = None
    """The host's id of this tool call (``tool_use_id``; Claude Code and Codex)."""


@dataclass(frozen=True)
class Decision:
    """The gate's answer."""

    allow: bool
    reason: str


def _text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if isinstance(value, str) and "\0" in value:
        raise HookInputError(f"{key} in the hook input contains a NUL byte")
    return value if isinstance(value, str) and value else None


def parse_hook_input(raw: bytes | str, host: Host | None = None) -> HookInput:
    """Parse stdin; raises HookInputError for anything malformed."""
    try:
        data: Any = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise HookInputError(f"hook input is not JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise HookInputError("hook input is not a JSON object")
    if isinstance(data.get("tool_name"), str) and data["tool_name"]:
        transcript, cwd = _text(data, "transcript_path"), _text(data, "cwd")
        inferred = Host.CODEX if "turn_id" in data else Host.CLAUDE
        return HookInput(
            host=host or inferred,
            tool_name=data["tool_name"],
            session_id=_text(data, "session_id"),
            transcript_path=Path(transcript) if transcript else None,
            cwd=Path(cwd) if cwd else None,
            call_id=_text(data, "tool_use_id"),
        )
    if isinstance(data.get("toolName"), str) and data["toolName"]:
        cwd = _text(data, "cwd")
        return HookInput(
            host=host or Host.COPILOT,
            tool_name=data["toolName"],
            session_id=_text(data, "sessionId"),
            transcript_path=None,
            cwd=Path(cwd) if cwd else None,
        )
    raise HookInputError("hook input has neither tool_name nor toolName")


def compile_gates(patterns: list[str] | tuple[str, ...]) -> list[re.Pattern[str]]:
    """Compile gate patterns; raises re.error for a bad one."""
    return [re.compile(p) for p in patterns]


def decide(
    hook: HookInput,
    gates: list[re.Pattern[str]] | None = None,
    *,
    store: Path | None = None,
    server: str = "personae",
    deadline: float | None = None,
) -> Decision:
    """The gate decision for one tool call (``gates``: default, the host's patterns)."""
    host = ADAPTERS[hook.host]
    name = hook.tool_name
    if store is None and hook.cwd is not None:  # the project's (also from a subfolder), or
        store = Layout.for_mind(hook.cwd).state_db  # outside one the user's, as `serve` uses
    if name in host.own_tools(server):
        if name in host.unlock_tools(server) and hook.call_id and hook.session_id and store:
            _claim(store, hook)
        return Decision(True, f"{name} is a personae mind tool")
    patterns = gates if gates is not None else compile_gates(host.gated)
    if not any(g.fullmatch(name) for g in patterns):
        return Decision(True, f"{name} is not gated")
    why: list[str] = []
    if hook.transcript_path is not None and hook.host is Host.CLAUDE:
        scan_deadline = None if deadline is None else deadline - (BUDGET_SECONDS - _SCAN_SHARE)
        verdict, reason = latest_bootstrap(
            hook.transcript_path, host.unlock_tools(server), deadline=scan_deadline
        )
        if verdict is True:
            return Decision(True, reason)
        if verdict is False:
            return Decision(False, reason)
        why.append(reason)
    elif hook.host is Host.CLAUDE:
        why.append("no transcript_path in the hook input")
    if store is not None:
        if hook.session_id is not None:
            ok, reason = find_bootstrap(store, session_id=hook.session_id)
        else:
            ok, reason = find_bootstrap(store, host=nearest_host())
        if ok:
            return Decision(True, reason)
        why.append(reason)
    return Decision(False, "; ".join(why) or "no successful bootstrap found")


def _claim(store: Path, hook: HookInput) -> None:
    """Record that the host's session is making unlock call ``hook.call_id`` (best effort:
    without the claim the bootstrap binds to no session, and the session stays locked)."""
    assert hook.session_id is not None
    record_claim(store, session_id=hook.session_id, call_id=hook.call_id, host=nearest_host())


def _message(tool: str, reason: str, server: str, host: HostAdapter) -> str:
    return (
        f"personae gate: blocked: {tool} runs only after bootstrap_session succeeds in this "
        f"session ({reason}). Call the {host.mcp_tool('bootstrap_session', server)} tool first; if "
        "it reports mind_contract_available false, tell the user the mind is degraded."
    )


@dataclass
class _Args:
    patterns: list[str]
    store: Path | None = None
    host: Host | None = None
    server: str = "personae"


def _parse_args(argv: list[str]) -> _Args:
    parsed = _Args(patterns=[])
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--no-cache":  # accepted from older host files; the gate keeps no cache
            continue
        if arg in ("--gate", "--store", "--host", "--server") and args:
            value = args.pop(0)
        elif arg.startswith(("--gate=", "--store=", "--host=", "--server=")):
            arg, value = arg.split("=", 1)
        else:
            raise HookInputError(f"unknown argument {arg!r}")
        if arg == "--gate":
            parsed.patterns.append(value)
        elif arg == "--store":
            parsed.store = Path(value)
        elif arg == "--server":
            parsed.server = value
        elif value not in ADAPTERS:
            raise HookInputError(f"unknown --host {value!r} (valid: {', '.join(ADAPTERS)})")
        else:
            parsed.host = Host(value)
    return parsed


def _store_and_budget(store: Path | None, hook: HookInput) -> tuple[Path | None, float]:
    """The store to look bootstraps up in (``--store``, else the project's of the payload's
    ``cwd``) and the gate's time budget for it (longer on PostgreSQL)."""
    if store is None and hook.cwd is not None:  # the project's, also from a subfolder
        store = Layout.find(hook.cwd).state_db
    return store, BUDGET_SECONDS if store is None else lookup_budget(store, BUDGET_SECONDS)


def _on_alarm(signum: int, frame: object) -> None:
    _timed_out.append(True)
    raise _OutOfTimeError


def run(argv: list[str], stdin: Any = None, stdout: Any = None, stderr: Any = None) -> int:
    """``personae hook pre-tool-use [--host H] [--gate RE]... [--store P] [--server S]``.

    Returns the exit code; writes the host's denial to ``stdout``/``stderr``.
    """
    stdin = sys.stdin.buffer if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    started = time.monotonic()
    host = ADAPTERS[Host.CLAUDE]
    tool = "this tool"
    server = "personae"
    timer = hasattr(signal, "setitimer")
    budget = BUDGET_SECONDS
    _timed_out.clear()
    if timer:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, BUDGET_SECONDS)
    try:
        args = _parse_args(argv)
        server = args.server
        if args.host is not None:
            host = ADAPTERS[args.host]
        try:
            gates = compile_gates(args.patterns) if args.patterns else None
        except re.error as exc:
            raise HookInputError(f"bad --gate pattern: {exc}") from None
        raw = stdin.read(_MAX_STDIN + 1)
        if len(raw) > _MAX_STDIN:
            raise HookInputError("hook input is too large")
        hook = parse_hook_input(raw, args.host)
        host, tool = ADAPTERS[hook.host], hook.tool_name
        store, budget = _store_and_budget(args.store, hook)
        if timer and budget > BUDGET_SECONDS:  # PostgreSQL: psycopg and a connection
            signal.setitimer(signal.ITIMER_REAL, max(0.01, started + budget - time.monotonic()))
        decision = decide(
            hook, gates, store=store, server=server, deadline=started + BUDGET_SECONDS
        )
    except _OutOfTimeError:
        decision = Decision(False, "")
    except (HookInputError, OSError) as exc:
        decision = Decision(False, str(exc))
    finally:
        if timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    if not decision.allow and (_timed_out or not decision.reason):
        decision = Decision(False, f"the gate could not decide within {budget} s")
    if decision.allow:
        return 0
    code, out, err = host.deny(_message(tool, decision.reason, server, host))
    stdout.write(out)
    stderr.write(err)
    return code


def session_start(stdin: Any = None, stdout: Any = None) -> int:
    """``personae hook session-start``: tell the model its session id and the first call.

    Prints Claude Code SessionStart ``additionalContext`` (well under the
    10,000-character limit); always exits 0 (it must never block a session).
    """
    stdin = sys.stdin.buffer if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    session = None
    try:
        data = json.loads(stdin.read(1_000_000) or b"{}")
        value = data.get("session_id") if isinstance(data, dict) else None
        if isinstance(value, str) and SESSION_ID.fullmatch(value):
            session = value
    except (ValueError, OSError):
        session = None
    arg = f'session_id="{session}"' if session else ""
    context = (
        f"personae: before the first substantive answer or any external tool call, call "
        f"mcp__personae__bootstrap_session({arg}) and treat its packet as the mind contract. "
        "If mind_contract_available is false, say the mind is degraded and do not impersonate "
        "the persona."
    )
    payload = {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}
    }
    stdout.write(json.dumps(payload) + "\n")
    return 0
