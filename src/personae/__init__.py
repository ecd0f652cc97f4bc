"""personae: persona and context engine for multi-agent LLM systems."""

from personae.errors import PersonaeError, RunError, UsageError
from personae.persona import ContextMode, Persona, Skill
from personae.project import Project
from personae.store import Store

__all__ = [
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
