"""Token counting: exact offline tokenizers, estimates, calibration, model registry."""

from personae.tokens.base import TokenCounter
from personae.tokens.calibration import Calibration
from personae.tokens.estimate import EstimateCounter
from personae.tokens.exact import ExactCounter, exact_counter
from personae.tokens.registry import ModelInfo, counter_for_model, model_info

__all__ = [
    "Calibration",
    "EstimateCounter",
    "ExactCounter",
    "ModelInfo",
    "TokenCounter",
    "counter_for_model",
    "exact_counter",
    "model_info",
]
