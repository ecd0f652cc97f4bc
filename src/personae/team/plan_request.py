"""The Manager's planning request, known before the engine loads.

Its instructions and prompt come from the turn's context alone, so a run can send it
to a server the user runs before pydantic-ai and the OpenAI SDK load
(:func:`send_plan_early`, :mod:`personae.models.early`); :mod:`personae.team.manager`
asks with the same text, and the engine's request is then answered by the early one.
"""

from __future__ import annotations

from typing import Any

from personae.models.facts import ModelFacts
from personae.models.output import response_format, schema_instructions, wire_schema
from personae.models.resolve import ModelResolver
from personae.models.roles import ROLE_MARKER
from personae.persona.model import Persona
from personae.team.signals import Plan
from personae.team.turn_context import TurnContext

__all__ = ["manager_instructions", "plan_body", "plan_instructions", "send_plan_early",
           "task_part"]  # fmt: skip


def manager_instructions(persona: Persona | None, job: str) -> str:
    """The Manager's instructions for ``job``."""
    head = f"{ROLE_MARKER.format(role='manager')}\nYou are the Manager of a personae team. {job}"
    if persona is not None and persona.system_prompt.strip():
        head += f"\n\nThe team works as persona {persona.name!r}."
    return head


def plan_instructions(persona: Persona | None) -> str:
    """The Manager's instructions for planning a task."""
    return manager_instructions(
        persona,
        "Break the user's task into a short ordered list of subtasks, each with a description "
        "and the requirements that show it is done. Use as few subtasks as the task needs.",
    )


def task_part(view_text: str, task: str) -> str:
    """The ``<task>`` section, unless the role's context already carries it (no duplicate)."""
    return "" if "<task>\n" in view_text else f"<task>\n{task}\n</task>"


def plan_body(
    turn: TurnContext, persona: Persona | None, facts: ModelFacts
) -> dict[str, Any] | None:
    """The chat request body (less ``model``) of the turn's planning call in the ``native``
    or ``prompted`` output mode, as the engine sends it; ``None`` in ``tool`` mode."""
    if facts.output_mode == "tool":
        return None
    view = turn.view("manager")
    prompt = "\n\n".join(p for p in (view.text, task_part(view.text, turn.task)) if p)
    schema = wire_schema(Plan)
    asked = f"{plan_instructions(persona)}\n\n{schema_instructions(schema)}"
    body: dict[str, Any] = {
        "stream": True,
        "messages": [{"role": "system", "content": asked}, {"role": "user", "content": prompt}],
        "max_tokens": facts.max_output,
        "stream_options": {"include_usage": True},
    }
    if facts.output_mode == "native":
        body["response_format"] = response_format(facts.server, "plan", schema)
    return body


def send_plan_early(models: ModelResolver, turn: TurnContext, persona: Persona | None) -> bool:
    """Send the turn's planning request now when the default model is on a server the user
    runs and the plan is asked as text; True when it was sent."""
    facts = models.facts(None)
    body = plan_body(turn, persona, facts)
    return body is not None and models.send_early(body) is not None
