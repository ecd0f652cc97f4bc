"""Section specs and role profiles: what a role sees, in which order, with which limits."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from personae.context._lru import IdentityMemo

__all__ = [
    "DEFAULT_NOTICE",
    "SOURCES",
    "Profile",
    "SectionSource",
    "SectionSpec",
    "Truncation",
    "section_keys",
]

DEFAULT_NOTICE = "[… {tag} truncated to fit the budget: about {omitted} of {total} tokens omitted]"


class SectionSource(StrEnum):
    """Where a section's content comes from (see :data:`SOURCES`)."""

    DIRECTIVE = "directive"
    SUMMARY = "summary"
    MESSAGES = "messages"
    PERSONA = "persona"
    VALIDATION = "validation"
    HANDOVER = "handover"
    TASK = "task"
    TEXT = "text"
    VISION = "vision"
    GAMEPLAN = "gameplan"
    STATE = "state"
    STEP = "step"
    DECISIONS = "decisions"
    STEP_RESEARCH = "step_research"
    GIT_LOG = "git_log"
    RESEARCH = "research"
    CODEBASE = "codebase"
    REFERENCE = "reference"
    RESEARCH_SUMMARY = "research_summary"
    CODEBASE_SUMMARY = "codebase_summary"


SOURCES: dict[str, str] = {
    SectionSource.DIRECTIVE.value: "the directive file"
    " (.personae/directive.md, AGENTS.md or CLAUDE.md)",
    SectionSource.SUMMARY.value: "the stored running conversation summary (history path A)",
    SectionSource.MESSAGES.value: "the recent conversation messages"
    " (user, assistant and tool roles)",
    SectionSource.PERSONA.value: "the active persona's execution block",
    SectionSource.VALIDATION.value: "the active persona's validation context",
    SectionSource.HANDOVER.value: "the handover section received from another persona",
    SectionSource.TASK.value: "the task text (--task, or the handover's task)",
    SectionSource.TEXT.value: "the profile's own text (with allowed !command injection)",
    SectionSource.VISION.value: ".personae/project/VISION.md",
    SectionSource.GAMEPLAN.value: ".personae/project/GAMEPLAN.md",
    SectionSource.STATE.value: ".personae/project/STATE.md",
    SectionSource.STEP.value: "the current STEP.md (goals/NN-*/NN-*/STEP.md)",
    SectionSource.DECISIONS.value: "the ## Decisions section of the current STEP.md",
    SectionSource.STEP_RESEARCH.value: "the current step's RESEARCH.md",
    SectionSource.GIT_LOG.value: "recent commits of the working directory (git log)",
    SectionSource.RESEARCH.value: "research/ files chosen by task type"
    " (their *_SUMMARY.md or SUMMARY.md"
    " stands in when the whole does not fit)",
    SectionSource.CODEBASE.value: "codebase/ files chosen by task type"
    " (their *_SUMMARY.md or SUMMARY.md"
    " stands in when the whole does not fit)",
    SectionSource.REFERENCE.value: "reference docs: every .personae/project/reference/*.md",
    SectionSource.RESEARCH_SUMMARY.value: ".personae/project/research/SUMMARY.md",
    SectionSource.CODEBASE_SUMMARY.value: ".personae/project/codebase/SUMMARY.md",
}
"""Every content source a section may name, with what it reads."""


class Truncation(StrEnum):
    """How a section shrinks when it is over its cap or the budget."""

    TAIL = "tail"
    """Cut the end, keep the beginning."""
    HEAD = "head"
    """Cut the beginning, keep the end (for messages: evict the oldest exchanges)."""
    DROP = "drop"
    """All or nothing: replaced by a one-line notice when it does not fit."""
    SUMMARIZE = "summarize"
    """Outline (headings and first lines) first, then cut the end."""


