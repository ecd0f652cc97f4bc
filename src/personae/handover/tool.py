"""The ``handover_to_persona`` tool: hand work to another persona, wait or defer.

A plain function with a typed signature and a typed result, so any tool
registry (or an MCP server) can wrap it. It creates a handover file (ledger
recorded), then either runs the target in a child ``personae`` process and
returns its results, or returns the command to run later.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personae.errors import UsageError
from personae.handover.create import build_handover, create_handover
from personae.handover.executor import (
    ChildSpec,
    CommandBuilder,
    personae_run_command,
    run_handover,
)
from personae.handover.schema import ArtifactFile, HistoryEntry

__all__ = ["HANDOVER_TOOL_NAME", "HandoverToolResult", "handover_to_persona"]

HANDOVER_TOOL_NAME = "handover_to_persona"
"""The tool's name."""


@dataclass(frozen=True, kw_only=True)
class HandoverToolResult:
    """What the tool returns."""

    success: bool
    """Whether the handover succeeded (or, when not waiting, was prepared)."""
    handover_id: str
    """The handover id (ledger key)."""
    context_path: str
    """The handover file."""
    status: str
    """``prepared``, ``success``, ``failure`` or ``partial``."""
    results: dict[str, Any] | None = None
    """The ``results`` object (camelCase) when waited for."""
    command: list[str] = field(default_factory=list)
    """The child command (argv)."""
    message: str = ""
    """One line for the model: what happened or what to run."""


def _files(files: Sequence[ArtifactFile | Mapping[str, Any]]) -> list[ArtifactFile]:
    out: list[ArtifactFile] = []
    for item in files:
        try:
            out.append(
                item if isinstance(item, ArtifactFile) else ArtifactFile.model_validate(item)
            )
        except ValueError as exc:
            raise UsageError(f"files: {exc}") from None
    return out


def handover_to_persona(
    target_persona: str,
    task: str,
    *,
    source_persona: str,
    cwd: Path,
    files: Sequence[ArtifactFile | Mapping[str, Any]] = (),
    data: Mapping[str, Any] | None = None,
    insights: Sequence[str] = (),
    interactive: bool = False,
    wait_for_results: bool = True,
    session_id: str = "",
    history: Sequence[HistoryEntry] = (),
    timeout: float = 300.0,
    attempts: int = 3,
    backoff: float = 1.0,
    command: CommandBuilder = personae_run_command,
) -> HandoverToolResult:
    """Hand ``task`` to ``target_persona`` with files, data and insights.

    With ``wait_for_results`` the target runs now in a separate process
    (timeout, retries with backoff) and its results are returned; otherwise
    the handover file is prepared and the command to run it is returned.
    Refuses unsafe content (paths outside allowed roots ...) before writing.
    """
    handover = build_handover(
        source_persona=source_persona,
        target_persona=target_persona,
        task=task,
        cwd=cwd,
        session_id=session_id,
        files=_files(files),
        data=data,
        insights=insights,
        interactive=interactive,
        history=history,
    )
    created = create_handover(handover, cwd=cwd)
    spec = ChildSpec(
        handover_path=created.path,
        persona=target_persona,
        timeout=timeout,
        return_path=None,
        cwd=Path(cwd),
    )
    argv = list(command(spec))
    shown = ["personae", *argv[3:]] if argv[1:3] == ["-m", "personae"] else argv
    if not wait_for_results or interactive:
        return HandoverToolResult(
            success=True,
            handover_id=handover.handover_id,
            context_path=str(created.path),
            status="prepared",
            command=argv,
            message=(f"Context prepared for {target_persona}. Run: {shlex.join(shown)}"),
        )
    outcome = run_handover(
        created.path,
        cwd=Path(cwd),
        timeout=timeout,
        attempts=attempts,
        backoff=backoff,
        command=command,
    )
    results = outcome.handover.results
    dumped = results.model_dump(mode="json", by_alias=True) if results is not None else None
    return HandoverToolResult(
        success=outcome.status == "success",
        handover_id=handover.handover_id,
        context_path=str(outcome.path),
        status=outcome.status,
        results=dumped,
        command=argv,
        message=f"{target_persona} finished with status {outcome.status}",
    )
