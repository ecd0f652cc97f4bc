"""The PreToolUse hook gate: gated tools only after a successful bootstrap_session.

Input (stdin JSON): Claude Code / Codex PreToolUse (``session_id``,
``transcript_path``, ``cwd``, ``tool_name``, ...) or Copilot CLI
(``toolName``, ``toolArgs``, ``cwd``). A tool whose name fully matches a gate
pattern passes only when

1. the latest completed ``bootstrap_session`` call in the transcript returned a
   packet with ``mind_contract_available: true``, or
2. the transcript has no completed bootstrap (missing, lagging) and the store
   recorded a successful bootstrap for this session (Copilot, which has no
   session id or transcript: any bootstrap recorded within ``max_age``).

Everything else is blocked: exit 2 with the reason on stderr (fail closed).
Kept free of heavy imports: it runs on every tool call.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personae.hosts._transcript import latest_bootstrap

__all__ = [
    "DEFAULT_GATES",
    "Decision",
    "HookInput",
    "HookInputError",
    "compile_gates",
    "decide",
    "default_cache_dir",
    "parse_hook_input",
    "run",
    "session_start",
    "store_has_bootstrap",
]

DEFAULT_GATES = (
    "Bash",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "WebFetch",
    "Task",
    "bash",
    "edit",
    "create",
    "shell",
    "apply_patch",
    r"mcp__(?!personae__).*",
)
"""Gated tool-name patterns when no ``--gate`` is given (full match)."""

_MAX_STDIN = 10_000_000
COPILOT_MAX_AGE = 8 * 3600.0


class HookInputError(ValueError):
    """The hook's stdin is not a hook payload we understand."""


@dataclass(frozen=True)
class HookInput:
    """The fields of a PreToolUse payload the gate uses."""

    host: str
    """``claude`` (Claude Code and Codex shape) or ``copilot``."""
    tool_name: str
    session_id: str | None
    transcript_path: Path | None
    cwd: Path | None


@dataclass(frozen=True)
class Decision:
    """The gate's answer."""

    allow: bool
    reason: str


