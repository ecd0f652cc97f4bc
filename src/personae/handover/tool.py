"""The ``handover_to_persona`` tool: hand work to another persona, wait or defer.

A plain function with a typed signature and a typed result, so any tool
registry (or an MCP server) can wrap it. It creates a handover file (ledger
recorded), then either runs the target in a child ``personae`` process and
returns its results, or returns the command to run later.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from personae.errors import PersonaeError
from personae.handover._cast import persona_facts
from personae.handover._history import history_for
from personae.handover.child import (
    HANDOVER_DEPTH_CAP,
    ChildOptions,
    ChildSpec,
    execute_handover,
    handover_depth,
)
from personae.handover.create import HandoverContent, build_handover, write_handover
from personae.handover.interactive import run_interactive
from personae.handover.schema import ArtifactFile, ResultStatus
from personae.invocation import as_typed
from personae.layout import Layout
from personae.tools.base import Tool, ToolContext
from personae.tools.registry import ToolRegistry

__all__ = [
    "HANDOVER_DEPTH_CAP",
    "HANDOVER_TOOL_NAME",
    "HandoverToolArgs",
    "HandoverToolResult",
    "handover_depth",
    "handover_to_persona",
    "handover_tool",
    "register_handover_tool",
]

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
    status: ResultStatus | Literal["prepared"]
    """``prepared`` (not waited for), else the results' ``success``, ``failure`` or ``partial``."""
    results: dict[str, Any] | None = None
    """The ``results`` object (camelCase) when waited for."""
    command: list[str] = field(default_factory=list)
    """The child command (argv)."""
    message: str = ""
    """One line for the model: what happened or what to run."""
    warnings: list[str] = field(default_factory=list)
    """Things to know (an unknown target persona ...)."""

    def to_wire(self) -> dict[str, Any]:
        """The tool's JSON result, with the handover file's camelCase names (``handoverId``,
        ``contextPath``)."""
        return {to_camel(k): v for k, v in asdict(self).items()}


def handover_to_persona(
    target_persona: str,
    task: str,
    *,
    source_persona: str,
    cwd: Path,
    content: HandoverContent | None = None,
    wait_for_results: bool = True,
    from_project: bool = True,
    child: ChildOptions | None = None,
) -> HandoverToolResult:
    """Hand ``task`` to ``target_persona`` with files, data and insights (``content``).

    With ``wait_for_results`` the target runs now in a separate process
    (timeout, retries with backoff; with ``content.interactive`` once, attached
    to the terminal, see :func:`~personae.handover.interactive.run_interactive`)
    and its results are returned; otherwise the handover file is prepared and
    the command to run it is returned. Refuses unsafe content (paths outside
    allowed roots ...) before writing. A ``content.history`` left ``None`` comes
    from the conversation store of the project at ``cwd`` (one summary per
    persona of ``content.session_id``; an empty sequence means no history). With
    ``from_project``, the source persona's MCP servers come from the project's
    cast when ``content`` leaves them ``None``, and an unknown target persona
    (not in the cast nor bundled) is refused. ``child``: how the target runs
    (timeout, attempts, backoff, command); its ``model`` is passed to the child
    as ``--model`` (its default model; a persona's own ``model`` still wins).
    """
    child = child or ChildOptions()
    content = content or HandoverContent()
    warnings: list[str] = []
    if content.history is None:
        stored = history_for(Layout.find(cwd).state_db, content.session_id or None)
        content = replace(content, history=stored)
    if from_project:
        servers, warnings = persona_facts(Path(cwd), source_persona, target_persona)
        if content.mcp_servers is None and content.mcp_server_configs is None:
            content = replace(content, mcp_server_configs=servers)
    handover = build_handover(
        source_persona=source_persona,
        target_persona=target_persona,
        task=task,
        cwd=cwd,
        content=content,
    )
    created = write_handover(handover, cwd=cwd)
    spec = ChildSpec(
        handover_path=created.path,
        persona=target_persona,
        timeout=child.timeout,
        return_path=None,
        cwd=Path(cwd),
        model=child.model,
    )
    argv = list(child.command(spec))
    shown = as_typed(argv)
    if not wait_for_results:
        return HandoverToolResult(
            success=True,
            handover_id=handover.handover_id,
            context_path=str(created.path),
            status="prepared",
            command=argv,
            warnings=warnings,
            message=(f"Context prepared for {target_persona}. Run: {shlex.join(shown)}"),
        )
    result = _run_target(created.path, Path(cwd), child, interactive=content.interactive)
    return replace(
        result, handover_id=handover.handover_id, command=argv, warnings=warnings,
        message=f"{target_persona} finished with status {result.status}",
    )  # fmt: skip


