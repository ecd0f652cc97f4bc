"""Running a handover in a child ``personae`` process: own process group, timeout, retries.

The child is a separate process started in its own session/process group; at
the timeout the whole group is killed (SIGTERM, a short grace, SIGKILL), and
the attempt is over only once the child's watchdog has killed every tool
command the child started (the lifeline pipe of :mod:`personae.procs`). A tied
child (the default) also dies with this process: a parent-death signal and the
run's process registry. A
failed attempt (non-zero exit, timeout, or ``results.status == failure``) is
retried with exponential backoff; after the last attempt the error state is
saved into the handover file. Exit codes: see :data:`EXIT_CODES`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal, assert_never

from personae.errors import UsageError
from personae.handover._ledger import ledger_event
from personae.handover.duration import format_seconds
from personae.handover.files import read_handover, save_handover, sha256_file, update_handover
from personae.handover.schema import ContextHandover, Results, ResultStatus
from personae.invocation import personae_argv
from personae.layout import Layout
from personae.limits import DEFAULTS
from personae.lineage import child_environment as with_lineage
from personae.procs import (
    LIFELINE_ENV,
    RUN_PROCESSES,
    UNATTENDED_ENV,
    die_with_parent,
    lifeline,
)
from personae.store.status import EXIT_PARTIAL

__all__ = [
    "DEPTH_ENV",
    "EXIT_CODES",
    "EXIT_FAILURE",
    "EXIT_INVALID",
    "EXIT_PARTIAL",
    "EXIT_SUCCESS",
    "EXIT_TIMEOUT",
    "HANDOVER_DEPTH_CAP",
    "AttemptOutcome",
    "ChildOptions",
    "ChildSpec",
    "CommandBuilder",
    "HandoverOutcome",
    "backoff_delays",
    "child_environment",
    "execute_handover",
    "exit_code_for",
    "handover_depth",
    "kill_group",
    "personae_run_command",
    "run_child",
    "wait_or_stop",
]

EXIT_SUCCESS = 0
EXIT_INVALID = 1
EXIT_FAILURE = 3
EXIT_TIMEOUT = 4
EXIT_CODES: dict[int, str] = {
    EXIT_SUCCESS: "success: the child wrote results with status success",
    EXIT_INVALID: "the handover breaks a safety rule, or the folder is in no project; "
    "nothing was run",
    2: "a mistake in a flag or in the file (malformed, or naming no persona, profile or "
    "model), found before any child started; nothing was run",
    EXIT_FAILURE: "the child run failed on every attempt; the error is saved in results",
    EXIT_TIMEOUT: "the last attempt timed out (its process group was killed)",
    EXIT_PARTIAL: "the child finished with status partial",
}
"""Exit codes of ``personae handover run`` and ``personae chain run``."""

DEPTH_ENV = "PERSONAE_HANDOVER_DEPTH"
"""Environment variable holding how many handover processes deep a process runs."""

HANDOVER_DEPTH_CAP = DEFAULTS.handover_depth_cap
"""Deepest chain of handover child processes that may hand over again."""


def handover_depth(environ: Mapping[str, str] | None = None) -> int:
    """How many handover processes deep this process runs (0 = started by a user).

    Read from ``PERSONAE_HANDOVER_DEPTH`` (set by the executor for its
    children); an unreadable value counts as the cap (fail closed).
    """
    env = os.environ if environ is None else environ
    raw = env.get(DEPTH_ENV, "0").strip() or "0"
    try:
        depth = int(raw)
    except ValueError:
        return HANDOVER_DEPTH_CAP
    return depth if depth >= 0 else HANDOVER_DEPTH_CAP


GRACE_SECONDS = 1.0
TAIL_CHARS = 4000


@dataclass(frozen=True, kw_only=True)
class ChildSpec:
    """What a command builder needs to build one child command."""

    handover_path: Path
    """The handover file the child reads (``--context-from``)."""
    persona: str
    """The persona to run."""
    timeout: float
    """Seconds the child may run."""
    return_path: Path | None
    """Where results go (``--context-return``), or ``None`` for the same file."""
    cwd: Path
    """The child's working directory."""
    model: str | None = None
    """Model for the child (``--model``), or ``None`` for its default."""
    interactive: bool = False
    """The child runs attached to the terminal (no ``--non-interactive``)."""

    @classmethod
    def for_handover(
        cls,
        file: Path,
        handover: ContextHandover,
        *,
        persona: str | None,
        timeout: float,
        return_path: Path | None,
        cwd: Path,
        model: str | None,
        interactive: bool = False,
    ) -> ChildSpec:
        """The spec for running ``handover`` (at ``file``) as ``persona`` or its target."""
        return cls(
            handover_path=file,
            persona=persona or handover.target.persona,
            timeout=timeout,
            return_path=return_path.resolve() if return_path is not None else None,
            cwd=Path(cwd),
            model=model,
            interactive=interactive,
        )


