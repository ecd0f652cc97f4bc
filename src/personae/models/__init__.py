"""Models: ``provider:name`` specs -> pydantic-ai models, and the scripted loopback model."""

from personae.models.player import ScenarioPlayer, scripted_function_model
from personae.models.resolve import CLAUDE_ALIASES, ModelResolver, ModelSpec, parse_model_spec
from personae.models.scenario import ROLE_MARKER, Answer, Scenario, ScenarioError, load_scenario
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
