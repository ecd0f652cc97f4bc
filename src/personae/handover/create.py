"""Creating handover files: build, safety-check, write atomically, record in the ledger."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from personae.errors import UsageError, first_validation_error
from personae.fsutil import private_dir
from personae.handover._memory import memory_snapshot as summarise_memory
from personae.handover.artifact_formats import detect_format, summarize
from personae.handover.files import ContextFormat, save_handover, validate_safety
from personae.handover.mcp_carry import carried_configs
from personae.handover.runflow import load_policy
from personae.handover.schema import (
    ArtifactFile,
    Artifacts,
    ArtifactType,
    ContextHandover,
    ExecutionContext,
    HistoryEntry,
    Lineage,
    Source,
    Target,
)
from personae.layout import Layout
from personae.lineage import current
from personae.project import Project
from personae.security.policy import capture_environment, redact_secrets
from personae.security.redact import redact_text
from personae.store.handovers import HandoverLedger

__all__ = [
    "CreatedHandover",
    "HandoverContent",
    "build_handover",
    "default_handover_path",
    "parse_data",
    "parse_file_spec",
    "write_handover",
]

ARTIFACT_TYPES: tuple[str, ...] = get_args(ArtifactType)


@dataclass(frozen=True, kw_only=True)
class CreatedHandover:
    """A handover written to disk."""

    handover: ContextHandover
    """The model as written (secrets redacted)."""
    path: Path
    """Where it was written."""
    sha256: str
    """Hash of the bytes written."""


@dataclass(frozen=True, kw_only=True)
class HandoverContent:
    """What a new handover carries besides its source, target, task and working directory."""

    session_id: str = ""
    """The source session id."""
    files: Sequence[ArtifactFile | Mapping[str, Any]] = ()
    """Artifacts: ``ArtifactFile`` objects or mappings of their fields."""
    data: Mapping[str, Any] | None = None
    """Structured data (JSON-safe)."""
    insights: Sequence[str] = ()
    """Key findings."""
    interactive: bool = False
    """The target runs interactively."""
    profile: str | None = None
    """The context profile the target's worker is assembled with."""
    return_results: bool = True
    """The target writes its results back."""
    history: Sequence[HistoryEntry] | None = None
    """What the source's conversation did (one summary per persona); ``None``: not
    given (:func:`~personae.handover.tool.handover_to_persona` then reads it from the
    project's conversation store; :func:`build_handover` writes none)."""
    mcp_servers: Sequence[str] | None = None
    """The source persona's MCP servers (names; default: the keys of
    :attr:`mcp_server_configs`)."""
    mcp_server_configs: Mapping[str, Any] | None = None
    """Their entries as configured (name -> ``.mcp.json`` entry, ``${VAR}`` references
    unexpanded; ``None`` for a name with no entry): written with every secret replaced by
    a ``${NAME}`` reference (:func:`personae.handover.mcp_carry.carried_configs`)."""
    memory_snapshot: str | None = None
    """The memory summary (``None``: summarised from the project's mind memory)."""

    def artifact_files(self) -> list[ArtifactFile]:
        """:attr:`files` as ``ArtifactFile`` objects (a bad mapping is a UsageError)."""
        out: list[ArtifactFile] = []
        for item in self.files:
            try:
                out.append(
                    item if isinstance(item, ArtifactFile) else ArtifactFile.model_validate(item)
                )
            except ValueError as exc:
                raise UsageError(f"files: {exc}") from None
        return out


def parse_file_spec(spec: str, what: str = "--file") -> ArtifactFile:
    """``PATH:TYPE:DESCRIPTION`` (description optional) -> ArtifactFile."""
    parts = spec.split(":", 2)
    if len(parts) < 2 or not parts[0]:
        raise UsageError(
            f"{what} {spec!r}: expected PATH:TYPE[:DESCRIPTION] with TYPE one of "
            f"{', '.join(ARTIFACT_TYPES)}"
        )
    path, kind = parts[0], parts[1].strip().lower()
    if kind not in ARTIFACT_TYPES:
        raise UsageError(
            f"{what} {spec!r}: unknown type {kind!r} (valid: {', '.join(ARTIFACT_TYPES)})"
        )
    desc = parts[2] if len(parts) == 3 else ""
    suffix = Path(path).suffix.lstrip(".").lower()
    try:
        return ArtifactFile(path=path, type=kind, description=desc, format=suffix or None)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise UsageError(f"{what} {spec!r}: {exc.errors()[0]['msg']}") from None


