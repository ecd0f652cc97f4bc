"""The shell wrapper every personae hook command runs in: fail closed, bounded in time.

A host treats a hook that is missing (exit 127), crashes (exit 1) or outlives the
host's own limit (killed at 10 s) as a non-blocking error and runs the tool. The
wrapper turns each of those into the host's denial, and bounds the hook by itself,
with POSIX ``sh`` and ``kill``/``trap``/``wait`` builtins plus ``sleep``, ``mkdir``
and ``rm`` (present on stock macOS and every Linux): no ``timeout(1)``, which stock
macOS lacks.

How it bounds the hook:

- the gate runs in the background (its stdin is handed over on fd 3, since ``sh``
  gives a background job ``/dev/null`` as stdin) with stdout and stderr in files of a
  private temporary folder, so a hung entry point, or a child it left behind, never
  holds the host's pipes;
- a watchdog subshell sleeps :data:`LIMIT_SECONDS`, then sends ``ALRM`` to the
  wrapper, whose trap kills the gate and stops waiting, so even a process stuck in
  the kernel (which ``SIGKILL`` cannot end at once) does not hold the wrapper;
- the wrapper relays the gate's output only when the gate finished in time, and
  otherwise denies in the host's contract. Anything it cannot set up (no writable
  temporary folder, no ``sleep``) denies too.

``personae hosts check`` compares the script of each installed hook with
:func:`wrapper_script` (:func:`bounds_itself`): an older wrapper, which relied on
``timeout(1)`` when present, fails the check.
"""

from __future__ import annotations

import shlex

from personae.hosts.adapters import HostAdapter

__all__ = ["LIMIT_SECONDS", "bounds_itself", "hook_command", "split_hook_command", "wrapper_script"]

LIMIT_SECONDS = 7
"""Seconds the gate may run before the wrapper kills it and denies (hosts kill at 10 s)."""

_SCRIPT = (
    "rc=125; w=; p=; d=${{TMPDIR:-/tmp}}/personae-gate.$$; "
    'relay() {{ [ -f "$1" ] && while IFS= read -r l || [ -n "$l" ]; do '
    'printf \'%s\\n\' "$l"; done <"$1"; }}; '
    'if (umask 077; mkdir "$d") 2>/dev/null || '
    '{{ d=/tmp/personae-gate.$$; (umask 077; mkdir "$d") 2>/dev/null; }}; then '
    "trap 'rc=124; kill -s KILL \"$p\" 2>/dev/null' ALRM; "
    "exec 3<&0; "
    '"$0" "$@" <&3 3<&- >"$d/o" 2>"$d/e" & p=$!; '
    "exec 3<&-; "
    '(trap \'kill "$s" 2>/dev/null; exit 0\' TERM; sleep {limit} & s=$!; wait "$s"; '
    "kill -s ALRM $$) </dev/null >/dev/null 2>&1 & w=$!; "
    'wait "$p"; r=$?; kill "$w" 2>/dev/null; '
    'if [ "$rc" -ne 124 ]; then rc=$r; relay "$d/o"; relay "$d/e" >&2; fi; '
    'rm -rf "$d"; '
    "fi; "
    '[ "$rc" -eq 0 ] && exit 0; '
    "{on_failure}"
)
_FAIL_EXIT2 = (
    '[ "$rc" -eq 2 ] && exit 2; echo "personae gate: blocked: the gate could not decide '
    '($0 exited $rc: missing, crashed, timed out (124) or no private temporary folder (125))" '
    ">&2; exit 2"
)
_FAIL_JSON = (
    'printf \'{"permissionDecision":"deny","permissionDecisionReason":"personae gate: '
    "blocked: the gate could not decide (exit %s: personae missing, crashed, timed out (124) "
    'or no private temporary folder (125))"}\\n\' "$rc"; exit 0'
)


def wrapper_script(host: HostAdapter, *, limit: int = LIMIT_SECONDS) -> str:
    """The ``sh -c`` script of ``host``'s hook command (``$0`` is the personae path)."""
    failure = _FAIL_JSON if host.json_deny else _FAIL_EXIT2
    return _SCRIPT.format(limit=limit, on_failure=failure)


def hook_command(
    host: HostAdapter, personae: str, args: list[str], *, limit: int = LIMIT_SECONDS
) -> str:
    """The hook command line: ``personae`` (an absolute path) wrapped so it fails closed.

    Runs ``personae hook pre-tool-use ARGS`` bounded to ``limit`` seconds; a missing
    binary (127), a crash (1), a time-out (124) or no private temporary folder (125)
    becomes that host's denial instead of the non-blocking error every host treats them
    as.
    """
    argv = [personae, "hook", "pre-tool-use", *args]
    return "sh -c " + shlex.quote(wrapper_script(host, limit=limit)) + " " + shlex.join(argv)


def split_hook_command(command: str) -> tuple[str, list[str]] | None:
    """(script, argv) of a ``sh -c SCRIPT PROGRAM ARGS...`` hook command, else ``None``."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if len(argv) >= 4 and argv[0] in ("sh", "/bin/sh") and argv[1] == "-c":
        return argv[2], argv[3:]
    return None


def bounds_itself(host: HostAdapter, command: str) -> bool:
    """Whether ``command`` runs in the current self-bounding wrapper for ``host``."""
    split = split_hook_command(command)
    return split is not None and split[0] == wrapper_script(host)
