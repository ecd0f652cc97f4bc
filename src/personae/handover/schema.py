"""The handover file (``ContextHandover`` on the wire) as pydantic models.

Wire names are camelCase, as other handover writers use them (``handoverId``,
``workingDirectory``, ``returnResults`` ...); Python attributes are snake_case.
Every model keeps fields it does not know (``extra="allow"``) so a file written
by a newer minor version survives a load/save round trip unchanged. A newer
*major* version is refused.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)
from pydantic.alias_generators import to_camel

from personae.lineage import Budget

__all__ = [
    "MAX_ARTIFACTS",
    "MAX_FILE_BYTES",
    "SCHEMA_VERSION",
    "SUPPORTED_MAJOR",
    "ArtifactFile",
    "ArtifactType",
    "Artifacts",
    "ContextHandover",
    "ExecutionContext",
    "HistoryEntry",
    "Lineage",
    "ResultStatus",
    "Results",
    "Source",
    "Target",
    "new_handover_id",
    "now_iso",
]

SCHEMA_VERSION = "1.2.0"
"""The version this code writes (1.1 adds ``lineage``, 1.2 ``context.mcpServerConfigs``;
1.0 and 1.1 files load unchanged)."""
SUPPORTED_MAJOR = 1
"""The newest major version this code reads."""

MAX_FILE_BYTES = 8 * 1024 * 1024
"""Largest handover file accepted (bytes)."""
MAX_ARTIFACTS = 10_000
"""Most artifact files one handover may list."""

ArtifactType = Literal["data", "code", "analysis", "document"]
"""What an artifact file is."""
ResultStatus = Literal["success", "failure", "partial"]
"""How the target persona's run ended."""

# Text size limits per field (characters).
ShortText = Annotated[str, StringConstraints(max_length=256)]
PathText = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
Text4k = Annotated[str, StringConstraints(max_length=4_000)]
Text20k = Annotated[str, StringConstraints(max_length=20_000)]
Text200k = Annotated[str, StringConstraints(max_length=200_000)]
PersonaName = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]*$")
]
ServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,48}$")]
HandoverId = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
]

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:[-+][0-9A-Za-z.+-]*)?$")


def _is_none(value: object) -> bool:
    return value is None


def now_iso() -> str:
    """The current UTC time as ISO 8601 with a ``Z`` suffix."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_handover_id() -> str:
    """A fresh handover id (a UUID4 string)."""
    return str(uuid.uuid4())


def _check_timestamp(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"not an ISO 8601 timestamp: {value[:40]!r}") from exc
    return value


class _Wire(BaseModel):
    """Base: camelCase wire names, unknown fields kept.

    Optional fields left at ``None`` are omitted on dump (``exclude_if``);
    unknown fields are written back exactly as they came, ``None`` included.
    """

    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        alias_generator=to_camel,
        validate_assignment=True,
        str_strip_whitespace=False,
        use_attribute_docstrings=True,
    )


class Source(_Wire):
    """Who hands the work over, and from where."""

    persona: PersonaName
    """The persona that created the handover."""
    session_id: ShortText = ""
    """The source session (conversation) id."""
    working_directory: PathText
    """Absolute working directory of the source run."""
    environment: dict[str, str] = Field(default_factory=dict)
    """Allow-listed environment variables (HPC job ids, thread counts ...)."""


class Target(_Wire):
    """Who receives the work, and how it should run."""

    persona: PersonaName
    """The persona that should take over."""
    task: Text20k
    """What the target persona should do (the prompt when non-interactive)."""
    interactive: bool = False
    """Run the target interactively (a human at the terminal)."""
    return_results: bool = True
    """Write ``results`` back when done."""
    profile: ShortText | None = Field(default=None, exclude_if=_is_none)
    """Context profile the target's worker is assembled with (builder, verifier ...)."""


class ArtifactFile(_Wire):
    """One file handed over."""

    path: PathText
    """Path (relative to the source working directory, or absolute inside an allowed root)."""
    type: ArtifactType
    """``data``, ``code``, ``analysis`` or ``document``."""
    description: Text4k = ""
    """What the file is."""
    format: ShortText | None = Field(default=None, exclude_if=_is_none)
    """Format (``csv``, ``hdf5``, ``netcdf``, ``parquet``, ``jupyter`` ...): given, or
    detected from the file's first bytes when the handover is written."""
    summary: Text4k | None = Field(default=None, exclude_if=_is_none)
    """What is inside, for the receiver (shape and datasets, dimensions and variables,
    rows and columns): given, or made when the handover is written without reading the
    file whole."""


class Artifacts(_Wire):
    """Work products handed over."""

    files: list[ArtifactFile] = Field(default_factory=list, max_length=MAX_ARTIFACTS)
    """Files the target should know about."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Structured data (any JSON)."""
    insights: list[Text4k] = Field(default_factory=list, max_length=1000)
    """Key findings and recommendations."""


