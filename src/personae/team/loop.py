"""One turn of the team: plan -> (work -> validate -> dispatch)* per subtask -> synthesis."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset

from personae.limits import DEFAULTS
from personae.persona.model import Persona, Skill
from personae.project import CommandsConfig, SandboxConfig
from personae.store.status import RunStatus
from personae.team.dispatch import StepAction, SubtaskBudget, next_step
from personae.team.events import (
    Corrected,
    PlanMade,
    RunFinished,
    RunWarning,
    SubtaskStarted,
    Validated,
    WorkDone,
)
from personae.team.involvement import involvement_for
from personae.team.loopdetect import LoopDetector
from personae.team.manager import (
    SubtaskOutcome,
    decompose,
    fallback_plan,
    make_plan,
    synthesize,
)
from personae.team.mcp_servers import McpHub
from personae.team.result import files_written
from personae.team.runtime import Runtime
from personae.team.signals import (
    InvolvementLevel,
    Plan,
    Subtask,
    SubtaskResult,
    SubtaskStatus,
    ValidationResult,
    WorkerResult,
)
from personae.team.skills import (
    DEFAULT_SKILL_BUDGET,
    LoadedSkills,
    cited_skills,
    load_skills,
    relevant_skills,
)
from personae.team.structured import AnswerType, StructuredOutputError
from personae.team.subagents import DEFAULT_DEPTH_CAP, Spawner
from personae.team.turn_context import TurnContext
from personae.team.validator import ValidationChecks, validate
from personae.team.worker import WorkerTools, run_worker
from personae.tools.subset import ToolSubset

__all__ = ["TeamConfig", "TeamLoop", "involvement_for_subtask"]

_DEFAULT_PERSONA = Persona(
    name="default",
    description="General worker (no persona chosen): read-only tools",
    tools=["read_file", "list_dir", "glob", "grep"],
)
"""Used when no persona is active: it may look but not change anything (fail closed)."""


@dataclass(frozen=True, kw_only=True)
class TeamConfig:
    """Knobs of the team loop (defaults from the seeds)."""

    max_retries: int = DEFAULTS.max_retries
    """Corrections per subtask."""
    loop_window: int = 6
    """Calls remembered for loop detection."""
    depth_cap: int = DEFAULT_DEPTH_CAP
    """Sub-agent nesting cap."""
    validator_attempts: int = 2
    """Validator calls tried before its infrastructure error is reported."""


def _merged_status(statuses: set[SubtaskStatus]) -> SubtaskStatus:
    """The status of a decomposed subtask from its parts' statuses."""
    if statuses == {SubtaskStatus.VALIDATED}:
        return SubtaskStatus.VALIDATED
    if statuses <= {SubtaskStatus.SKIPPED, SubtaskStatus.ESCALATED}:
        return SubtaskStatus.SKIPPED
    if statuses & {SubtaskStatus.PARTIAL, SubtaskStatus.VALIDATED}:
        return SubtaskStatus.PARTIAL
    return SubtaskStatus.UNVALIDATED


def _carried(source: BaseModel, event: type[WorkDone | Validated]) -> dict[str, Any]:
    """The payload fields an event takes over from the model it reports (a worker's
    result, a verdict): every field both have, by name, so neither list is kept by hand."""
    names = {f.name for f in dataclasses.fields(event)}
    return {n: getattr(source, n) for n in type(source).model_fields if n in names}


def involvement_for_subtask(task: str, subtask: str) -> InvolvementLevel:
    """Thorough if the user's task or the subtask asks to test/verify; minimal if the user's
    task is information-only; standard otherwise. Never depends on earlier failures."""
    if InvolvementLevel.THOROUGH in (involvement_for(task), involvement_for(subtask)):
        return InvolvementLevel.THOROUGH
    return involvement_for(task)


@dataclass(kw_only=True)
class _Run:
    """One turn's state, passed explicitly (nothing of a run is kept on the :class:`TeamLoop`)."""

    agents: Spawner
    """Builds every agent's toolset and runs sub-agents (MCP servers included)."""
    warnings: list[str] = field(default_factory=list)
    """User-visible warnings of the turn."""
    failure_count: int = 0
    """Rejected validations of the turn (telemetry only; never raises involvement)."""


@dataclass(frozen=True, kw_only=True)
class _Job:
    """One planned subtask of a turn, shared by its retries and decomposed steps (its retry
    budget is a value passed along and returned, see :func:`next_step`)."""

    run: _Run
    """The turn it belongs to."""
    number: int
    """Its 1-based number in the plan."""
    original: Subtask
    """The subtask as planned (steps of a decomposition report under it)."""
    detector: LoopDetector
    """Its loop detector (shared by its steps)."""