def parse_data(text: str | None) -> dict[str, Any]:
    """``--data JSON`` -> a JSON object."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--data is not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, dict):
        raise UsageError("--data must be a JSON object")
    return value


def build_handover(
    *,
    source_persona: str,
    target_persona: str,
    task: str,
    cwd: Path,
    content: HandoverContent | None = None,
    env_allow: Iterable[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ContextHandover:
    """Build a validated handover (environment captured from the allow list only: the
    defaults plus ``env_allow``, else plus the ``handover.env_allow`` of the project ``cwd``
    belongs to, so every way of creating a handover honours the config).

    ``content``: files, data, insights, history and the rest (see
    :class:`HandoverContent`). Without its ``memory_snapshot``, the project's
    mind memory catalog at ``cwd`` (when it has one) is summarised into it:
    counts by type and one line per file, never a file's body or a secret.
    """
    c = content or HandoverContent()
    names = c.mcp_servers
    configs: dict[str, dict[str, Any]] | None = None
    if c.mcp_server_configs is not None:
        configs = carried_configs(c.mcp_server_configs, environ)[0] or None
        names = sorted(c.mcp_server_configs) if names is None else names
    memory_snapshot = c.memory_snapshot
    if memory_snapshot is None:
        memory_snapshot = summarise_memory(Path(cwd))
    allow = Project.discover(cwd).config.handover.env_allow if env_allow is None else env_allow
    try:
        return ContextHandover(
            source=Source(
                persona=source_persona,
                session_id=c.session_id,
                working_directory=str(Path(cwd).resolve()),
                environment=capture_environment(environ, allow),
            ),
            target=Target(
                persona=target_persona,
                task=task,
                interactive=c.interactive,
                return_results=c.return_results,
                profile=c.profile,
            ),
            artifacts=Artifacts(
                files=c.artifact_files(), data=dict(c.data or {}), insights=list(c.insights)
            ),
            context=ExecutionContext(
                history=list(c.history or ()),
                mcp_servers=list(names) if names is not None else None,
                mcp_server_configs=configs,
                memory_snapshot=memory_snapshot,
            ),
            lineage=_lineage(),
        )
    except ValidationError as exc:
        message, where = first_validation_error(exc)
        raise UsageError(f"{where}: {message}") from None


def _lineage() -> Lineage | None:
    """The running run's link for the handover's reader (``None`` outside a run)."""
    run = current()
    return None if run is None else Lineage.model_validate(run.link().as_wire())


def describe_artifacts(handover: ContextHandover, resolved: Sequence[str]) -> ContextHandover:
    """``handover`` with each artifact's format detected (from its bytes; the given hint
    stays when they say nothing) and a short summary of its content where none was given
    (HDF5, NetCDF, Parquet, CSV; see :mod:`personae.handover.artifact_formats`).
    ``resolved``: the artifact paths as the safety check resolved them; only regular files
    are opened, and only in part."""
    files = list(handover.artifacts.files)
    changed = False
    for i, (art, where) in enumerate(zip(files, resolved, strict=True)):
        if art.summary is not None:
            continue
        target = Path(where)
        try:
            regular = stat.S_ISREG(target.stat().st_mode)
        except OSError:
            regular = False
        if not regular:
            continue
        # Measured beats a hint: the bytes say hdf5 where the name said h5 (or nothing).
        fmt = detect_format(target) or art.format
        summary = art.summary
        if summary is None and fmt is not None:
            found = summarize(target, fmt)
            summary = None if found is None else redact_text(found)
        if (fmt, summary) != (art.format, art.summary):
            files[i] = art.model_copy(update={"format": fmt, "summary": summary})
            changed = True
    if not changed:
        return handover
    artifacts = handover.artifacts.model_copy(update={"files": files})
    return handover.model_copy(update={"artifacts": artifacts})


def default_handover_path(cwd: Path, handover_id: str, fmt: ContextFormat = "json") -> Path:
    """``.personae/handovers/handover-<id>.<fmt>`` of the project ``cwd`` belongs to."""
    return Layout.find(cwd).handovers / f"handover-{handover_id}.{fmt}"


def write_handover(
    handover: ContextHandover,
    *,
    cwd: Path,
    out: Path | None = None,
    fmt: ContextFormat | None = None,
    allowed_roots: Sequence[Path] | None = None,
    env_allow: Iterable[str] | None = None,
    ledger_db: Path | None = None,
    folder: Path | None = None,
) -> CreatedHandover:
    """Safety-check and write ``handover``; record it in the ledger.

    Written to ``out``, else ``handover-<id>.<fmt>`` in ``folder`` (a user-level handover
    folder such as ``~/.personae/handovers``, ``~`` expanded), else in the project's
    ``.personae/handovers``; a folder personae picks is made private (0700). The ledger
    defaults to ``<cwd>/.personae/state.db``. If the ledger cannot be written, the new
    file is removed again and the error raised.
    """
    chosen: ContextFormat = fmt or (
        "yaml" if out is not None and out.suffix.lower() in {".yaml", ".yml"} else "json"
    )
    if out is not None:
        path = out
    elif folder is not None:
        path = folder.expanduser() / f"handover-{handover.handover_id}.{chosen}"
    else:
        path = default_handover_path(cwd, handover.handover_id, chosen)
    if not path.is_absolute():
        path = Path(cwd) / path
    policy, allow = load_policy(Path(cwd), path, allowed_roots, env_allow)
    # Redacted once, before the file, the ledger or the caller sees it.
    handover = ContextHandover.model_validate(
        redact_secrets(handover.model_dump(mode="json", by_alias=True))
    )
    resolved = validate_safety(handover, policy, env_allow=allow, path=path)
    handover = describe_artifacts(handover, resolved)
    existed = path.exists()
    if out is None:
        private_dir(path.parent)  # a folder personae picks: handovers may carry private data
    digest = save_handover(handover, path, chosen)
    db = ledger_db if ledger_db is not None else Layout.find(cwd).state_db
    try:
        ledger = HandoverLedger.open(db)
        try:
            ledger.record_created(
                handover_id=handover.handover_id,
                path=path.resolve(),
                file_hash=digest,
                source_persona=handover.source.persona,
                target_persona=handover.target.persona,
                task=handover.target.task,
            )
        finally:
            ledger.close()
    except BaseException:
        if not existed:
            path.unlink(missing_ok=True)
        raise
    return CreatedHandover(handover=handover, path=path.resolve(), sha256=digest)
