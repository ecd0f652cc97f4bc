"""Interactive handovers: a handover runs attached to the terminal as well as in batch mode.

The child ``personae run --context-from FILE`` runs attached to the terminal:
stdin, stdout and stderr are inherited (not piped), so the
user sees the run live and answers its follow-up prompt. It runs once (a person
is at the keyboard: no automatic retries), in the caller's process group so that
it can read the terminal and Ctrl-C reaches it. Results are still written back:
the child writes them itself; if it exits without doing so, the exit code is
recorded (the same record a batch handover leaves).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from personae.handover._ledger import ledger_event
from personae.handover.child import (
    GRACE_SECONDS,
    AttemptOutcome,
    ChildOptions,
    HandoverOutcome,
    _fresh_results,
    _prepare,
    _signature,
    _write_results,
    child_environment,
    wait_or_stop,
)
from personae.handover.files import read_handover
from personae.handover.schema import Results

__all__ = ["run_interactive"]


def _stop(proc: subprocess.Popen[bytes], grace: float = GRACE_SECONDS) -> None:
    """Terminate the child, then kill it after ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_interactive(
    path: Path | str,
    *,
    cwd: Path,
    options: ChildOptions | None = None,
    on_start: Callable[[int], None] | None = None,
) -> HandoverOutcome:
    """Run the handover at ``path`` once, attached to this terminal; results written back.

    Of ``options`` the timeout, command, persona, model, return path and ledger apply
    (one attempt: a person is at the keyboard).
    """
    options = options or ChildOptions()
    timeout = options.timeout
    handover, results_file, argv, db = _prepare(path, cwd=cwd, options=options, interactive=True)
    env = child_environment()
    before = _signature(results_file)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env)  # stdio inherited: the terminal
    except OSError as exc:
        failed = Results(status="failure", error=f"cannot start {argv[0]}: {exc.strerror or exc}")
        return HandoverOutcome(
            path=results_file, handover=_write_results(results_file, handover, failed)
        )
    if on_start is not None:
        on_start(proc.pid)
    try:
        code, timed_out = wait_or_stop(proc, timeout, lambda: _stop(proc))
    except KeyboardInterrupt:
        _stop(proc, grace=0.5)
        stopped = Results(status="failure", error="interrupted")
        _write_results(results_file, handover, stopped)
        ledger_event(
            db, handover, "result", path=results_file, status="failure", detail="interrupted"
        )
        raise
    attempt = AttemptOutcome(
        attempt=1, exit_code=code, timed_out=timed_out, duration=time.monotonic() - start,
        stdout="", stderr="", pid=proc.pid,
    )  # fmt: skip
    results = _fresh_results(results_file, before)
    if results is None or timed_out:
        error: str | None
        if timed_out:
            error = f"timed out after {attempt.duration:.1f}s; the interactive run was stopped"
        else:
            error = None if code == 0 else f"child exited with code {code}"
        results = Results(status="success" if error is None else "failure", error=error)
        _write_results(results_file, handover, results)
        ledger_event(db, handover, "result", path=results_file, status=results.status, detail=error)
    return HandoverOutcome(
        path=results_file, handover=read_handover(results_file).handover, attempts=[attempt]
    )
