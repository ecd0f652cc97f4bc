"""Typed results of the mind tools (structured content on the MCP wire)."""

from __future__ import annotations

from typing_extensions import TypedDict

__all__ = [
    "MemoryFile",
    "MemoryFileInfo",
    "MemoryList",
    "ObserveResult",
    "RecallItem",
    "RecallResult",
    "RefreshResult",
    "WriteResult",
]


class RecallItem(TypedDict):
    """One recalled memory or journal entry with an excerpt."""

    source: str
    """``memory`` (a memory file) or ``journal`` (an observe/reflect record)."""
    name: str
    title: str
    type: str
    score: float
    excerpt: str
    created_at: str


class RecallResult(TypedDict):
    """The answer of recall()."""

    query: str
    facet: str | None
    results: list[RecallItem]
    token_budget: int
    tokens_used: int
    token_counter: str


class ObserveResult(TypedDict):
    """The answer of observe() and reflect()."""

    id: int
    kind: str
    relevant_memories: list[RecallItem]
    cautionary_flags: list[str]
    surprise: float | None
    """How far a tool result departs from the results recorded earlier for the same tool
    with similar arguments: 0 as predicted, 1 nothing like it; ``None`` when nothing
    predicted it (no result given, or no similar earlier call). Above 0.7: stop and
    surface it to the user before continuing."""
    surprise_basis: int
    """How many earlier results the surprise was measured against."""


class RefreshResult(TypedDict):
    """The answer of refresh_persona(): the mind contract assembled again from its files."""

    mind_contract: str
    mind_contract_available: bool
    contract_hash: str
    previous_hash: str | None
    """The hash this server last handed out (bootstrap, fallback or refresh), if any."""
    changed: bool
    """The contract differs from the one last handed out (always true for the first)."""
    sources: list[str]
    """Files that went into the contract, relative to the prompt's folder."""
    reasons: list[str]
    """Why the contract is unavailable or shortened (empty when it is whole)."""


class MemoryFileInfo(TypedDict):
    """Catalog data of one memory file."""

    name: str
    title: str
    description: str
    type: str


class MemoryList(TypedDict):
    """The answer of list_memory_files()."""

    total_count: int
    offset: int
    files: list[MemoryFileInfo]
    truncated: bool


class MemoryFile(TypedDict):
    """The answer of read_memory_file()."""

    name: str
    title: str
    description: str
    type: str
    content: str


class WriteResult(TypedDict):
    """The answer of write_memory_file()."""

    name: str
    type: str
    bytes: int
    index_updated: bool
