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