CommandBuilder = Callable[[ChildSpec], Sequence[str]]
"""Builds a child's argv (no shell is ever used)."""


def personae_run_command(spec: ChildSpec) -> list[str]:
    """``python -m personae run --persona P --context-from FILE --non-interactive ...``."""
    cmd = personae_argv(
        "run",
        "--persona",
        spec.persona,
        "--context-from",
        str(spec.handover_path),
        *([] if spec.interactive else ["--non-interactive"]),
        "--handover-timeout",
        format_seconds(spec.timeout),
    )
    if spec.return_path is not None:
        cmd += ["--context-return", str(spec.return_path)]
    if spec.model:
        cmd += ["--model", spec.model]
    return cmd


@dataclass(frozen=True, kw_only=True)
class AttemptOutcome:
    """One child process run."""

    attempt: int
    """1-based attempt number."""
    exit_code: int | None
    """The child's exit code (negative: killed by that signal; None: not started)."""
    timed_out: bool
    """Whether the timeout killed it."""
    duration: float
    """Seconds from spawn to exit."""
    stdout: str
    """Tail of stdout."""
    stderr: str
    """Tail of stderr."""
    pid: int | None
    """Process (and process group) id."""
    error: str | None = None
    """Why it could not start, if it did not."""


@dataclass(kw_only=True)
class HandoverOutcome:
    """The end state of a handover run (all attempts)."""

    path: Path
    """The file holding the results."""
    handover: ContextHandover
    """The handover with ``results``."""
    attempts: list[AttemptOutcome] = field(default_factory=list)
    """Every attempt, in order."""

    @property
    def status(self) -> ResultStatus:
        """``success``, ``failure`` or ``partial``."""
        return self.handover.results.status if self.handover.results else "failure"

    @property
    def exit_code(self) -> int:
        """The process exit code for this outcome (see EXIT_CODES)."""
        timed_out = bool(self.attempts) and self.attempts[-1].timed_out
        return exit_code_for(self.status, timed_out=timed_out)


def exit_code_for(status: ResultStatus, *, timed_out: bool) -> int:
    """The exit code of a handover run or chain that ended with ``status`` (see EXIT_CODES);
    a failure is a timeout when ``timed_out``."""
    match status:
        case "success":
            return EXIT_SUCCESS
        case "partial":
            return EXIT_PARTIAL
        case "failure":
            return EXIT_TIMEOUT if timed_out else EXIT_FAILURE
        case _:
            assert_never(status)


def backoff_delays(
    attempts: int,
    base: float = DEFAULTS.handover_backoff,
    factor: float = DEFAULTS.handover_backoff_factor,
) -> list[float]:
    """Delays before attempts 2..N: ``base * factor**n`` for n = 0, 1, ..."""
    return [base * factor**n for n in range(max(0, attempts - 1))]


def kill_group(
    pgid: int, grace: float = GRACE_SECONDS, *, reap: Callable[[], object] | None = None
) -> None:
    """SIGTERM the process group, wait up to ``grace`` seconds, then SIGKILL it.

    A child of this process stays in its group as a zombie until it is waited
    for: pass ``reap`` (its ``Popen.poll``) when the group's leader is one, or
    the group looks alive for the whole grace.
    """
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


LIFELINE_WAIT_SECONDS = 5.0
"""How long an ended attempt waits for the child's watchdog to kill the child's tools."""


def _tail(fh: IO[bytes]) -> str:
    fh.seek(0, os.SEEK_END)
    size = fh.tell()
    fh.seek(max(0, size - TAIL_CHARS * 4))
    return fh.read().decode("utf-8", "replace")[-TAIL_CHARS:]


