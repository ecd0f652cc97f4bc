"""Handovers and chains from Python: create, load and run a handover; run a chain.

Thin functions over :mod:`personae.handover` with option objects, the same
calls ``personae handover create|run`` and ``personae chain run`` make. A
handover run and every chain step run the target persona in a child
``personae run`` process.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from personae.errors import UnknownNameError, UsageError
from personae.limits import DEFAULTS

if TYPE_CHECKING:
    from personae.handover.child import AttemptOutcome, HandoverOutcome
    from personae.handover.create import CreatedHandover
    from personae.handover.files import LoadedHandover
    from personae.handover.schema import ArtifactFile
    from personae.workflow.chain import ChainOutcome
    from personae.workflow.executors import Executor
    from personae.workflow.spec import Workflow

__all__ = [
    "MAX_CONCURRENCY",
    "ChainOptions",
    "HandoverRunOptions",
    "HandoverSpec",
    "create_handover",
    "load_handover",
    "run_chain",
    "run_handover",
]

MAX_CONCURRENCY = 64
"""Most children a chain's fan-out runs at once (``--concurrency``)."""


@dataclass(frozen=True, kw_only=True)
class HandoverSpec:
    """What a new handover says (the flags of ``personae handover create``)."""

    to: str
    """Target persona (must be in the project's cast or bundled, unless ``check_target``
    is false)."""
    task: str
    """What the target persona should do."""
    source: str = "user"
    """Source persona."""
    session: str = ""
    """Source session id (its conversation goes into the handover's history)."""
    files: Sequence[str | ArtifactFile] = ()
    """Artifacts: ``PATH:TYPE:DESCRIPTION`` strings or ``ArtifactFile`` objects."""
    insights: Sequence[str] = ()
    """Key findings."""
    data: Mapping[str, Any] = field(default_factory=dict)
    """Structured data (JSON-safe)."""
    interactive: bool = False
    """The target runs interactively."""
    out: Path | None = None
    """Where to write it (default ``handover-<id>.<format>`` in ``folder``)."""
    folder: Path | None = None
    """A user-level handover folder (e.g. ``~/.personae/handovers``) the file is written to
    when ``out`` is not given; ``None``: the project's ``.personae/handovers``."""
    format: Literal["json", "yaml"] | None = None
    """``json`` (default) or ``yaml`` (default from ``out``'s suffix)."""
    check_target: bool = True
    """Refuse a target persona this project does not know."""
    profile: str | None = None
    """Context profile the target's worker is assembled with (builder, verifier ...);
    must be one of the project's profiles."""


@dataclass(frozen=True, kw_only=True)
class HandoverRunOptions:
    """How to run a handover (the flags of ``personae handover run``, batch mode)."""

    timeout: float | None = None
    """Seconds per attempt (``None``: the ``handover_timeout`` setting, 300 s)."""
    retries: int = DEFAULTS.handover_retries
    """Retries after the first attempt."""
    backoff: float = DEFAULTS.handover_backoff
    """First retry delay in seconds (doubled each time)."""
    persona: str | None = None
    """Run as this persona (default: the handover's target)."""
    model: str | None = None
    """Model spec for the child (``provider:name``; ``scripted:FILE`` for the scripted server)."""
    return_path: Path | None = None
    """Write the results here instead of into the handover file."""
    on_attempt: Callable[[AttemptOutcome], None] | None = None
    """Called after every attempt."""

    def __post_init__(self) -> None:
        """Refuse what ``personae handover run`` refuses, naming the option (nothing runs)."""
        if self.timeout is not None and not (math.isfinite(self.timeout) and self.timeout > 0):
            raise UsageError(
                f"must be more than zero seconds, not {self.timeout!r}", field="timeout"
            )
        if self.retries < 0:
            raise UsageError(f"must be 0 or more, not {self.retries!r}", field="retries")
        if not (math.isfinite(self.backoff) and self.backoff >= 0):
            raise UsageError(f"must be 0 or more seconds, not {self.backoff!r}", field="backoff")


@dataclass(frozen=True, kw_only=True)
class ChainOptions:
    """How to run a chain (the flags of ``personae chain run``)."""

    resume: bool = False
    """Continue from the checkpoint, skipping finished steps."""
    concurrency: int = 2
    """Children at once in a fan-out (1 to :data:`MAX_CONCURRENCY`)."""
    state_dir: Path | None = None
    """Checkpoint and report folder (default: next to the workflow)."""
    on_event: Callable[[str, str], None] | None = None
    """Called with ``(step key, message)`` as steps start and end."""
    executor: Literal["local", "ray"] | Executor = "local"
    """Where steps run: ``local`` child processes, ``ray`` tasks (``personae[ray]``), or
    an :class:`~personae.workflow.executors.Executor` (subclass) instance."""
    address: str | None = None
    """Ray cluster to join (``auto`` or ``HOST:PORT``); ``None`` starts a private local
    cluster for the run (``executor="ray"`` only)."""

    def __post_init__(self) -> None:
        """Refuse what ``personae chain run`` refuses, naming the option (nothing runs)."""
        if not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise UsageError(
                f"must be 1 to {MAX_CONCURRENCY}, not {self.concurrency!r}", field="concurrency"
            )


