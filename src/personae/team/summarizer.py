"""The path-A summary as a model call: the configured model, its own small prompt."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.usage import UsageLimits

from personae.context.summary import SUMMARY_CAP, SUMMARY_INSTRUCTIONS
from personae.models.resolve import ModelResolver
from personae.models.scenario import ROLE_MARKER

__all__ = ["SUMMARIZER_ROLE", "model_summarize"]

SUMMARIZER_ROLE = "summarizer"
"""Role marker of the summary call (scripted scenarios match ``role: summarizer``)."""


async def model_summarize(
    models: ModelResolver,
    persona_model: str | None,
    request: str,
    *,
    cap: int = SUMMARY_CAP,
    timeout: float = 60.0,
) -> str:
    """One request to the run's model: the condensed summary text (errors propagate)."""
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
    return result.output