def parse_hook_input(raw: bytes | str) -> HookInput:
    """Parse stdin; raises HookInputError for anything malformed."""
    try:
        data: Any = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HookInputError(f"hook input is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HookInputError("hook input is not a JSON object")
    if isinstance(data.get("tool_name"), str) and data["tool_name"]:
        transcript = data.get("transcript_path")
        session = data.get("session_id")
        cwd = data.get("cwd")
        return HookInput(
            host="claude",
            tool_name=data["tool_name"],
            session_id=session if isinstance(session, str) and session else None,
            transcript_path=Path(transcript)
            if isinstance(transcript, str) and transcript
            else None,
            cwd=Path(cwd) if isinstance(cwd, str) and cwd else None,
        )
    if isinstance(data.get("toolName"), str) and data["toolName"]:
        cwd = data.get("cwd")
        session = data.get("sessionId")
        return HookInput(
            host="copilot",
            tool_name=data["toolName"],
            session_id=session if isinstance(session, str) and session else None,
            transcript_path=None,
            cwd=Path(cwd) if isinstance(cwd, str) and cwd else None,
        )
    raise HookInputError("hook input has neither tool_name nor toolName")


def compile_gates(patterns: list[str] | tuple[str, ...]) -> list[re.Pattern[str]]:
    """Compile gate patterns; raises re.error for a bad one."""
    return [re.compile(p) for p in patterns]


def store_has_bootstrap(
    store: Path, session_id: str | None, *, max_age: float | None = None
) -> tuple[bool, str]:
    """Is a successful bootstrap recorded (for ``session_id``, or within ``max_age`` s)?"""
    if not store.is_file():
        return False, f"no store at {store}"
    try:
        conn = sqlite3.connect(store.resolve().as_uri() + "?mode=ro", uri=True, timeout=2.0)
    except sqlite3.Error as exc:
        return False, f"store unreadable: {exc}"
    try:
        if session_id is not None:
            row = conn.execute(
                "SELECT 1 FROM mind_bootstraps WHERE session_id = ? LIMIT 1", (session_id,)
            ).fetchone()
        elif max_age is not None:
            row = conn.execute(
                "SELECT 1 FROM mind_bootstraps WHERE created_unix >= ? LIMIT 1",
                (time.time() - max_age,),
            ).fetchone()
        else:
            return False, "no session id to look up in the store"
    except sqlite3.Error as exc:
        return False, f"store has no bootstrap records ({exc})"
    finally:
        conn.close()
    if row is None:
        return False, "no recorded bootstrap for this session in the store"
    return True, "bootstrap_session succeeded (recorded in the store)"


def default_cache_dir() -> Path:
    """Where the gate keeps per-transcript scan state (user-only directory)."""
    explicit = os.environ.get("PERSONAE_GATE_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "personae" / "gate"


def decide(
    hook: HookInput,
    gates: list[re.Pattern[str]],
    *,
    store: Path | None = None,
    cache_dir: Path | None = None,
) -> Decision:
    """The gate decision for one tool call."""
    name = hook.tool_name
    if name.endswith("bootstrap_session") or not any(g.fullmatch(name) for g in gates):
        return Decision(True, f"{name} is not gated")
    why: list[str] = []
    if hook.transcript_path is not None:
        verdict, reason = latest_bootstrap(hook.transcript_path, cache_dir)
        if verdict is True:
            return Decision(True, reason)
        if verdict is False:
            return Decision(False, reason)
        why.append(reason)
    elif hook.host == "claude":
        why.append("no transcript_path in the hook input")
    if store is None and hook.cwd is not None:
        store = hook.cwd / ".personae" / "state.db"
    if store is not None:
        max_age = COPILOT_MAX_AGE if hook.host == "copilot" and hook.session_id is None else None
        ok, reason = store_has_bootstrap(store, hook.session_id, max_age=max_age)
        if ok:
            return Decision(True, reason)
        why.append(reason)
    return Decision(False, "; ".join(why) or "no successful bootstrap found")


def _message(tool: str, reason: str) -> str:
    return (
        f"personae gate: {tool} is blocked until bootstrap_session succeeds in this session "
        f"({reason}). Call the personae bootstrap_session tool first; if it reports "
        "mind_contract_available false, tell the user the mind is degraded."
    )


def run(argv: list[str], stdin: Any = None, stdout: Any = None, stderr: Any = None) -> int:
    """``personae hook pre-tool-use [--gate REGEX]... [--store PATH] [--no-cache]``: exit code."""
    stdin = sys.stdin.buffer if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    patterns: list[str] = []
    store: Path | None = None
    cache: Path | None = default_cache_dir()
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--no-cache":
            cache = None
            continue
        if arg in ("--gate", "--store") and args:
            value = args.pop(0)
        elif arg.startswith(("--gate=", "--store=")):
            arg, value = arg.split("=", 1)
        else:
            print(f"personae gate: blocked: unknown argument {arg!r}", file=stderr)
            return 2
        if arg == "--gate":
            patterns.append(value)
        else:
            store = Path(value)
    try:
        gates = compile_gates(patterns or list(DEFAULT_GATES))
    except re.error as exc:
        print(f"personae gate: blocked: bad --gate pattern: {exc}", file=stderr)
        return 2
    try:
        raw = stdin.read(_MAX_STDIN + 1)
        if len(raw) > _MAX_STDIN:
            raise HookInputError("hook input is too large")
        hook = parse_hook_input(raw)
    except (HookInputError, OSError) as exc:
        print(f"personae gate: blocked: {exc}", file=stderr)
        return 2
    decision = decide(hook, gates, store=store, cache_dir=cache)
    if decision.allow:
        return 0
    message = _message(hook.tool_name, decision.reason)
    if hook.host == "copilot":
        stdout.write(
            json.dumps({"permissionDecision": "deny", "permissionDecisionReason": message})
        )
        stdout.write("\n")
    print(message, file=stderr)
    return 2


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
        if isinstance(value, str) and re.fullmatch(r"[\w.:@/-]{1,200}", value):
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
