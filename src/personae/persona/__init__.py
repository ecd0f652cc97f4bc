"""Personas and skills: models, loaders and the Cast registry."""

from personae.persona.model import Constraints, ContextMode, Persona, Skill

__all__ = ["Constraints", "ContextMode", "Persona", "Skill"]
