"""The receiving side of a handover: ``begin`` before a run, ``finish`` after it.

``personae run --context-from FILE`` calls :func:`begin` (load, validate,
safety-check, apply allowed environment, pick the working directory, render the
``handover`` context section, take the task as the prompt when
non-interactive) and :func:`finish` when the run ends, on success *and* on
failure, to write ``results`` back to the same file or ``--context-return``.
:func:`working_on` wraps the turns of a run in that protocol: the turns it is
given become the results, an error the failure. Nothing in the file is ever
executed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from personae.errors import UsageError
from personae.handover._ledger import ledger_event
from personae.handover._render import render_section
from personae.handover.files import (
    ContextFormat,
    detect_format,
    read_handover,
    save_handover,
    update_handover,
)
from personae.handover.schema import ContextHandover, Results
from personae.handover.work import HandoverTurn, HandoverWork
from personae.layout import Layout
from personae.project import Project
from personae.security.policy import (
    HandoverSecurityError,
    PathPolicy,
    check_environment,
    default_roots,
    held_environment,
)

__all__ = ["HandoverSession", "HandoverTurn", "HandoverWork", "begin", "finish", "load_policy",
           "record_start", "run_folder", "working_on"]  # fmt: skip

MAX_OUTPUT = 200_000
MAX_ERROR = 20_000


@dataclass(kw_only=True)
class HandoverSession:
    """A handover being worked on by a run."""

    handover: ContextHandover
    """The validated handover as loaded."""
    path: Path
    """The handover file."""
    format: ContextFormat
    """Its format (results are written back in the same one)."""
    persona: str
    """The persona actually running (the target's when none was given)."""
    prompt: str | None
    """The task as the prompt when non-interactive, else ``None``."""
    section_text: str
    """Text of the ``handover`` context section (the context engine fits it to its budget)."""
    workdir: Path
    """Where the run should work: the source working directory when allowed, else ``cwd``."""
    warnings: list[str] = field(default_factory=list)
    """Things the user should see (persona mismatch, directory not allowed ...)."""
    policy: PathPolicy | None = None
    """The path policy used."""
    ledger_db: Path | None = None
    """The store that records this handover's events."""
    sha256: str = ""
    """The file's hash as loaded (the ledger's ``started`` event records it)."""
    finished: bool = False
    """Whether :func:`finish` has run."""

    @property
    def task(self) -> str:
        """The target task."""
        return self.handover.target.task

    @property
    def profile(self) -> str | None:
        """Context profile the target's worker is assembled with (``target.profile``)."""
        return self.handover.target.profile


def load_policy(
    cwd: Path,
    handover_path: Path | None = None,
    allowed_roots: Sequence[Path] | None = None,
    env_allow: Iterable[str] | None = None,
) -> tuple[PathPolicy, list[str]]:
    """The path policy and env allow list for ``cwd`` (the config of the project ``cwd``
    belongs to when not given; its relative roots are relative to that project)."""
    layout = Layout.find(Path(cwd).resolve())
    if allowed_roots is None or env_allow is None:  # the config is read only when needed
        config = Project.open(layout.root).config.handover
        roots = list(config.allowed_roots) if allowed_roots is None else list(allowed_roots)
        allow = list(config.env_allow) if env_allow is None else list(env_allow)
    else:
        roots, allow = list(allowed_roots), list(env_allow)
    roots = [r if r.is_absolute() else layout.root / r for r in roots]
    extra = [layout.handovers, *roots]
    hdir = handover_path.resolve().parent if handover_path is not None else None
    return PathPolicy(roots=default_roots(cwd, hdir, extra)), allow


def run_folder(h: ContextHandover, cwd: Path, policy: PathPolicy) -> tuple[Path, list[str]]:
    """The folder a run of handover ``h`` started in ``cwd`` works in: the source's working
    directory when it exists and ``policy`` allows it, else ``cwd`` (with a warning why)."""
    source_dir = Path(h.source.working_directory)
    if source_dir == cwd:
        return cwd, []
    if not source_dir.is_dir():
        return cwd, [f"source working directory {source_dir} does not exist; using {cwd}"]
    if not policy.allows(source_dir):
        return cwd, [
            f"source working directory {source_dir} is outside the allowed roots; using {cwd}"
        ]
    return Path(os.path.realpath(source_dir)), []


def begin(
    path: Path | str,
    persona: str | None,
    *,
    cwd: Path,
    non_interactive: bool,
    allowed_roots: Sequence[Path] | None = None,
    env_allow: Iterable[str] | None = None,
    environ: MutableMapping[str, str] | None = None,
    ledger_db: Path | Literal["auto"] | None = "auto",
    record: bool = True,
) -> HandoverSession:
    """Load and validate a handover for a run of ``persona`` in ``cwd``.

    With ``record`` the ledger's ``started`` event is written here; without it the caller
    writes it with :func:`record_start` once its own checks passed (a run refused before
    it starts leaves the ledger unchanged).

    ``allowed_roots``/``env_allow`` default to the project config of ``cwd``.
    Allowed environment values are set in ``environ`` (default ``os.environ``)
    only where not already set. The process directory is not changed: run in
    ``session.workdir``. Raises UsageError (HandoverSecurityError for unsafe
    content) with the file and field on any problem.
    """
    cwd = Path(cwd).resolve()
    file = Path(path)
    if not file.is_absolute():
        file = cwd / file
    policy, allow = load_policy(cwd, file, allowed_roots, env_allow)
    loaded = read_handover(file, policy=policy, env_allow=allow)
    h = loaded.handover
    warnings: list[str] = []
    running = persona or h.target.persona
    if persona and persona != h.target.persona:
        warnings.append(
            f"handover {h.handover_id} expects persona {h.target.persona!r} "
            f"but the run uses {persona!r}"
        )
    workdir, moved = run_folder(h, cwd, policy)
    warnings += moved
    env = os.environ if environ is None else environ
    _, held_warning = held_environment(h.source.environment, allow)
    if held_warning:
        warnings.append(held_warning)
    for name, value in check_environment(h.source.environment, allow).items():
        if name not in env:
            env[name] = value
    db = Layout.find(cwd).state_db if ledger_db == "auto" else ledger_db
    session = HandoverSession(
        handover=h,
        path=file,
        format=loaded.format,
        persona=running,
        prompt=h.target.task if non_interactive else None,
        section_text=render_section(h),
        workdir=workdir,
        warnings=warnings,
        policy=policy,
        ledger_db=db,
        sha256=loaded.sha256,
    )
    if record:
        record_start(session)
    return session


def record_start(session: HandoverSession) -> None:
    """Write the ledger's ``started`` event of ``session`` (a warning when it cannot)."""
    warn = ledger_event(
        session.ledger_db, session.handover, "started", path=session.path, status="running",
        file_hash=session.sha256, detail=session.persona,
    )  # fmt: skip
    if warn:
        session.warnings.append(warn)


def _clip(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    note = f"\n[... cut: {len(text) - limit + 40} characters]"
    return text[: limit - len(note)] + note


def finish(
    session: HandoverSession,
    *,
    status: Literal["success", "failure", "partial"],
    output: str | None,
    error: str | None = None,
    artifacts: Iterable[str | Path] = (),
    next_steps: Iterable[str] = (),
    return_path: Path | str | None = None,
) -> Path:
    """Write ``results`` back (same file, or ``return_path``); returns the file written.

    Call it on failure too. Oversized output is cut with a notice rather than
    refused; result artifacts outside the allowed roots are dropped with a
    warning. Without ``return_path`` and with ``target.returnResults`` false,
    nothing is written and the handover path is returned.
    """
    kept: list[str] = []
    for item in artifacts:
        text = str(item)
        try:
            if session.policy is not None:
                session.policy.resolve(text, session.workdir, what="result artifact path")
            kept.append(text)
        except HandoverSecurityError as exc:
            session.warnings.append(str(exc))
    results = Results(
        status=status,
        output=_clip(output, MAX_OUTPUT),
        error=_clip(error, MAX_ERROR),
        artifacts=kept or None,
        next_steps=[s[:4000] for s in next_steps] or None,
    )
    session.finished = True
    h = session.handover
    if return_path is None and not h.target.return_results:
        return session.path
    if return_path is not None:
        target = Path(return_path)
        if not target.is_absolute():
            target = session.workdir / target
        fmt = detect_format(target) if target.suffix else session.format
        updated = h.model_copy(update={"results": results})
        digest = save_handover(updated, target, fmt)
    else:
        target = session.path
        try:
            updated, digest = update_handover(target, lambda cur: _with_results(cur, results))
        except UsageError:
            # The file vanished or was damaged meanwhile: write what we loaded.
            updated = h.model_copy(update={"results": results})
            digest = save_handover(updated, target, session.format)
    session.handover = updated
    warn = ledger_event(
        session.ledger_db,
        h,
        "result",
        path=target,
        status=status,
        file_hash=digest,
        detail=error,
    )
    if warn:
        session.warnings.append(warn)
    return target


def _with_results(current: ContextHandover, results: Results) -> ContextHandover:
    return current.model_copy(update={"results": results})


def _failure_reason(exc: BaseException) -> str:
    return "timed out" if isinstance(exc, TimeoutError) else str(exc)


@contextmanager
def working_on(
    session: HandoverSession | None, *, return_path: Path | None = None
) -> Iterator[HandoverWork]:
    """Run the body as the work on ``session`` and write its results when it ends.

    An exception (a timeout included) becomes ``failure`` results with the reason and
    is raised on; otherwise the turns added become the results (``success`` when every
    turn is done, else ``partial``; every answer, artifact and warning). With
    ``session`` ``None`` (no handover) nothing is written.
    """
    work = HandoverWork()
    if session is None:
        yield work
        return
    shown = len(session.warnings)
    try:
        yield work
    except BaseException as exc:
        finish(
            session, status="failure", output=None, error=_failure_reason(exc),
            return_path=return_path,
        )  # fmt: skip
        raise
    turns = work.turns
    work.written = finish(
        session,
        status="success" if all(t.done for t in turns) else "partial",
        output="\n\n".join(t.answer for t in turns),
        artifacts=list(dict.fromkeys(f for t in turns for f in t.files)),
        next_steps=[w for t in turns for w in t.warnings],
        return_path=return_path,
    )
    work.new_warnings = session.warnings[shown:]
