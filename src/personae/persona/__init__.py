"""Personas and skills: models, loaders and the Cast registry."""

from personae.persona.cast import Cast
from personae.persona.model import Constraints, ContextMode, Persona, Skill
from personae.persona.problems import Problem

__all__ = ["Cast", "Constraints", "ContextMode", "Persona", "Problem", "Skill"]