def create_handover(
    spec: HandoverSpec,
    *,
    cwd: str | Path = ".",
    on_warning: Callable[[str], None] | None = None,
) -> CreatedHandover:
    """Write a handover file for ``spec`` in the project at ``cwd`` and record it in the
    ledger; returns it with its path. Unsafe content (paths outside the allowed roots,
    secrets) is refused before anything is written. ``on_warning`` gets each warning
    (a target persona this project does not know, with ``check_target=False``)."""
    # local import: each call loads only its own engine (`personae handover create` start-up)
    from personae.handover._cast import persona_facts
    from personae.handover._history import history_for
    from personae.handover.create import (
        HandoverContent,
        build_handover,
        parse_file_spec,
        write_handover,
    )
    from personae.project import Project

    if not spec.task.strip():
        raise UsageError("must not be empty", field="task")
    where = Path(cwd)
    project = Project.discover(where)
    files = [parse_file_spec(f, "files") if isinstance(f, str) else f for f in spec.files]
    servers, warnings = persona_facts(
        project.root, spec.source, spec.to, check_target=spec.check_target
    )
    if servers:
        # local import: each call loads only its own engine (`personae handover create` start-up)
        from personae.handover.mcp_carry import carried_configs

        replaced = carried_configs(servers)[1]
        if replaced:
            warnings.append(
                "MCP server entries carry references, not secrets: " + "; ".join(replaced)
                + " (set these variables where the handover runs)"
            )  # fmt: skip
    for warning in warnings:
        if on_warning is not None:
            on_warning(warning)
    if spec.profile is not None:  # an unknown name fails before anything is written
        # local import: each call loads only its own engine (`personae handover create` start-up)
        from personae.context.profiles import load_profiles

        known = load_profiles(project.root).profiles
        if spec.profile not in known:
            raise UnknownNameError("profile", spec.profile, known, field="profile")
    content = HandoverContent(
        session_id=spec.session, files=files, data=dict(spec.data),
        insights=list(spec.insights), interactive=spec.interactive, profile=spec.profile,
        history=history_for(project.state_db, spec.session or None),
        mcp_server_configs=servers,
    )  # fmt: skip
    handover = build_handover(
        source_persona=spec.source, target_persona=spec.to, task=spec.task, cwd=where,
        content=content, env_allow=project.config.handover.env_allow,
    )  # fmt: skip
    return write_handover(handover, cwd=where, out=spec.out, fmt=spec.format, folder=spec.folder)


def load_handover(path: str | Path, *, cwd: str | Path = ".") -> LoadedHandover:
    """Read, validate and safety-check a handover file with the project policy at ``cwd``
    (what ``personae handover run`` does first)."""
    # local import: each call loads only its own engine (`personae handover create` start-up)
    from personae.handover.files import read_handover
    from personae.handover.runflow import load_policy

    file = Path(path)
    policy, allow = load_policy(Path(cwd).resolve(), file)
    return read_handover(file, policy=policy, env_allow=allow)


def run_handover(
    path: str | Path, options: HandoverRunOptions | None = None, *, cwd: str | Path = "."
) -> HandoverOutcome:
    """Run the handover at ``path`` in a child ``personae run`` until it succeeds or its
    attempts run out; the results are written back (``outcome.handover.results``)."""
    # local import: each call loads only its own engine (`personae handover create` start-up)
    from personae.handover.child import ChildOptions, execute_handover
    from personae.settings import PersonaeSettings

    opts = options or HandoverRunOptions()
    where = Path(cwd).resolve()
    load_handover(path, cwd=where)  # refuse unsafe files first
    timeout = opts.timeout if opts.timeout is not None else PersonaeSettings().handover_timeout
    child = ChildOptions(
        timeout=timeout, attempts=opts.retries + 1, backoff=opts.backoff, persona=opts.persona,
        model=opts.model, return_path=opts.return_path,
    )  # fmt: skip
    return execute_handover(Path(path), cwd=where, options=child, on_attempt=opts.on_attempt)


def run_chain(workflow: str | Path | Workflow, options: ChainOptions | None = None) -> ChainOutcome:
    """Run a chain workflow (a YAML file or a loaded ``Workflow``); returns its outcome
    (``status``, ``exit_code``, per-step states, ``report_path``)."""
    # local import: each call loads only its own engine (`personae handover create` start-up)
    from personae.workflow.chain import execute_chain
    from personae.workflow.engines import open_executor
    from personae.workflow.spec import Workflow, load_workflow

    opts = options or ChainOptions()
    wf = workflow if isinstance(workflow, Workflow) else load_workflow(Path(workflow))
    if opts.state_dir is not None and opts.state_dir.exists() and not opts.state_dir.is_dir():
        raise UsageError("not a folder", file=opts.state_dir, field="state_dir")
    if not isinstance(opts.executor, str):
        return execute_chain(
            wf, resume=opts.resume, concurrency=opts.concurrency, state_dir=opts.state_dir,
            on_event=opts.on_event, executor=opts.executor,
        )  # fmt: skip
    with open_executor(opts.executor, address=opts.address) as runner:
        return execute_chain(
            wf, resume=opts.resume, concurrency=opts.concurrency, state_dir=opts.state_dir,
            on_event=opts.on_event, executor=runner,
        )  # fmt: skip