def _run_target(
    path: Path, cwd: Path, child: ChildOptions, *, interactive: bool
) -> HandoverToolResult:
    """Run the handover at ``path`` now (attached to the terminal when ``interactive``);
    its status and results (the caller fills in the id, command and message)."""
    if interactive:
        outcome = run_interactive(path, cwd=cwd, options=child)
    else:
        outcome = execute_handover(path, cwd=cwd, options=child)
    results = outcome.handover.results
    dumped = results.model_dump(mode="json", by_alias=True) if results is not None else None
    return HandoverToolResult(
        success=outcome.status == "success", handover_id="", context_path=str(outcome.path),
        status=outcome.status, results=dumped,
    )  # fmt: skip


class HandoverToolArgs(BaseModel):
    """Arguments of the ``handover_to_persona`` tool.

    The schema shown to models uses the handover file's camelCase names (``targetPersona``,
    ``waitForResults``); snake_case names are accepted too.
    """

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)

    target_persona: str = Field(
        min_length=1, max_length=128, description="Target persona name (e.g. report-writer)."
    )
    task: str = Field(min_length=1, max_length=20_000, description="The target persona's task.")
    files: list[ArtifactFile] = Field(
        default_factory=list,
        description="Files to share: {path, type: data|code|analysis|document, description}.",
    )
    data: dict[str, Any] = Field(default_factory=dict, description="Structured data to pass.")
    insights: list[str] = Field(default_factory=list, description="Key insights to share.")
    interactive: bool = Field(
        default=False,
        description="Run the target attached to the user's terminal (it may ask questions); "
        "its results are still written back.",
    )
    wait_for_results: bool = Field(
        default=True,
        description="Run the target now and wait for its results (else return the command).",
    )


def handover_tool(
    source_persona: str,
    *,
    session_id: str = "",
    child: ChildOptions | None = None,
) -> Tool[HandoverToolArgs]:
    """The ``handover_to_persona`` tool for a :class:`~personae.tools.registry.ToolRegistry`.

    It runs in the tool context's workspace root; its result is the JSON of
    :class:`HandoverToolResult`. Refused handovers become tool errors. ``child``:
    how the target runs (see :class:`~personae.handover.child.ChildOptions`).
    """

    def run(args: HandoverToolArgs, ctx: ToolContext) -> str:
        try:
            result = handover_to_persona(
                args.target_persona,
                args.task,
                source_persona=source_persona,
                cwd=ctx.workspace.root,
                content=HandoverContent(
                    session_id=session_id,
                    files=args.files,
                    data=args.data,
                    insights=args.insights,
                    interactive=args.interactive,
                ),
                wait_for_results=args.wait_for_results,
                child=child,
            )
        except PersonaeError as exc:
            raise ctx.error(str(exc)) from None
        return json.dumps(result.to_wire(), ensure_ascii=False)

    return Tool(
        HANDOVER_TOOL_NAME,
        "Hand work over to another persona with context (files, data, insights). It runs as a "
        "separate personae process; with waitForResults it returns that persona's results, "
        "otherwise the command to run it later. With interactive the persona runs attached "
        "to the user's terminal.",
        HandoverToolArgs,
        run,
    )


def register_handover_tool(
    registry: ToolRegistry,
    source_persona: str,
    *,
    session_id: str = "",
    child: ChildOptions | None = None,
) -> Tool[HandoverToolArgs]:
    """Register :func:`handover_tool` into ``registry`` (arguments as for ``handover_tool``)."""
    tool = handover_tool(source_persona, session_id=session_id, child=child)
    registry.register(tool)
    return tool
