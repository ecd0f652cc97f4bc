"""Models: ``provider:name`` specs -> pydantic-ai models, and the scripted loopback model.

A lazy front: a run's start-up imports :mod:`personae.models.resolve` without the
scripted server, its scenarios or the pydantic-ai model that plays them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from personae._lazy import lazy_front

if TYPE_CHECKING:
    from personae.models.player import ScenarioPlayer, scripted_function_model
    from personae.models.resolve import CLAUDE_ALIASES, ModelResolver, ModelSpec, parse_model_spec
    from personae.models.roles import ROLE_MARKER
    from personae.models.scenario import Answer, Scenario, ScenarioError, load_scenario
    from personae.models.scripted import ScriptedServer

__all__ = [
    "CLAUDE_ALIASES",
    "ROLE_MARKER",
    "Answer",
    "ModelResolver",
    "ModelSpec",
    "Scenario",
    "ScenarioError",
    "ScenarioPlayer",
    "ScriptedServer",
    "load_scenario",
    "parse_model_spec",
    "scripted_function_model",
]

__getattr__ = lazy_front(
    __name__,
    {
        "ScenarioPlayer": "personae.models.player",
        "scripted_function_model": "personae.models.player",
        "CLAUDE_ALIASES": "personae.models.resolve",
        "ModelResolver": "personae.models.resolve",
        "ModelSpec": "personae.models.resolve",
        "parse_model_spec": "personae.models.resolve",
        "ROLE_MARKER": "personae.models.roles",
        "Answer": "personae.models.scenario",
        "Scenario": "personae.models.scenario",
        "ScenarioError": "personae.models.scenario",
        "load_scenario": "personae.models.scenario",
        "ScriptedServer": "personae.models.scripted",
    },
)
