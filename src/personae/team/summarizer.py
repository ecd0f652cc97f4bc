"""The path-A summary as a model call: the configured model, its own small prompt.

The call is made before the run's record exists, so :class:`SummaryCalls` keeps
what it cost and what it sent and answered; :meth:`SummaryCalls.adopt` then adds
it to the run's tree-wide usage and stores it as one of the run's model calls
(role ``summarizer``), like every other call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from pydantic_ai import Agent
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits

from personae.context.report import BudgetReport, SectionReport
from personae.context.summary import SUMMARY_CAP, SUMMARY_INSTRUCTIONS
from personae.models.resolve import ModelResolver
from personae.models.roles import ROLE_MARKER
from personae.store.runs import ModelCallRow
from personae.team.runtime import CallInfo, Runtime, TreeUsage, call_row
from personae.tokens.registry import counter_for_model, model_info

__all__ = ["SUMMARIZER_ROLE", "SummaryCalls", "model_summarize"]

SUMMARIZER_ROLE: Final = "summarizer"
"""Role marker of the summary call (scripted scenarios match ``role: summarizer``)."""


@dataclass
class SummaryCalls:
    """Summary model calls made before the run's record existed, kept until it does."""

    persona: str | None = None
    """Persona the run runs as (stored with each call)."""
    rows: list[ModelCallRow] = field(default_factory=list)
    """The calls as they will be stored."""
    usage: TreeUsage = field(default_factory=TreeUsage)
    """What the calls used (added to the run's usage by :meth:`adopt`)."""

    def add(self, label: str, context_text: str, request: str, result: Any) -> None:
        """Keep one finished call (``result``: the pydantic-ai run result)."""
        usage = result.usage
        self.usage.count(usage.requests, usage.input_tokens, usage.output_tokens)
        info = CallInfo(
            role=SUMMARIZER_ROLE,
            persona=self.persona,
            subtask=None,
            context_text=context_text,
            budget=_report(label, context_text, request),
        )
        sent = (result.all_messages()[:-1], None)
        self.rows.append(call_row(info, label, result.response, 1, sent))

    def adopt(self, runtime: Runtime) -> None:
        """Add the calls to the run's usage and calibration figures, and queue them for
        storage (first, in order)."""
        done = self.usage
        runtime.usage.count(done.requests, done.input_tokens, done.output_tokens)
        for row in self.rows:  # priced now that the run's price table is known
            runtime.usage.price(row.model, row.usage["input_tokens"], row.usage["output_tokens"])
            runtime.observe_input(row)  # a whole (not streamed) answer: the server's figure
        if runtime.runs is not None:
            runtime.pending_calls[:0] = self.rows
        self.rows, self.usage = [], TreeUsage()


def _report(label: str, context_text: str, request: str) -> BudgetReport:
    """A budget report of the summary request: its instructions and the evicted messages."""
    counter = counter_for_model(label)
    total = counter.count(context_text)
    kept = counter.count(request)
    section = SectionReport(
        tag="summary_request",
        source="messages",
        requested=kept,
        allotted=kept,
        kept=kept,
        rule="full",
        detail="the stored summary and the messages evicted since",
    )
    return BudgetReport(
        role=SUMMARIZER_ROLE,
        snapshot_id="",
        counter=counter.name,
        counter_exact=bool(getattr(counter, "exact", False)),
        history_path="A",
        budget=model_info(label).context_window,
        total=total,
        overhead=total - kept,
        sections=[section],
    )


async def model_summarize(
    models: ModelResolver,
    persona_model: str | None,
    request: str,
    *,
    cap: int = SUMMARY_CAP,
    timeout: float = 60.0,
    calls: SummaryCalls | None = None,
) -> str:
    """One request to the run's model: the condensed summary text (errors propagate).

    ``calls`` keeps the call (usage, what was sent, the answer) for the run.
    """
    agent: Agent[None, str] = Agent(models.model(persona_model), output_type=str)
    instructions = (
        f"{ROLE_MARKER.format(role=SUMMARIZER_ROLE)}\n{SUMMARY_INSTRUCTIONS.format(cap=cap)}"
    )
    result = await agent.run(
        request,
        instructions=instructions,
        usage_limits=UsageLimits(request_limit=1),
        model_settings=ModelSettings(max_tokens=models.facts(persona_model).max_output),
        timeout=timeout,
    )
    if calls is not None:
        calls.add(models.label(persona_model), f"{instructions}\n\n{request}", request, result)
    return result.output