class SectionSpec(BaseModel):
    """One section of an assembled context."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tag: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """XML boundary tag (top level, once per context)."""
    source: SectionSource
    """Where the content comes from (a key of :data:`SOURCES`)."""
    cap: int | None = Field(default=None, ge=1)
    """Most tokens the content may take; ``None`` means no cap of its own."""
    max_messages: int | None = Field(default=None, ge=1)
    """For the messages source: most messages kept (whole exchanges)."""
    evict_batch: int | None = Field(default=None, ge=1)
    """For the messages source: eviction grid in message positions (hysteresis); ``None``
    means half of ``max_messages`` (or 8); 1 means sliding one exchange at a time."""
    low_water: float = Field(default=0.8, gt=0, le=1)
    """For the messages source, turn after turn in one process: once the exchanges the
    previous prompt kept no longer fit, evict older ones until the conversation takes at
    most this share of its room, then keep that prefix until it overflows again (provider
    prompt caches keep hitting); 1 evicts only what must go."""
    cut_step: float = Field(default=0.08, ge=0, le=1)
    """For the messages source, a build with no previous prompt (from scratch): the
    conversation starts at a cut point on a grid of token positions counted from the
    conversation's start, one point every this share of the section's room, rounded
    down to a fixed ladder of step sizes about 19% apart (the exchange the point falls
    in is shown shortened to the part after it). The same history prefix gives the
    same cut until the history grows past the next point, so prompts keep their prefix
    turn after turn with no state kept, and budgets a few percent apart often share
    their cut; the price is room left unused (less than one step, about half a step on
    average). 0 fills the room exactly (every prompt starts elsewhere)."""
    priority: int = 50
    """Truncation order when over budget: lower is cut first."""
    share: float | None = Field(default=None, gt=0, le=1)
    """Target share of the budget (the design's allocation table), reported per section
    as ``target`` in the budget report. A pinned section's share bounds it: when the
    context does not fit whole, a pinned section larger than its share is held to it
    (outlined or cut, never dropped) and gets the rest back only from room every other
    section left. Other sections are cut strictly by ``priority`` (lower first), so a
    target never keeps a less important section whole while a more important one is
    cut. ``None``: no target."""
    pinned: bool = False
    """Never dropped, never cut by priority, never capped; with a ``share``, held to it
    when the context does not fit whole. Fitting fails loudly if pinned content does
    not fit."""
    truncation: Truncation = Truncation.TAIL
    """How the section shrinks."""
    notice: str = DEFAULT_NOTICE
    """Visible notice left where content was cut ({tag}, {omitted}, {total}, {kept})."""
    text: str | None = None
    """Static text for the ``text`` source."""
    files: tuple[str, ...] | None = None
    """For the research and codebase sources: these files of the folder instead of the
    task-type choice (skill-level profiles: Blueprint, Brainstorm, Pivot, Inspect)."""

    @field_validator("files")
    @classmethod
    def _file_names(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for name in value or ():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*\.md", name):
                raise ValueError(f"files: {name!r} is not a Markdown file name of the folder")
        return value

    @property
    def content_key(self) -> str:
        """The snapshot text this section reads (its source, or source and files)."""
        return f"{self.source}:{'+'.join(self.files)}" if self.files else self.source

    @field_validator("notice")
    @classmethod
    def _notice_fields(cls, value: str) -> str:
        try:
            value.format(tag="t", omitted=1, total=2, kept=1, messages=1)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                "notice may only use {tag}, {omitted}, {total}, {kept}, {messages}"
                f" (problem: {exc})"
            ) from None
        return value


class Profile(BaseModel):
    """A role's sections, in rendering order (most stable first)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str
    """Role name (manager, worker, client, builder, ...)."""
    description: str = ""
    """What the role is for."""
    sections: tuple[SectionSpec, ...]
    """Sections in fixed order."""

    def spec(self, tag: str) -> SectionSpec | None:
        """The section with ``tag``, if the profile has it."""
        for s in self.sections:
            if s.tag == tag:
                return s
        return None


_KEYS: IdentityMemo[SectionSpec, tuple[str, str]] = IdentityMemo(1024)
"""The snapshot keys of the section specs assembled lately (a spec is immutable)."""


def section_keys(spec: SectionSpec) -> tuple[str, str]:
    """The snapshot keys of ``spec``'s text (:attr:`SectionSpec.content_key`) and of its
    summary file, remembered by the spec (assembly reads them for every section of every
    prompt)."""
    got = _KEYS.get(spec)
    if got is None:
        key = spec.content_key
        got = (key, f"{key}:summary")
        _KEYS.put(spec, got)
    return got
