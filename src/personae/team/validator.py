"""The Validator: deterministic checks first, then one structured LLM call.

Involvement comes from the task type only. A failed tool, a refused repeat
(loop), work with no tool use, a required tool not used or a file claimed but
missing is decided in code without a model call. Otherwise one structured call
returns the verdict and the CompletionSignal. Timeouts, HTTP errors and output
that stays unparsable are *infrastructure errors*: neither approval nor
rejection (:class:`ValidationOutcome` with ``infra_error``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field
from pydantic_ai.exceptions import ModelAPIError, UnexpectedModelBehavior, UsageLimitExceeded

from personae.models.roles import ROLE_MARKER
from personae.team.runtime import CallInfo, Runtime
from personae.team.signals import (
    BlockerType,
    CompletionSignal,
    Confidence,
    InvolvementLevel,
    Strategy,
    Subtask,
    ValidationResult,
    WorkerResult,
)
from personae.team.structured import ask_structured
from personae.team.turn_context import TurnContext

__all__ = [
    "ValidationChecks",
    "ValidationOutcome",
    "Verdict",
    "contradicted_claims",
    "deterministic_checks",
    "validate",
]

_CLAIMED_FILE = re.compile(
    r"\b(?:created|wrote|written|saved|generated|added)\s+(?:the\s+|a\s+|new\s+)?(?:file\s+)?"
    r"[`'\"]?([\w.\-/]*[A-Za-z_][\w\-/]*\.[A-Za-z][A-Za-z0-9]{0,7})\b[`'\"]?",
    re.IGNORECASE,
)


@dataclass(frozen=True, kw_only=True)
class ValidationChecks:
    """What a subtask's work is checked against (the code checks and the validator call)."""

    level: InvolvementLevel
    """How much the user is involved: how strict the validator is."""
    required_tools: list[str]
    """Tools the work must have used."""
    tools_available: frozenset[str]
    """Tools the worker could use."""
    workspace: Path | None
    """The folder claimed files are looked for in (``None``: not checked)."""


class Verdict(BaseModel):
    """What the validator model returns."""

    approved: bool
    """Accept the work."""
    requirements_met: bool
    """All requirements met."""
    issues: list[str] = Field(default_factory=list)
    """Problems found."""
    next_action: str = ""
    """What to do next."""
    completion_signal: CompletionSignal
    """confidence, progress_made, blocker_type, suggested_strategy."""
    involvement_level: InvolvementLevel | None = None
    """How deeply this task type needs validating, as the model judged it (``None``: the
    keyword rule decides)."""
    correction: str = ""
    """When not approved: what the worker should do differently (uses the shared context)."""


@dataclass(frozen=True, kw_only=True)
class ValidationOutcome:
    """A verdict, or an infrastructure error (which is neither approval nor rejection)."""

    result: ValidationResult | None
    """The verdict when the validator worked."""
    infra_error: str | None = None
    """Why the validator could not give a verdict."""
    used_llm: bool = False
    """A model call was made."""


_CODE_STRATEGY: dict[BlockerType, Strategy] = {
    BlockerType.LOOP: Strategy.SKIP,
    BlockerType.HALLUCINATION: Strategy.RETRY,
    BlockerType.SCOPE_DRIFT: Strategy.REPHRASE,
    BlockerType.TOOL_FAILURE: Strategy.ESCALATE,
    BlockerType.PARTIAL: Strategy.DECOMPOSE,
}
"""The strategy a rejection decided in code suggests for its blocker."""


def _reject(
    level: InvolvementLevel,
    blocker: BlockerType,
    confidence: Confidence,
    progress: bool,
    issue: str,
) -> ValidationResult:
    """A rejection decided in code: ``issue`` with the completion signal it implies."""
    strategy = _CODE_STRATEGY[blocker]
    return ValidationResult(
        approved=False,
        requirements_met=False,
        issues=[issue],
        next_action=strategy.value,
        involvement_level=level,
        completion_signal=CompletionSignal(
            confidence=confidence,
            progress_made=progress,
            blocker_type=blocker,
            suggested_strategy=strategy,
        ),
    )