def child_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default ``os.environ``) for a handover child: handover mode on, one
    handover deeper than this process, linked to the run this process is running
    (:func:`personae.lineage.child_environment`)."""
    child_env = dict(os.environ if env is None else env)
    child_env["PERSONAE_HANDOVER_MODE"] = "1"
    child_env[DEPTH_ENV] = str(handover_depth() + 1)
    with_lineage(child_env)  # the running run's id, trace and budget left
    return child_env


def wait_or_stop(
    proc: subprocess.Popen[bytes], timeout: float, stop: Callable[[], object]
) -> tuple[int | None, bool]:
    """Wait for ``proc`` up to ``timeout`` seconds, calling ``stop()`` if it runs longer;
    returns its exit code and whether it timed out."""
    try:
        return proc.wait(timeout=timeout), False
    except subprocess.TimeoutExpired:
        stop()
        return proc.wait(), True


def run_child(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    attempt: int = 1,
    env: dict[str, str] | None = None,
    on_start: Callable[[int], None] | None = None,
    tie: bool = True,
) -> AttemptOutcome:
    """Run ``argv`` in its own process group; kill the whole group at ``timeout``.

    Returns once the child and everything it started are gone (up to a few
    seconds for its watchdog). ``tie`` makes the child die with this process
    (parent-death signal of the calling thread, run-wide registry); a chain
    leaves it untied so that ``--resume`` can adopt a child that outlived it.
    """
    child_env = child_environment(env)
    child_env[UNATTENDED_ENV] = "1"  # nobody watches it: no unsandboxed run_shell
    start = time.monotonic()
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        lifeline() as (line_fd, line_wait),
    ):
        child_env[LIFELINE_ENV] = str(line_fd)
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=child_env,
                start_new_session=True,
                pass_fds=(line_fd,),
                preexec_fn=die_with_parent(register=True) if tie else None,  # noqa: PLW1509 - thread waits
            )
        except OSError as exc:
            return AttemptOutcome(
                attempt=attempt,
                exit_code=None,
                timed_out=False,
                duration=0.0,
                stdout="",
                stderr="",
                pid=None,
                error=f"cannot start {argv[0]}: {exc.strerror or exc}",
            )
        if tie:
            RUN_PROCESSES.add(proc.pid)
        if on_start is not None:
            on_start(proc.pid)
        try:
            code, timed_out = wait_or_stop(
                proc, timeout, lambda: kill_group(proc.pid, reap=proc.poll)
            )
        finally:
            if proc.poll() is None:  # interrupted (KeyboardInterrupt): never leave it behind
                kill_group(proc.pid, grace=0.2, reap=proc.poll)
                proc.wait()
            # Whatever the child left running in its group goes too, and the child's
            # watchdog kills the tool commands it started: wait for that.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            line_wait(LIFELINE_WAIT_SECONDS)
            if tie:
                RUN_PROCESSES.discard(proc.pid)
        return AttemptOutcome(
            attempt=attempt,
            exit_code=code,
            timed_out=timed_out,
            duration=time.monotonic() - start,
            stdout=_tail(out),
            stderr=_tail(err),
            pid=proc.pid,
        )


def _hash_or_none(path: Path) -> str | None:
    try:
        return sha256_file(path)
    except OSError:
        return None


def _signature(path: Path) -> tuple[int, int, int] | None:
    """Identity of the file's current version (atomic writes make a new inode)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _fresh_results(path: Path, before: tuple[int, int, int] | None) -> Results | None:
    """Results the child wrote during this attempt (the file was rewritten), else None."""
    now = _signature(path)
    if now is None or now == before:
        return None
    try:
        return read_handover(path).handover.results
    except UsageError:
        return None


def _describe(a: AttemptOutcome, results: Results | None) -> str:
    if a.error:
        return a.error
    if a.timed_out:
        return f"timed out after {a.duration:.1f}s; process group {a.pid} killed"
    if results is not None and results.error:
        return results.error
    tail = a.stderr.strip().splitlines()[-3:]
    detail = f": {' | '.join(tail)}" if tail else ""
    return f"child exited with code {a.exit_code}{detail}"


def _write_results(path: Path, fallback: ContextHandover, results: Results) -> ContextHandover:
    try:
        updated, _ = update_handover(path, lambda h: h.model_copy(update={"results": results}))
    except UsageError:
        updated = fallback.model_copy(update={"results": results})
        save_handover(updated, path)
    return updated


