"""Model registry: model name -> tokenizer, context window, safety margin.

The table is data: an ordered list of glob patterns, first match wins.
OpenAI models map to their public encoding and are counted exactly; models
without a public tokenizer (Claude, Gemini, local models) get a
content-aware estimate with a safety margin, optionally calibrated from the
provider's reported input tokens (:mod:`personae.tokens.calibration`).

Model names may carry a provider prefix (``openai:gpt-4o``,
``anthropic:claude-sonnet-4-5``, ``ollama:llama3.1:8b``) or a vendor path
(``meta-llama/Llama-3.1-8B``). ``None`` means "no model chosen": counted
exactly with ``o200k_base``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Protocol

from personae.tokens.base import TokenCounter
from personae.tokens.estimate import EstimateCounter
from personae.tokens.exact import EXACT_ENCODINGS, exact_counter

__all__ = [
    "DEFAULT_MODEL_INFO",
    "MODEL_TABLE",
    "CalibrationFactors",
    "ModelEntry",
    "ModelInfo",
    "counter_for_model",
    "model_info",
    "normalize_model",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelEntry:
    """One row of the model table."""

    pattern: str
    """Glob over the normalized (lower-case, prefix-free) model name."""
    tokenizer: str
    """An exact encoding (``o200k_base``, ``cl100k_base``) or ``estimate:<family>``."""
    context_window: int
    """Maximum input + output tokens of the model."""
    safety_margin: float = 0.0
    """Fraction added to estimates (0 for exact tokenizers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """What personae knows about one model."""

    model: str | None
    """The model name as given (``None`` for the default)."""
    tokenizer: str
    """Exact encoding name or ``estimate:<family>``."""
    context_window: int
    """Maximum context of the model, in tokens."""
    safety_margin: float
    """Fraction added on top of estimates (0.0 when exact)."""
    pattern: str
    """The table pattern that matched (``*`` for the fallback)."""

    @property
    def exact(self) -> bool:
        """True when the tokenizer is public and counted exactly."""
        return self.tokenizer in EXACT_ENCODINGS

    @property
    def family(self) -> str:
        """``claude``, ``gemini``, ``local``, ``generic`` or the encoding name."""
        return self.tokenizer.removeprefix("estimate:")


def _e(pattern: str, tokenizer: str, window: int, margin: float = 0.0) -> ModelEntry:
    return ModelEntry(
        pattern=pattern, tokenizer=tokenizer, context_window=window, safety_margin=margin
    )


_O200K = "o200k_base"
_CL100K = "cl100k_base"
_CLAUDE = "estimate:claude"
_GEMINI = "estimate:gemini"
_LOCAL = "estimate:local"

_ESTIMATE_MARGIN = 0.20
"""Margin on the estimates for models without a public tokenizer."""
_ESTIMATED: dict[str, dict[str, int]] = {
    _CLAUDE: {"claude*": 200_000},
    _GEMINI: {"gemini*": 1_048_576, "gemma*": 131_072},
    _LOCAL: {
        "llama*": 131_072, "codellama*": 16_384, "qwen*": 32_768, "qwq*": 32_768,
        "mistral*": 32_768, "mixtral*": 32_768, "codestral*": 32_768, "deepseek*": 131_072,
        "phi*": 16_384,
    },
}  # fmt: skip
"""Per estimate family, pattern -> context window (in match order, after OpenAI's)."""

MODEL_TABLE: tuple[ModelEntry, ...] = (
    # OpenAI: exact encodings. Order matters: specific before general.
    _e("gpt-5*", _O200K, 400_000),
    _e("gpt-4.1*", _O200K, 1_047_576),
    _e("gpt-4.5*", _O200K, 128_000),
    _e("gpt-4o*", _O200K, 128_000),
    _e("chatgpt-4o*", _O200K, 128_000),
    _e("gpt-oss*", _O200K, 131_072),
    _e("o1-mini*", _O200K, 128_000),
    _e("o1*", _O200K, 200_000),
    _e("o3*", _O200K, 200_000),
    _e("o4*", _O200K, 200_000),
    _e("codex*", _O200K, 400_000),
    _e("gpt-4-32k*", _CL100K, 32_768),
    _e("gpt-4-turbo*", _CL100K, 128_000),
    _e("gpt-4-1106*", _CL100K, 128_000),
    _e("gpt-4-0125*", _CL100K, 128_000),
    _e("gpt-4", _CL100K, 8_192),
    _e("gpt-4-*", _CL100K, 8_192),
    _e("gpt-3.5-turbo-instruct*", _CL100K, 4_096),
    _e("gpt-3.5*", _CL100K, 16_385),
    _e("text-embedding-3*", _CL100K, 8_191),
    _e("text-embedding-ada-002", _CL100K, 8_191),
    # No public tokenizer: content-aware estimate with a margin.
    *(
        _e(pattern, family, window, _ESTIMATE_MARGIN)
        for family, windows in _ESTIMATED.items()
        for pattern, window in windows.items()
    ),
)
"""Model patterns in match order (first match wins)."""

_PROVIDER_DEFAULTS: dict[str, ModelEntry] = {
    "anthropic": _e("anthropic:*", _CLAUDE, 200_000, 0.20),
    "bedrock": _e("bedrock:*", _CLAUDE, 200_000, 0.20),
    "google": _e("google:*", _GEMINI, 1_048_576, 0.20),
    "google-gla": _e("google-gla:*", _GEMINI, 1_048_576, 0.20),
    "google-vertex": _e("google-vertex:*", _GEMINI, 1_048_576, 0.20),
    "gemini": _e("gemini:*", _GEMINI, 1_048_576, 0.20),
    "ollama": _e("ollama:*", _LOCAL, 8_192, 0.20),
    "lmstudio": _e("lmstudio:*", _LOCAL, 8_192, 0.20),
    "vllm": _e("vllm:*", _LOCAL, 32_768, 0.20),
    "local": _e("local:*", _LOCAL, 8_192, 0.20),
}
_KNOWN_PROVIDERS = frozenset(
    {
        *_PROVIDER_DEFAULTS,
        "openai",
        "openai-compatible",
        "openai-chat",
        "openai-responses",
        "azure",
        "openrouter",
        "groq",
        "mistral",
        "deepseek",
        "together",
        "fireworks",
        "huggingface",
        "cohere",
        "xai",
        "grok",
        "cerebras",
        "test",
        "scripted",
    }
)

DEFAULT_MODEL_INFO = ModelInfo(
    model=None, tokenizer=_O200K, context_window=128_000, safety_margin=0.0, pattern="(default)"
)
"""Used when no model is chosen: exact o200k_base, a 128k window."""

_FALLBACK = _e("*", "estimate:generic", 128_000, 0.25)


def normalize_model(model: str) -> tuple[str | None, str]:
    """Split ``provider:name`` into ``(provider, name)``; lower-case, vendor path dropped."""
    text = model.strip().lower()
    provider: str | None = None
    head, sep, tail = text.partition(":")
    if sep and head in _KNOWN_PROVIDERS:
        provider, text = head, tail
    if "/" in text:
        text = text.rsplit("/", 1)[1]
    return provider, text


def _match(name: str) -> ModelEntry | None:
    for entry in MODEL_TABLE:
        if fnmatch.fnmatchcase(name, entry.pattern):
            return entry
    return None


def model_info(model: str | None) -> ModelInfo:
    """Tokenizer, context window and safety margin for ``model``.

    Unknown models get a generic estimate (20% margin, 128k window) rather
    than an error: any OpenAI-compatible server can host any name.
    """
    if model is None or not model.strip():
        return DEFAULT_MODEL_INFO
    provider, name = normalize_model(model)
    entry = _match(name)
    if entry is None and provider is not None:
        # "mistral:7b" is an Ollama tag, not provider "mistral" + model "7b".
        entry = _match(model.strip().lower()) or _PROVIDER_DEFAULTS.get(provider)
    if entry is None:
        entry = _FALLBACK
    return ModelInfo(
        model=model,
        tokenizer=entry.tokenizer,
        context_window=entry.context_window,
        safety_margin=entry.safety_margin,
        pattern=entry.pattern,
    )


class CalibrationFactors(Protocol):
    """What :func:`counter_for_model` needs of a calibration (``tokens.Calibration`` is one).

    A protocol, so that the registry does not import ``calibration``, which imports it.
    """

    def factor(self, model: str) -> float:
        """The estimate factor learned for ``model`` (1.0 when never calibrated)."""
        ...


def counter_for_model(
    model: str | None, *, calibration: CalibrationFactors | None = None
) -> TokenCounter:
    """The token counter for ``model`` (exact when its tokenizer is public).

    With ``calibration``, estimates use the factor learned for this model from
    the provider's reported input tokens (exact counters ignore it).
    """
    info = model_info(model)
    if info.exact:
        return exact_counter(info.tokenizer)
    factor = 1.0 if calibration is None or model is None else calibration.factor(model)
    return EstimateCounter(info.family, safety_margin=info.safety_margin, factor=factor)