def deterministic_checks(
    work: WorkerResult,
    *,
    level: InvolvementLevel,
    required_tools: list[str],
    tools_available: frozenset[str],
    workspace: Path | None,
) -> ValidationResult | None:
    """A rejection decided in code, or ``None`` when the LLM check should run."""
    if work.loop_detected:
        return _reject(
            level,
            BlockerType.LOOP,
            Confidence.LOW,
            bool(work.tools_used),
            "the worker repeated an identical tool call",
        )
    contradicted = contradicted_claims(work)
    if contradicted:
        return _reject(
            level,
            BlockerType.HALLUCINATION,
            Confidence.NONE,
            bool(work.tools_used),
            "claims contradicted by the tool log: " + "; ".join(contradicted),
        )
    refused = [c for c in work.failed_tools if c.refused]
    if refused:
        names = ", ".join(dict.fromkeys(c.tool for c in refused))
        allowed = ", ".join(sorted(tools_available - {"agent"})) or "none"
        return _reject(
            level,
            BlockerType.SCOPE_DRIFT,
            Confidence.LOW,
            bool(work.tools_used),
            f"used tools outside this persona's scope: {names} (allowed: {allowed})",
        )
    if work.failed_tools:
        errors = "; ".join(f"{c.tool}: {c.result}" for c in work.failed_tools)
        return _reject(
            level, BlockerType.TOOL_FAILURE, Confidence.NONE, False, f"tool failure: {errors}"
        )
    if not work.success:
        return _reject(
            level,
            BlockerType.PARTIAL,
            Confidence.LOW,
            bool(work.tools_used),
            work.error or "the worker did not finish",
        )
    if not work.tool_calls and tools_available and level is not InvolvementLevel.MINIMAL:
        return _reject(
            level,
            BlockerType.HALLUCINATION,
            Confidence.NONE,
            False,
            "no tool was used, so nothing supports the reported result",
        )
    missing = [t for t in required_tools if t in tools_available and t not in work.tools_used]
    if missing:
        return _reject(
            level,
            BlockerType.HALLUCINATION,
            Confidence.LOW,
            bool(work.tools_used),
            f"required tools not used: {', '.join(missing)}",
        )
    if workspace is not None:
        absent = [
            p
            for p in _CLAIMED_FILE.findall(work.result)
            if not (workspace / p).exists() and not Path(p).is_absolute()
        ]
        if absent:
            return _reject(
                level,
                BlockerType.HALLUCINATION,
                Confidence.NONE,
                bool(work.tools_used),
                f"claimed files do not exist: {', '.join(absent)}",
            )
    return None


_WRITERS = frozenset({"write_file", "edit_file"})


def contradicted_claims(work: WorkerResult) -> list[str]:
    """Files the result says were written while the tool log shows every write to them failed.

    A claim is contradicted only when the log holds a write (or edit) of that
    path that failed or was refused and none that succeeded.
    """
    found: list[str] = []
    for claimed in dict.fromkeys(_CLAIMED_FILE.findall(work.result)):
        writes = [
            c
            for c in work.tool_calls
            if c.tool in _WRITERS and _same_path(str(c.args.get("path", "")), claimed)
        ]
        if writes and not any(c.ok for c in writes):
            how = "refused" if any(c.refused for c in writes) else "failed"
            found.append(f"says {claimed} was written, but {writes[-1].tool}({claimed}) was {how}")
    return found


def _same_path(a: str, b: str) -> bool:
    return (
        bool(a) and Path(a.removeprefix("./")).as_posix() == Path(b.removeprefix("./")).as_posix()
    )


_GUIDE = {
    InvolvementLevel.MINIMAL: "Information-only task: check the answer is supported and relevant.",
    InvolvementLevel.STANDARD: "Check coherence with the tool output and the requirements.",
    InvolvementLevel.THOROUGH: "The user asked for testing/verification: check every requirement "
    "against tool output; anything unverified is not met.",
}


