"""``personae hook post-tool-use``: the host's own tool calls recorded as observations.

Claude Code and Codex run it after each tool (``PostToolUse``: ``tool_name``,
``tool_input``, ``tool_response``, ``cwd``), Copilot CLI too (``postToolUse``:
``toolName``, ``toolArgs``, ``toolResult``, ``cwd``). The call goes into the
journal of the project's mind (found from ``cwd`` as every command finds its
project) through the same ``observe`` the mind server offers, so it is
redacted the same way and recallable at once; personae's own mind tools are
not recorded again.

It never blocks the host: it always exits 0, reads at most
:data:`MAX_STDIN` bytes, keeps at most :data:`MAX_FIELD_CHARS` characters of
the arguments and of the result (with a notice saying how much was cut),
gives up after :data:`BUDGET_SECONDS`, and does nothing outside a project
(no ``.personae/`` folder: no store is created). When the observation raises
cautionary flags (a failed result, a surprise above the stop threshold, ...)
Claude Code and Codex get them back as ``additionalContext``.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personae.hosts.adapters import ADAPTERS, Host
from personae.layout import Layout, find_root

__all__ = [
    "BUDGET_SECONDS",
    "MAX_FIELD_CHARS",
    "MAX_STDIN",
    "ToolCall",
    "bounded",
    "parse_post_tool_use",
    "record",
    "run",
]

MAX_STDIN = 4_000_000
"""Bytes of hook input read at most (a larger payload is not recorded)."""
MAX_FIELD_CHARS = 8_000
"""Characters kept of the arguments and of the result each."""
BUDGET_SECONDS = 5.0
"""The hook gives up (and exits 0) when recording takes longer than this."""


class _OutOfTimeError(Exception):
    pass


@dataclass(frozen=True)
class ToolCall:
    """One finished tool call as a host reports it."""

    host: Host
    tool_name: str
    args: Any
    result: Any
    cwd: Path | None


def parse_post_tool_use(raw: bytes | str, host: Host | None = None) -> ToolCall:
    """The tool call in a PostToolUse payload; ValueError for anything else."""
    try:
        data: Any = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"hook input is not JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError("hook input is not a JSON object")
    cwd = data.get("cwd")
    where = Path(cwd) if isinstance(cwd, str) and cwd and "\0" not in cwd else None
    name = data.get("tool_name")
    if isinstance(name, str) and name:
        inferred = Host.CODEX if "turn_id" in data else Host.CLAUDE
        return ToolCall(
            host or inferred, name, data.get("tool_input"), data.get("tool_response"), where
        )
    name = data.get("toolName")
    if isinstance(name, str) and name:
        args = data.get("toolArgs")
        if isinstance(args, str):  # Copilot CLI sends the arguments as a JSON string
            with contextlib.suppress(ValueError):
                args = json.loads(args)
        result = data.get("toolResult")
        if isinstance(result, dict) and "textResultForLlm" in result:
            kind = result.get("resultType")
            text = str(result.get("textResultForLlm"))
            result = text if kind in (None, "success") else f"{kind}: {text}"
        return ToolCall(host or Host.COPILOT, name, args, result, where)
    raise ValueError("hook input has neither tool_name nor toolName")


def bounded(value: Any, limit: int = MAX_FIELD_CHARS) -> str:
    """``value`` as text (JSON unless a string), cut to ``limit`` characters with a notice."""
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    if len(text) <= limit:
        return text
    notice = f" … [personae: cut to {limit} of {len(text)} characters]"
    return text[: max(0, limit - len(notice))] + notice


def record(
    call: ToolCall, *, root: Path | None = None, server: str = "personae"
) -> list[str] | None:
    """Record ``call`` in the mind of the project at ``root`` (default: found from the call's
    cwd). Returns the observation's cautionary flags, ``None`` when nothing was recorded
    (a personae mind tool, or no project)."""
    if call.tool_name in ADAPTERS[call.host].own_tools(server):
        return None
    if root is None:
        root = find_root(call.cwd) if call.cwd is not None else None
    if root is None or not Layout(root).dir.is_dir():
        return None
    # local import: the mind service and the store load only when there is a project
    from personae.mind.service import MindService
    from personae.store.db import Store

    layout = Layout(root)
    service = MindService(layout.memory, None, Store(layout.state_db))
    answer = service.observe(
        call.tool_name, bounded(call.args), bounded(call.result), excerpts=False
    )
    return list(answer["cautionary_flags"])


def _on_alarm(signum: int, frame: object) -> None:
    raise _OutOfTimeError


def _options(argv: list[str]) -> tuple[Host | None, str]:
    host: Host | None = None
    server = "personae"
    args = list(argv)
    while args:
        arg = args.pop(0)
        key, _, value = arg.partition("=")
        if key in ("--host", "--server") and not value and args:
            value = args.pop(0)
        if key == "--host" and value in ADAPTERS:
            host = Host(value)
        elif key == "--server" and value:
            server = value
        else:
            raise ValueError(f"unknown argument {arg!r}")
    return host, server


def run(argv: list[str], stdin: Any = None, stdout: Any = None, stderr: Any = None) -> int:
    """``personae hook post-tool-use [--host H] [--server S]``: always returns 0."""
    stdin = sys.stdin.buffer if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    timer = hasattr(signal, "setitimer")
    if timer:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, BUDGET_SECONDS)
    flags: list[str] | None = None
    call: ToolCall | None = None
    try:
        host, server = _options(argv)
        raw = stdin.read(MAX_STDIN + 1)
        if len(raw) > MAX_STDIN:
            raise ValueError(f"hook input is larger than {MAX_STDIN} bytes; not recorded")
        call = parse_post_tool_use(raw, host)
        flags = record(call, server=server)
    except _OutOfTimeError:
        stderr.write(f"personae observe hook: not recorded within {BUDGET_SECONDS} s\n")
    except Exception as exc:  # never block the host, whatever went wrong
        stderr.write(f"personae observe hook: not recorded: {exc}\n")
    finally:
        if timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    if flags and call is not None and call.host is not Host.COPILOT:
        context = "personae observe: " + "; ".join(flags)
        payload = {
            "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": context}
        }
        stdout.write(json.dumps(payload) + "\n")
    return 0
