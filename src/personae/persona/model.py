"""The Persona and Skill data models (what every loader produces)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from personae.context.modes import ContextMode
from personae.fsutil import read_regular
from personae.persona._frontmatter import parse_document

__all__ = ["Constraints", "ContextMode", "Persona", "PersonaFileKind", "SandboxGrant", "Skill"]


class PersonaFileKind(StrEnum):
    """Which kind of file (and loader) a persona came from."""

    PERSONAE = "personae"
    """A personae persona file (``.personae/personas/``): unknown tools and skills are errors."""
    CLAUDE_CODE = "claude-code"
    """A Claude Code agent file (``.claude/agents/``): tools personae lacks are warnings."""
    PLUGIN = "plugin"
    """An agent of a Claude Code plugin."""
    BUNDLED = "bundled"
    """One of the personas shipped with personae."""


class Constraints(BaseModel):
    """Persona rules the validator checks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mandatory_steps: list[str] = Field(default_factory=list)
    """Steps the work must include."""
    required_tools: list[str] = Field(default_factory=list)
    """Tools that must be used for the work to count."""
    safety_rules: list[str] = Field(default_factory=list)
    """Rules that must never be broken."""
    validation_guidance: str = ""
    """Free text for the validator."""


class SandboxGrant(BaseModel):
    """What a persona's ``run_shell`` sandbox lets through (frontmatter ``sandbox:``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    network: bool = False
    """Commands may use the network."""
    allow_paths: list[str] = Field(default_factory=list)
    """Paths under the user's home commands may read (``~/...`` or absolute)."""


class Skill(BaseModel):
    """An Agent Skill (``SKILL.md``): L1 frontmatter eager, L2 body and L3 files on demand."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Skill name (``^[a-z0-9]+(-[a-z0-9]+)*$``, at most 64 chars)."""
    description: str
    """What the skill does and when to use it (the Agent Skills rules say at most 1024
    chars and no ``<`` or ``>``; longer ones, or ones with brackets, load with a warning)."""
    path: Path
    """The ``SKILL.md`` file."""
    allowed_tools: list[str] = Field(default_factory=list)
    """Tools the skill may use (``allowed-tools``)."""
    constraints: Constraints = Field(default_factory=Constraints)
    """Validation constraints the skill adds to personas that use it."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Frontmatter keys personae does not interpret, kept as they were."""

    @property
    def folder(self) -> Path:
        """The skill's folder (L3 files live here)."""
        return self.path.parent

    def body(self) -> str:
        """L2: the Markdown body of ``SKILL.md`` (verbatim), read from disk on demand."""
        text = read_regular(self.path).decode("utf-8")  # a FIFO swapped in is refused
        return parse_document(text, lenient=True).body

    def files(self) -> list[Path]:
        """L3: the other files beside ``SKILL.md`` (sorted, relative to the folder).

        Symlinks whose target lies outside the skill folder are left out.
        """
        root = self.folder.resolve()
        return sorted(
            p.relative_to(self.folder)
            for p in self.folder.rglob("*")
            if p.is_file() and p != self.path and p.resolve().is_relative_to(root)
        )


class Persona(BaseModel):
    """A named bundle of identity, tools and budget.

    ``system_prompt`` is the persona file's body, used verbatim (nothing of a
    parent's prompt is added).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    """Unique name; what a parent passes to the ``agent`` tool."""
    description: str
    """One line shown to a parent in ``<available_agents>``; never seen by the persona itself."""
    system_prompt: str = ""
    """The full system prompt (file body, verbatim)."""
    tools: list[str] | None = None
    """Allowed tool names (personae names); ``None`` means every tool the parent has."""
    disallowed_tools: list[str] = Field(default_factory=list)
    """Tools removed from the allowed set."""
    unavailable_tools: list[str] = Field(default_factory=list)
    """Tools a Claude Code file names that personae does not provide (as written);
    reported as warnings and left out of ``tools``."""
    claude_tools: list[str] | None = None
    """The source file's ``tools`` in its own Claude Code spelling and order, kept only
    where it differs from what export writes by default (``Agent`` rather than ``Task``,
    ``MultiEdit`` beside ``Edit``), so that an export gives the host the same list."""
    claude_disallowed_tools: list[str] | None = None
    """The same for ``disallowedTools``."""
    tools_as_written: str | list[str] | None = None
    """The file's ``tools`` value when an export would write it otherwise (``WebFetch,WebSearch``
    without a space, a YAML list, ``[]``), so that an export writes it as it was while it
    still names the same entries."""
    description_as_written: str | None = None
    """The file's ``description`` when it differs from ``description`` only in white space
    (a folded ``>`` value ends in a newline), so that an export writes it as it was."""
    model: str | None = None
    """Model override (``provider:name``, or ``sonnet|opus|haiku|inherit`` from Claude Code)."""
    max_steps: int | None = None
    """Step budget for one task; ``None`` means no limit of its own."""
    profile: str | None = None
    """Context profile the persona's worker is assembled with (builder, verifier ...);
    ``None``: the ``worker`` profile."""
    needs_temp_workspace: bool = False
    """Run each delegated task in a fresh temporary directory, deleted afterwards."""
    skills: list[str] = Field(default_factory=list)
    """Names of skills this persona uses."""
    mcp_servers: dict[str, Any] = Field(default_factory=dict)
    """MCP servers this persona uses (name -> server config)."""
    subagents: list[str] | None = None
    """Personas this persona may spawn with the ``agent`` tool (``subagents`` field, or
    Claude Code's ``Agent(a, b)`` / ``Task(a, b)`` in ``tools``); ``None``: any persona
    of the cast. Enforced when the ``agent`` tool is dispatched."""
    context: ContextMode = ContextMode.BRIEF
    """Context inheritance mode: what this persona receives when spawned as a sub-agent
    (default ``brief``: a child that gets only its task starts blind to the directive's
    constraints; ``isolated`` gives only the task)."""
    constraints: Constraints = Field(default_factory=Constraints)
    """Rules the validator checks."""
    sandbox: SandboxGrant = Field(default_factory=SandboxGrant)
    """What the ``run_shell`` sandbox lets this persona's commands reach."""
    version: str | None = None
    """Persona version, if declared."""
    source: Path | None = None
    """The file it was loaded from."""
    source_kind: PersonaFileKind = PersonaFileKind.PERSONAE
    """Which loader produced it: ``personae``, ``claude-code``, ``plugin`` or ``bundled``."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Frontmatter keys personae does not interpret, kept for round trips."""

    @property
    def context_summary(self) -> str:
        """The context mode and what a child spawned in it receives, e.g.
        ``brief (default): the task, the conversation summary, ...``."""
        default = "" if "context" in self.model_fields_set else " (default)"
        return f"{self.context.value}{default}: {self.context.gives}"