class HistoryEntry(_Wire):
    """What one earlier persona did."""

    persona: PersonaName
    """The persona."""
    task: Text20k = ""
    """Its task."""
    summary: Text20k = ""
    """A summary of its work."""
    timestamp: str
    """When (ISO 8601)."""

    _ts = field_validator("timestamp")(_check_timestamp)


class ExecutionContext(_Wire):
    """Context carried along: earlier work, MCP servers, memory."""

    history: list[HistoryEntry] = Field(default_factory=list, max_length=1000)
    """Earlier personas' work, oldest first."""
    mcp_servers: list[ShortText] | None = Field(default=None, exclude_if=_is_none)
    """Names of the source persona's MCP servers."""
    mcp_server_configs: dict[ServerName, dict[str, Any]] | None = Field(
        default=None, exclude_if=_is_none, max_length=100
    )
    """Their entries (schema 1.2), in the ``.mcp.json`` shape (``type``, ``command``,
    ``args``, ``env``, ``cwd``; ``url``, ``headers``), secrets replaced by ``${NAME}``
    references to the receiver's environment. The receiving persona and project decide
    which the child starts (:mod:`personae.handover.mcp_carry`)."""
    memory_snapshot: Text200k | None = Field(default=None, exclude_if=_is_none)
    """Optional memory state as text."""


class Results(_Wire):
    """Filled in by the target persona (or by the executor on failure)."""

    status: ResultStatus
    """``success``, ``failure`` or ``partial``."""
    output: Text200k | None = Field(default=None, exclude_if=_is_none)
    """The run's final answer / output text."""
    artifacts: list[PathText] | None = Field(default=None, exclude_if=_is_none)
    """New files created."""
    error: Text20k | None = Field(default=None, exclude_if=_is_none)
    """What went wrong (on failure)."""
    next_steps: list[Text4k] | None = Field(default=None, exclude_if=_is_none)
    """Suggested next steps."""


class Lineage(_Wire):
    """Where the run that reads the handover sits in its tree of runs (schema 1.1).

    Written by a run that hands work over; the child's run links to ``parentRun``,
    joins the trace of ``traceparent`` and runs under ``budget`` (it cannot raise it:
    its own caps are the tighter of this and its flags)."""

    parent_run: (
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")] | None
    ) = Field(default=None, exclude_if=_is_none)
    """The id of the run that wrote the handover."""
    traceparent: (
        Annotated[str, StringConstraints(pattern=r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")]
        | None
    ) = Field(default=None, exclude_if=_is_none)
    """W3C trace context of that run (``00-<trace id>-<span id>-01``)."""
    budget: dict[str, Any] | None = Field(default=None, exclude_if=_is_none)
    """What was left of the tree's caps: ``tokens``, ``cost``, ``calls`` (each optional)."""

    @field_validator("budget")
    @classmethod
    def _check_budget(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """A budget with known caps only, each a number >= 0."""
        if value is not None:
            Budget.parse(value, source="budget")
        return value


class ContextHandover(_Wire):
    """A handover file (``ContextHandover`` on the wire), version 1.x."""

    version: str = SCHEMA_VERSION
    """Schema version (semver). A newer major version is refused on load."""
    timestamp: str = Field(default_factory=now_iso)
    """Creation time (ISO 8601)."""
    handover_id: HandoverId = Field(default_factory=new_handover_id)
    """Unique id (UUID); also the ledger key."""
    source: Source
    """The source persona."""
    target: Target
    """The target persona and task."""
    artifacts: Artifacts = Field(default_factory=Artifacts)
    """Files, data and insights handed over."""
    context: ExecutionContext = Field(default_factory=ExecutionContext)
    """History, MCP servers, memory."""
    results: Results | None = Field(default=None, exclude_if=_is_none)
    """Results written back by the target (absent until then)."""
    lineage: Lineage | None = Field(default=None, exclude_if=_is_none)
    """The run that wrote the handover and the budget it passes down (schema 1.1)."""

    _ts = field_validator("timestamp")(_check_timestamp)

    @field_validator("version")
    @classmethod
    def _supported_version(cls, value: str) -> str:
        match = _VERSION.match(value)
        if match is None:
            raise ValueError(f"not a semantic version: {value[:40]!r}")
        major = int(match.group(1))
        if major > SUPPORTED_MAJOR:
            raise ValueError(
                f"handover version {value} is newer than this personae understands "
                f"(major {SUPPORTED_MAJOR}); upgrade personae to read it"
            )
        if major < 1:
            raise ValueError(f"handover version {value} is not supported (need 1.x)")
        return value