@dataclass(frozen=True, kw_only=True)
class ChildOptions:
    """How a handover child is run: as whom, with which limits, where its results go."""

    timeout: float = DEFAULTS.handover_timeout
    """Seconds per attempt."""
    attempts: int = DEFAULTS.handover_attempts
    """Attempts in total (batch runs; an interactive run has one)."""
    backoff: float = DEFAULTS.handover_backoff
    """Seconds before the first retry."""
    factor: float = DEFAULTS.handover_backoff_factor
    """Each later retry waits this many times longer."""
    command: CommandBuilder = personae_run_command
    """Builds the child's argv."""
    persona: str | None = None
    """Run as this persona (``None``: the handover's target)."""
    model: str | None = None
    """The child's default model (``--model``)."""
    return_path: Path | None = None
    """Where results go (``None``: back into the handover file)."""
    ledger_db: Path | Literal["auto"] | None = "auto"
    """The ledger database (``"auto"``: the project's ``state.db`` under ``cwd``)."""
    tie: bool = True
    """The child dies with this process (see :func:`run_child`)."""


def _prepare(
    path: Path | str, *, cwd: Path, options: ChildOptions, interactive: bool
) -> tuple[ContextHandover, Path, list[str], Path | None]:
    """The handover at ``path`` (re-read), the file its results go to, the child's argv and
    the ledger database."""
    file = Path(path).resolve()
    handover = read_handover(file).handover
    return_path = options.return_path
    results_file = return_path.resolve() if return_path is not None else file
    spec = ChildSpec.for_handover(
        file, handover, persona=options.persona, timeout=options.timeout,
        return_path=return_path, cwd=cwd, model=options.model, interactive=interactive,
    )  # fmt: skip
    ledger_db = options.ledger_db
    db = Layout.find(cwd).state_db if ledger_db == "auto" else ledger_db
    return handover, results_file, list(options.command(spec)), db


def execute_handover(
    path: Path | str,
    *,
    cwd: Path,
    options: ChildOptions | None = None,
    on_start: Callable[[int], None] | None = None,
    on_attempt: Callable[[AttemptOutcome], None] | None = None,
) -> HandoverOutcome:
    """Run the handover at ``path`` in a child process until it succeeds or attempts run out.

    The file must already be valid and safe (see ``read_handover`` with a policy);
    it is re-read here and refused with UsageError when it is not parseable.
    ``options``: timeout, attempts, backoff, persona ... (defaults: :class:`ChildOptions`).
    """
    options = options or ChildOptions()
    attempts = options.attempts
    if attempts < 1:
        raise UsageError("attempts must be at least 1")
    handover, results_file, argv, db = _prepare(path, cwd=cwd, options=options, interactive=False)
    outcome = HandoverOutcome(path=results_file, handover=handover)
    delays = backoff_delays(attempts, options.backoff, options.factor)
    last_error = ""
    for n in range(1, attempts + 1):
        before = _signature(results_file)
        try:
            a = run_child(
                argv, cwd=Path(cwd), timeout=options.timeout, attempt=n, on_start=on_start,
                tie=options.tie,
            )  # fmt: skip
        except KeyboardInterrupt:
            # The child's group is already killed (run_child's finally); record why.
            stopped = Results(status="failure", error=f"interrupted during attempt {n}")
            outcome.handover = _write_results(results_file, handover, stopped)
            ledger_event(
                db, handover, "result", path=results_file, status="failure",
                detail=stopped.error,
            )  # fmt: skip
            raise
        outcome.attempts.append(a)
        results = _fresh_results(results_file, before)
        if on_attempt is not None:
            on_attempt(a)
        if results is None and a.exit_code == 0 and not a.timed_out:
            # The child exited cleanly without writing results: record them from its output.
            results = Results(status="success", output=a.stdout[-TAIL_CHARS:] or None)
            outcome.handover = _write_results(results_file, handover, results)
        if results is not None and results.status in {"success", "partial"} and not a.timed_out:
            outcome.handover = read_handover(results_file).handover
            return outcome
        last_error = _describe(a, results)
        ledger_event(
            db, handover, "attempt", path=results_file, status="running",
            detail=f"attempt {n}/{attempts} failed: {last_error}",
        )  # fmt: skip
        if n < attempts:
            time.sleep(delays[n - 1])
    failure = Results(
        status="failure",
        error=f"all {attempts} attempt(s) failed; last: {last_error}"[:20_000],
        artifacts=[],
    )
    outcome.handover = _write_results(results_file, handover, failure)
    ledger_event(
        db, handover, "result", path=results_file, status="failure",
        file_hash=_hash_or_none(results_file), detail=failure.error,
    )  # fmt: skip
    return outcome