def validator_instructions(level: InvolvementLevel) -> str:
    """The validator's instructions; ``level`` is the keyword rule's suggestion.

    The model decides the involvement level of the task type (returned in the
    verdict) and validates at that depth.
    """
    levels = " ".join(f"{lv.value}: {_GUIDE[lv]}" for lv in InvolvementLevel)
    return (
        f"{ROLE_MARKER.format(role='validator')}\n"
        "You are the Validator of a personae team. Judge one piece of work against its "
        "subtask, its requirements, the shared context and the persona's validation context. "
        "A claim not backed by tool output is a hallucination. A failure claim needs evidence. "
        "Return the verdict and the completion signal (confidence high|medium|low|none, "
        "progress_made, blocker_type tool_failure|hallucination|scope_drift|partial|loop|"
        "capability_gap or null, suggested_strategy retry|rephrase|decompose|skip|escalate or "
        "null). When not approved, write in `correction` what the worker should do "
        "differently, using the shared context (directive, conversation, tool results).\n"
        "First decide the involvement level this task type needs (involvement_level): "
        "thorough only when the user asks for testing, verification, QA or double-checking "
        "of results; minimal for information-only requests; standard otherwise. Never raise "
        f"it because of earlier failures. {levels}\nKeyword rule suggests: {level.value}."
    )


def validator_prompt(
    context_text: str,
    subtask: Subtask,
    work: WorkerResult,
    skills_text: str = "",
    tools_available: frozenset[str] | None = None,
) -> str:
    """The validator's prompt: shared context, skill bodies for validation, subtask, the
    tools the worker really had (``tools_available``: its granted names, tools discovered
    from MCP servers at run time included), and the work with its tool calls."""
    calls = "\n".join(
        f"- {c.tool}({c.args}) -> {'ok' if c.ok else 'failed'}: {c.result[:600]}"
        for c in work.tool_calls
    )
    reqs = "\n".join(f"- {r}" for r in subtask.requirements) or "(none stated)"
    parts = [context_text] if context_text else []
    if skills_text:
        parts.append(skills_text)
    parts.append(f"<subtask>\n{subtask.description}\n</subtask>")
    if tools_available is not None:
        names = ", ".join(sorted(tools_available)) or "(none)"
        parts.append(
            "<worker_tools>\nThe tools the worker really had in this run (tools discovered "
            f"from MCP servers included): {names}\n</worker_tools>"
        )
    parts += [
        f"<requirements>\n{reqs}\n</requirements>",
        f"<worker_result>\n{work.result}\n</worker_result>",
        f"<tool_calls>\n{calls or '(none)'}\n</tool_calls>",
    ]
    return "\n\n".join(parts)


async def validate(
    runtime: Runtime,
    turn: TurnContext,
    *,
    subtask: Subtask,
    number: int,
    work: WorkerResult,
    checks: ValidationChecks,
    persona: str | None,
    skills_text: str = "",
) -> ValidationOutcome:
    """Validate ``work`` against ``checks``: code checks, then at most one structured
    model call.

    ``skills_text`` holds the L2 bodies of the skills the work is checked against.
    """
    decided = deterministic_checks(
        work,
        level=checks.level,
        required_tools=checks.required_tools,
        tools_available=checks.tools_available,
        workspace=checks.workspace,
    )
    if decided is not None:
        return ValidationOutcome(result=decided)
    view = turn.view("validator")
    instructions = validator_instructions(checks.level)
    prompt = validator_prompt(view.text, subtask, work, skills_text, checks.tools_available)
    info = CallInfo(
        role="validator",
        persona=persona,
        subtask=number,
        context_text=f"{instructions}\n\n{prompt}",
        budget=view.report,
    )
    try:
        verdict = await ask_structured(
            runtime, info, instructions=instructions, prompt=prompt, output_type=Verdict,
            attempts=2,
        )  # fmt: skip
    except UsageLimitExceeded:
        raise
    except (ModelAPIError, UnexpectedModelBehavior, TimeoutError, OSError) as exc:
        return ValidationOutcome(result=None, infra_error=f"{type(exc).__name__}: {exc}")
    assert isinstance(verdict, Verdict)
    return ValidationOutcome(
        result=ValidationResult(
            approved=verdict.approved,
            requirements_met=verdict.requirements_met,
            issues=verdict.issues,
            next_action=verdict.next_action,
            involvement_level=verdict.involvement_level or checks.level,
            completion_signal=verdict.completion_signal,
            correction=verdict.correction.strip()[:2000],
        ),
        used_llm=True,
    )