@dataclass(kw_only=True)
class TeamLoop:
    """Manager, Worker and Validator over one shared turn context."""

    runtime: Runtime
    """Shared runtime of the run."""
    persona: Persona | None = None
    """Active persona (``None``: a plain worker)."""
    personas: Mapping[str, Persona] = field(default_factory=dict)
    """Personas subtasks and sub-agents may use."""
    box: ToolSubset | None = None
    """Tools available to the run."""
    workspace: Path | None = None
    """Project root (for the claimed-files check)."""
    config: TeamConfig = field(default_factory=TeamConfig)
    """Loop settings."""
    mcp_servers: Mapping[str, Any] = field(default_factory=dict)
    """MCP servers configured for the project (personas refer to them by name)."""
    skills: Mapping[str, Skill] = field(default_factory=dict)
    """Skills of the cast by name (their L2 bodies are loaded when a task calls for them)."""
    commands: CommandsConfig = field(default_factory=CommandsConfig)
    """``!command`` settings for skill bodies (off unless enabled)."""
    sandbox: SandboxConfig | None = None
    """The project's ``run_shell`` sandbox settings: sub-agents then run their shell with
    their own persona's grants, cut to their parent's (``None``: the parent's as they are)."""
    answer: AnswerType | None = None
    """The type the final answer is asked for (``None``: text)."""

    async def run_turn(self, turn: TurnContext) -> tuple[RunFinished, Any]:
        """Plan, execute and validate every subtask, then synthesize; returns the run's
        ``final`` event as emitted (the result's record: :class:`~personae.team.result.RunResult`
        is made from it) and the typed answer (``None``: none asked, or no model wrote it).

        MCP servers of the personas used are started on first use and all
        stopped when the turn ends, also on error.
        """
        warnings: list[str] = []

        def mcp_warning(message: str, data: dict[str, Any]) -> None:
            self._warn(warnings, message, subtask=None, action="mcp_server", details=data)

        hub = McpHub(project_servers=self.mcp_servers, cwd=self.workspace, on_warning=mcp_warning)
        agents = Spawner(
            runtime=self.runtime, personas=self.personas, turn=turn,
            depth_cap=self.config.depth_cap, mcp=hub, sandbox=self.sandbox,
        )  # fmt: skip
        try:
            return await self._run_turn(turn, _Run(agents=agents, warnings=warnings))
        finally:
            await hub.aclose()

    async def _run_turn(self, turn: TurnContext, run: _Run) -> tuple[RunFinished, Any]:
        rt = self.runtime
        stopped: str | None = None  # a cap or the deadline was reached while planning
        try:
            plan = await make_plan(rt, turn, self.persona)
        except (StructuredOutputError, TimeoutError) as exc:
            reason = str(exc)
            run.warnings.append(f"the plan did not parse; the task runs as one subtask: {reason}")
            plan = fallback_plan(rt, Subtask(description=turn.task), reason, number=None)
        except UsageLimitExceeded as exc:
            stopped = str(exc)
            plan = Plan(subtasks=[Subtask(description=turn.task)], rationale=stopped)
        rt.emit(
            PlanMade(
                message=f"{len(plan.subtasks)} subtask(s)",
                subtasks=plan.subtasks,
                rationale=plan.rationale,
            )
        )
        outcomes: list[SubtaskOutcome] = []
        if stopped is not None:
            outcomes = self._stop_for_cap(run, plan.subtasks, 1, stopped)
        for number, subtask in enumerate(plan.subtasks if stopped is None else [], start=1):
            job = _Job(
                run=run, number=number, original=subtask,
                detector=LoopDetector(self.config.loop_window),
            )  # fmt: skip
            budget = SubtaskBudget(max_retries=self.config.max_retries)
            rt.emit(
                SubtaskStarted(
                    message=subtask.description,
                    subtask=number,
                    requirements=subtask.requirements,
                    persona=self._persona_for(subtask).name,
                )
            )
            try:
                outcome, _ = await self._run_subtask(turn, job, subtask, budget)
            except UsageLimitExceeded as exc:
                outcomes.extend(self._stop_for_cap(run, plan.subtasks, number, str(exc)))
                break
            outcomes.append(outcome)
            if outcome.status is SubtaskStatus.VALIDATED:
                turn.add_assistant(f"[subtask {number}] {outcome.result}")
        final, output = await synthesize(rt, turn, self.persona, outcomes, answer=self.answer)
        done = all(o.status is SubtaskStatus.VALIDATED for o in outcomes)
        status = RunStatus.DONE if done else RunStatus.PARTIAL
        signals = {
            e.subtask: e.completion_signal
            for e in rt.bus.events
            if isinstance(e, Validated) and e.subtask
        }
        ended = rt.emit(
            RunFinished(
                message=final,
                status=status,
                subtasks=[
                    SubtaskResult(
                        number=o.number,
                        description=o.subtask.description,
                        status=o.status,
                        result=o.result,
                        reason=o.reason,
                        attempts=o.attempts,
                        signal=signals.get(o.number),
                    )
                    for o in outcomes
                ],
                usage=rt.usage.as_dict(),
                failure_count=run.failure_count,
                warnings=list(run.warnings),
                files_written=files_written(rt.bus.events, self.workspace or Path()),
                error=None,
            )
        )
        return cast(RunFinished, ended), output  # the bus returns the event given, numbered

    def _warn(
        self,
        kept: list[str] | None,
        message: str,
        *,
        subtask: int | None,
        action: str | None,
        details: dict[str, Any],
    ) -> None:
        """A user-visible warning: emitted as a ``warning`` event, and kept in ``kept`` (the
        turn's warnings, which the result lists) when given."""
        if kept is not None:
            kept.append(message)
        self.runtime.emit(
            RunWarning(message=message, subtask=subtask, action=action, details=details)
        )

    def _stop_for_cap(
        self, run: _Run, subtasks: list[Subtask], number: int, reason: str
    ) -> list[SubtaskOutcome]:
        warning = f"stopped at subtask {number}: {reason}"
        self._warn(run.warnings, warning, subtask=number, action="usage_cap", details={})
        return [
            SubtaskOutcome(
                number=n, subtask=s, status=SubtaskStatus.SKIPPED, result="", reason=reason
            )
            for n, s in enumerate(subtasks, start=1)
            if n >= number
        ]

    def _persona_for(self, subtask: Subtask) -> Persona:
        if subtask.persona and subtask.persona in self.personas:
            return self.personas[subtask.persona]
        return self.persona or _DEFAULT_PERSONA

    async def _tools_for(
        self, run: Spawner, persona: Persona, number: int
    ) -> tuple[AbstractToolset[Any], frozenset[str]]:
        if self.box is None:
            return CombinedToolset([]), frozenset()
        return await run.toolset_for(persona, box=self.box, subtask=number)

    def _skills(
        self, chosen: list[Skill], turn: TurnContext, number: int, role: str
    ) -> LoadedSkills:
        """Load ``chosen`` skills' L2 bodies for ``role`` within the skill budget."""
        if not chosen:
            return LoadedSkills()
        view = turn.view("worker" if role == "worker" else "validator")
        room = max(0, turn.budget.tokens - view.report.total)
        loaded = load_skills(
            chosen, counter=turn.counter, root=turn.snapshot.root, commands=self.commands,
            budget=min(DEFAULT_SKILL_BUDGET, room),
            tag="skills" if role == "worker" else "skills_for_validation",
        )  # fmt: skip
        if loaded.cut:
            self._warn(
                None, f"skill bodies for the {role} cut to fit the budget: {', '.join(loaded.cut)}",
                subtask=number, action="skills_cut",
                details={"role": role, "skills": loaded.names, "cut": loaded.cut},
            )  # fmt: skip
        return loaded

    async def _run_subtask(
        self, turn: TurnContext, job: _Job, subtask: Subtask, budget: SubtaskBudget
    ) -> tuple[SubtaskOutcome, SubtaskBudget]:
        """Work on ``subtask`` (the planned one or a step of it) until validated or given up;
        returns how it ended and the budget state then (``budget`` is not changed)."""
        rt = self.runtime
        number, original = job.number, job.original
        persona = self._persona_for(original)
        toolset, allowed = await self._tools_for(job.run.agents, persona, number)
        level = involvement_for_subtask(turn.task, subtask.description)
        required = list(
            dict.fromkeys([*subtask.required_tools, *persona.constraints.required_tools])
        )
        tools = WorkerTools(toolset=toolset, allowed=allowed, detector=job.detector)
        checks = ValidationChecks(
            level=level, required_tools=required, tools_available=allowed, workspace=self.workspace
        )
        correction: str | None = None
        attempts = 0
        own = [self.skills[n] for n in persona.skills if n in self.skills]
        for_worker = self._skills(
            relevant_skills(own, f"{turn.task}\n{subtask.description}"), turn, number, "worker"
        )
        while True:
            attempts += 1
            work = await run_worker(
                rt, turn, subtask=subtask, number=number, persona=persona, tools=tools,
                correction=correction, skills_text=for_worker.text,
            )  # fmt: skip
            rt.emit(
                WorkDone(
                    message=work.result[:300],
                    subtask=number,
                    attempt=attempts,
                    skills=for_worker.names,
                    skill_commands=[(c.command, c.reason) for c in for_worker.commands],
                    **_carried(work, WorkDone),
                )
            )
            loaded = [self.skills[n] for n in for_worker.names]
            for_validator = self._skills(
                [*loaded, *cited_skills(own, work.result)], turn, number, "validator"
            )
            result = await self._validate(
                turn, subtask=subtask, number=number, work=work, checks=checks,
                skills_text=for_validator.text, skill_names=for_validator.names,
            )  # fmt: skip
            if result is None:
                job.run.warnings.append(
                    f"subtask {number} kept as unvalidated: the validator was unavailable"
                )
                return SubtaskOutcome(
                    number=number, subtask=original, status=SubtaskStatus.UNVALIDATED,
                    result=work.result, reason="validator unavailable (infrastructure error)",
                    attempts=attempts,
                ), budget  # fmt: skip
            if not result.approved:
                job.run.failure_count += 1
            decision = next_step(
                result, work, budget, subtask=original.description,
                tools_to_use=required or sorted(allowed - {"agent"}),
                allowed_tools=sorted(allowed), directive=turn.directive,
            )  # fmt: skip
            budget = decision.budget
            if decision.action is StepAction.ACCEPT:
                return SubtaskOutcome(
                    number=number, subtask=original, status=SubtaskStatus.VALIDATED,
                    result=work.result, attempts=attempts,
                ), budget  # fmt: skip
            if decision.warning:
                self._warn(
                    job.run.warnings, decision.warning, subtask=number,
                    action=decision.action, details={},
                )  # fmt: skip
            if decision.action in (StepAction.SKIP, StepAction.ESCALATE, StepAction.CONTINUE):
                status = {
                    StepAction.SKIP: SubtaskStatus.SKIPPED,
                    StepAction.ESCALATE: SubtaskStatus.ESCALATED,
                    StepAction.CONTINUE: SubtaskStatus.PARTIAL,
                }[decision.action]
                return SubtaskOutcome(
                    number=number, subtask=original, status=status, result=work.result,
                    reason="; ".join(result.issues), attempts=attempts,
                ), budget  # fmt: skip
            rt.emit(
                Corrected(
                    message=f"{decision.action.value}: {decision.instruction}",
                    subtask=number,
                    action=decision.action,
                    blocker=decision.blocker,
                    retries_used=budget.retries_used,
                    max_retries=budget.max_retries,
                )
            )
            if decision.action is StepAction.DECOMPOSE:
                return await self._decompose(
                    turn, job, subtask, budget, missing="; ".join(result.issues), attempts=attempts
                )
            correction = decision.instruction

    async def _decompose(
        self,
        turn: TurnContext,
        job: _Job,
        subtask: Subtask,
        budget: SubtaskBudget,
        *,
        missing: str,
        attempts: int,
    ) -> tuple[SubtaskOutcome, SubtaskBudget]:
        number, original = job.number, job.original
        try:
            steps = await decompose(
                self.runtime, turn, self.persona, subtask=subtask, number=number, missing=missing
            )
        except (StructuredOutputError, TimeoutError) as exc:
            steps = fallback_plan(self.runtime, subtask, str(exc), number=number)
        results: list[SubtaskOutcome] = []
        for step in steps.subtasks:  # the steps share the original subtask's budget
            result, budget = await self._run_subtask(turn, job, step, budget)
            results.append(result)
        status = _merged_status({r.status for r in results})
        return SubtaskOutcome(
            number=number,
            subtask=original,
            status=status,
            result="\n".join(r.result for r in results),
            reason="; ".join(r.reason for r in results if r.reason),
            attempts=attempts + sum(r.attempts for r in results),
        ), budget

    async def _validate(
        self,
        turn: TurnContext,
        *,
        subtask: Subtask,
        number: int,
        work: WorkerResult,
        checks: ValidationChecks,
        skills_text: str = "",
        skill_names: list[str] | None = None,
    ) -> ValidationResult | None:
        rt = self.runtime
        for attempt in range(1, self.config.validator_attempts + 1):
            outcome = await validate(
                rt, turn, subtask=subtask, number=number, work=work, checks=checks,
                persona=self._persona_for(subtask).name, skills_text=skills_text,
            )  # fmt: skip
            if outcome.result is not None:
                r = outcome.result
                rt.emit(
                    Validated(
                        message="approved" if r.approved else "rejected: " + "; ".join(r.issues),
                        subtask=number,
                        used_llm=outcome.used_llm,
                        skills=skill_names,
                        **_carried(r, Validated),
                    )
                )
                return r
            warning = (
                f"validator unavailable for subtask {number} (attempt {attempt}): "
                f"{outcome.infra_error}; not counted as approval or rejection"
            )
            self._warn(None, warning, subtask=number, action=None,
                       details={"infra_error": outcome.infra_error})  # fmt: skip
        return None
