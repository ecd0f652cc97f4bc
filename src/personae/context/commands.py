"""``!command`` injection in profile and skill text, off unless allowed.

Two forms are recognised: ``!`command args``` anywhere, and ``!command args``
at the start of a line or after ``": "`` (as in ``Load state: !cat STATE.md``).
A command runs only when ``.personae/config.yaml`` has ``commands.enabled: true``
and its program (first word, compared exactly) is in ``commands.allow``; it
runs without a shell (``shlex`` split), in the project root, with a timeout
and an output cap. Text that came from a handover never runs anything.
A backtick form that does not run is replaced by a visible ``[command not run: ...]``;
a bare line form runs only when its program is allowed, and is otherwise left as
written (it may be ordinary prose such as ``!important``).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from personae.procs import run_tied
from personae.project import CommandsConfig

__all__ = ["CommandRun", "defuse_commands", "expand_commands", "has_commands"]

_PATTERN = re.compile(r"!`(?P<tick>[^`\n]+)`|(?:^|(?<=: ))!(?P<line>[A-Za-z./][^\n`]*)", re.M)


@dataclass(frozen=True)
class CommandRun:
    """One ``!command`` occurrence and what happened to it."""

    command: str
    ran: bool
    reason: str
    """``ok``, ``exit N``, ``timeout``, or why it did not run."""


def has_commands(text: str) -> bool:
    """True when ``text`` contains a ``!command`` form."""
    return bool(_PATTERN.search(text))


def defuse_commands(text: str) -> str:
    """``text`` with every ``!command`` form made inert (a space after its ``!``): for
    file content quoted into a profile's own text, where such a form would run."""
    return _PATTERN.sub(lambda m: "! " + m.group(0)[1:], text)


def _run(command: str, config: CommandsConfig, cwd: Path) -> tuple[str, CommandRun]:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return f"[command not run: cannot parse ({exc})]", CommandRun(command, False, "unparsable")
    if not argv:
        return "[command not run: empty]", CommandRun(command, False, "empty")
    if argv[0] not in config.allow:
        why = f"{argv[0]!r} is not in commands.allow"
        return f"[command not run: {why}]", CommandRun(command, False, why)
    try:
        proc = run_tied(argv, cwd=cwd, timeout=config.timeout)
    except subprocess.TimeoutExpired:
        why = f"timed out after {config.timeout:g}s"
        return f"[command {argv[0]} {why}]", CommandRun(command, True, "timeout")
    except OSError as exc:
        why = f"cannot run {argv[0]}: {exc.strerror}"
        return f"[command not run: {why}]", CommandRun(command, False, why)
    out = proc.stdout.rstrip("\n")
    if len(out) > config.max_output:
        more = len(out) - config.max_output
        out = f"{out[: config.max_output]}\n[output cut: {more} more characters]"
    status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
    if proc.returncode != 0:
        out = f"{out}\n[command exited with status {proc.returncode}]".lstrip("\n")
    return out, CommandRun(command, True, status)


def expand_commands(
    text: str, config: CommandsConfig, cwd: Path, *, trusted: bool = True
) -> tuple[str, list[CommandRun]]:
    """Replace every ``!command`` in ``text`` by its output (or a not-run notice)."""
    runs: list[CommandRun] = []

    def sub(match: re.Match[str]) -> str:
        command = (match.group("tick") or match.group("line") or "").strip()
        if match.group("line") is not None:
            words = command.split(maxsplit=1)
            if not (trusted and config.enabled and words and words[0] in config.allow):
                return match.group(0)
        if not trusted:
            runs.append(CommandRun(command, False, "text came from a handover"))
            return "[command not run: text came from a handover]"
        if not config.enabled:
            runs.append(CommandRun(command, False, "commands are disabled"))
            return "[command not run: commands are disabled in .personae/config.yaml]"
        out, run = _run(command, config, cwd)
        runs.append(run)
        return out

    return _PATTERN.sub(sub, text), runs
