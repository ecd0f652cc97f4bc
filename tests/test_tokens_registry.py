"""Model registry: names (with provider prefixes) -> tokenizer, window, margin."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from personae.models.resolve import PROVIDERS
from personae.tokens import EstimateCounter, ExactCounter, counter_for_model, model_info
from personae.tokens.base import TokenCounter
from personae.tokens.exact import EXACT_ENCODINGS
from personae.tokens.registry import MODEL_TABLE, normalize_model


@pytest.mark.parametrize(
    ("model", "tokenizer"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai:gpt-4o", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("o1", "o200k_base"),
        ("o1-mini", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("openai:gpt-5-mini", "o200k_base"),
        ("GPT-4O", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("openai:gpt-3.5-turbo-0125", "cl100k_base"),
        ("anthropic:claude-sonnet-4-5", "estimate:claude"),
        ("claude-3-5-haiku-latest", "estimate:claude"),
        ("anthropic:some-future-model", "estimate:claude"),
        ("google-gla:gemini-2.5-pro", "estimate:gemini"),
        ("ollama:llama3.1:8b", "estimate:local"),
        ("llama3.2", "estimate:local"),
        ("qwen2.5-coder:7b", "estimate:local"),
        ("mistral:7b", "estimate:local"),
        ("mistral:mistral-large-latest", "estimate:local"),
        ("meta-llama/Llama-3.1-8B-Instruct", "estimate:local"),
        ("ollama:whatever", "estimate:local"),
        ("my-custom-model", "estimate:generic"),
    ],
)
def test_model_tokenizers(model: str, tokenizer: str) -> None:
    info = model_info(model)
    assert info.tokenizer == tokenizer
    assert info.model == model
    counter = counter_for_model(model)
    assert isinstance(counter, TokenCounter)
    assert counter.exact == info.exact == (tokenizer in EXACT_ENCODINGS)
    assert counter.name == tokenizer


def test_none_means_o200k_exact() -> None:
    counter = counter_for_model(None)
    assert isinstance(counter, ExactCounter)
    assert counter.name == "o200k_base"
    info = model_info(None)
    assert info.exact and info.safety_margin == 0.0 and info.context_window > 0
    assert model_info("  ").tokenizer == "o200k_base"


def test_windows_and_margins() -> None:
    assert model_info("gpt-4o").context_window == 128_000
    assert model_info("gpt-4").context_window == 8_192
    assert model_info("gpt-4.1").context_window == 1_047_576
    assert model_info("claude-opus-4-1").context_window == 200_000
    assert model_info("gpt-4o").safety_margin == 0.0
    claude = counter_for_model("claude-opus-4-1")
    assert isinstance(claude, EstimateCounter)
    assert claude.safety_margin == model_info("claude-opus-4-1").safety_margin == 0.20
    assert model_info("my-custom-model").safety_margin >= 0.2


def test_table_is_consistent_data() -> None:
    patterns = [entry.pattern for entry in MODEL_TABLE]
    assert len(patterns) == len(set(patterns))
    for entry in MODEL_TABLE:
        assert entry.context_window > 0
        exact = entry.tokenizer in EXACT_ENCODINGS
        assert exact or entry.tokenizer.startswith("estimate:")
        assert (entry.safety_margin == 0.0) == exact, entry
        assert entry.pattern == entry.pattern.lower()


def test_normalize_model() -> None:
    assert normalize_model("OpenAI:GPT-4o") == ("openai", "gpt-4o")
    assert normalize_model("ollama:llama3.1:8b") == ("ollama", "llama3.1:8b")
    assert normalize_model("openrouter:anthropic/claude-3.5-sonnet") == (
        "openrouter",
        "claude-3.5-sonnet",
    )
    assert normalize_model("llama3.1:8b") == (None, "llama3.1:8b")


def test_exact_counters_are_shared() -> None:
    assert counter_for_model("gpt-4o") is counter_for_model("openai:o3")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_provider_a_run_takes_is_known_to_the_registry(provider: str) -> None:
    assert normalize_model(f"{provider}:gpt-4o") == (provider, "gpt-4o")


def test_an_openai_compatible_openai_name_counts_like_openai() -> None:
    compatible, openai = model_info("openai-compatible:gpt-4o"), model_info("openai:gpt-4o")
    assert compatible.tokenizer == openai.tokenizer == "o200k_base"
    assert (compatible.context_window, compatible.safety_margin) == (
        openai.context_window, openai.safety_margin,
    )  # fmt: skip


@pytest.mark.parametrize(
    "make", [lambda: ExactCounter("o200k_base"), lambda: EstimateCounter("claude", factor=1.2)]
)
def test_a_counter_keeps_its_name_and_exactness_and_copies_and_pickles(
    make: Callable[[], TokenCounter],
) -> None:
    """A counter's name and exactness are set once: assigning either raises, and a copy or
    an unpickled counter has them and counts the same."""
    import copy
    import pickle

    counter = make()
    for attr, value in (("name", "other"), ("exact", not counter.exact)):
        with pytest.raises(AttributeError, match=f"{attr} cannot be changed"):
            setattr(counter, attr, value)
    for clone in (copy.copy(counter), pickle.loads(pickle.dumps(counter))):
        assert (clone.name, clone.exact) == (counter.name, counter.exact)
        assert clone.count("one two three") == counter.count("one two three")
