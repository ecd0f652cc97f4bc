"""The path-A summary as a model call: the configured model, its own small prompt.

The call is made before the run's record exists, so :class:`SummaryCalls` keeps
what it cost and what it sent and answered; :meth:`SummaryCalls.adopt` then adds
it to the run's tree-wide usage and stores it as one of the run's model calls
(role ``summarizer``), like every other call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic_ai import Agent
from pydantic_ai.usage import UsageLimits

from personae.context.report import BudgetReport, SectionReport
from personae.context.summary import SUMMARY_CAP, SUMMARY_INSTRUCTIONS
from personae.models.resolve import ModelResolver
from personae.models.scenario import ROLE_MARKER
from personae.store.answers import ModelAnswer
from personae.store.runs import ModelCallRow
from personae.team._request_tokens import count_request
from personae.tokens.registry import counter_for_model, model_info

if TYPE_CHECKING:
    from personae.team.runtime import Runtime

__all__ = ["SUMMARIZER_ROLE", "SummaryCalls", "model_summarize"]

SUMMARIZER_ROLE = "summarizer"
"""Role marker of the summary call (scripted scenarios match ``role: summarizer``)."""


@dataclass
class SummaryCalls:
    """Summary model calls made before the run's record existed, kept until it does."""

    persona: str | None = None
    """Persona the run runs as (stored with each call)."""
    rows: list[ModelCallRow] = field(default_factory=list)
    """The calls as they will be stored."""
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, label: str, context_text: str, request: str, result: Any) -> None:
        """Keep one finished call (``result``: the pydantic-ai run result)."""
        usage = result.usage
        self.requests += usage.requests
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        response = result.response
        counter = counter_for_model(label)
        self.rows.append(
            ModelCallRow(
                role=SUMMARIZER_ROLE,
                persona=self.persona,
                subtask=None,
                model=label,
                context_text=context_text,
                budget=_report(label, context_text, request),
                usage={
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "step": 1,
                    "counted_input_tokens": count_request(
                        result.all_messages()[:-1], None, counter
                    ),
                    "counter": counter.name,
                    "counter_exact": model_info(label).exact,
                },
                at=datetime.now(UTC).isoformat(timespec="milliseconds"),
                answer=ModelAnswer.build(text=response.text, finish_reason=response.finish_reason),
            )
        )

    def adopt(self, runtime: Runtime) -> None:
        """Add the calls to the run's usage and queue them for storage (first, in order)."""
        usage = runtime.usage
        usage.requests += self.requests
        usage.input_tokens += self.input_tokens
        usage.output_tokens += self.output_tokens
        if runtime.runs is not None:
            runtime.pending_calls[:0] = self.rows
        self.rows, self.requests, self.input_tokens, self.output_tokens = [], 0, 0, 0


def _report(label: str, context_text: str, request: str) -> dict[str, Any]:
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
    ).model_dump(mode="json")


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
        timeout=timeout,
    )
    if calls is not None:
        calls.add(models.label(persona_model), f"{instructions}\n\n{request}", request, result)
    return result.output
