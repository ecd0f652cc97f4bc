"""Token counting: exact offline tokenizers, estimates, calibration, model registry."""

from personae.tokens.base import TokenCounter

__all__ = ["TokenCounter"]
