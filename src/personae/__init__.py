"""personae: persona and context engine for multi-agent LLM systems.

The front door is lazy: ``import personae`` loads nothing heavy, so small
entry points (the hook gate runs on every tool call) start fast. Each name is
imported from its module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from personae.errors import PersonaeError, RunError, UsageError
    from personae.persona import Cast, ContextMode, Persona, Skill
    from personae.project import Project
    from personae.store import Store

__all__ = [
    "Cast",
    "ContextMode",
    "Persona",
    "PersonaeError",
    "Project",
    "RunError",
    "Skill",
    "Store",
    "UsageError",
    "__version__",
]

__version__ = "0.1.0"

_HOMES: dict[str, str] = {
    "PersonaeError": "personae.errors",
    "RunError": "personae.errors",
    "UsageError": "personae.errors",
    "Cast": "personae.persona",
    "ContextMode": "personae.persona",
    "Persona": "personae.persona",
    "Skill": "personae.persona",
    "Project": "personae.project",
    "Store": "personae.store",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'personae' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
