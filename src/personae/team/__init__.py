"""The team runtime: Manager, Worker, Validator, completion signals, dispatch, sub-agents.

Import names from their modules (``personae.team.events``, ``personae.team.loop`` ...):
this package file loads nothing, so a light module such as the event types does not pay
for pydantic-ai and the model runtime.
"""

__all__: list[str] = []
