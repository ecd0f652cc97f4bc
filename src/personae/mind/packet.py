"""The bootstrap packet (schema v1) and the typed results of the mind tools.

Pure: :func:`build_packet` takes already-gathered facts and returns the packet,
bounded to :data:`MAX_PACKET_CHARS` whatever the size of the memory. Clients
must ignore unknown fields; removing or renaming a required field means
``schema_version`` 2 (see docs/bootstrap.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from typing_extensions import TypedDict

from personae.mind.contract import Contract

__all__ = [
    "CATEGORY_LIMIT",
    "COGNITION_PROTOCOL",
    "HOST_LIMITATIONS",
    "MAX_PACKET_CHARS",
    "REQUIRED_KEYS",
    "BootstrapPacket",
    "DegradedMode",
    "JournalNote",
    "MemoryCatalog",
    "MindContext",
    "bounded_context",
    "build_packet",
    "packet_chars",
]

MAX_PACKET_CHARS = 40_000
"""Upper bound on the packet as JSON text (indented as the MCP SDK sends it)."""

CATEGORY_LIMIT = 40
"""At most this many categories are listed; the rest are summed under ``other``."""

_LIST_LIMIT = 20
_ITEM_CHARS = 300

REQUIRED_KEYS = (
    "schema_version",
    "required_first_call",
    "session_id",
    "mind_contract",
    "mind_contract_available",
    "available_mind_tools",
    "cognition_protocol",
    "context",
    "memory_catalog",
    "degraded_mode",
    "host_limitations",
)
"""Top-level keys every schema v1 packet has."""

COGNITION_PROTOCOL = (
    "Call bootstrap_session before the first substantive answer or external tool call.",
    "Use observe(tool_name, args) before and observe(tool_name, args, result) after external "
    "tool calls unless the host records them mechanically.",
    "Use reflect(observation, kind) for user_said, time_passed, ambient and internal signals.",
    "Use recall(query, k, facet) when bootstrap or observe shows relevant memory but the "
    "excerpt is not enough.",
    "Surface cautionary_flags from observe/reflect to the user before acting on them.",
    "When observe returns surprise above 0.7 (the result departs from what earlier calls "
    "predicted), stop and surface it to the user before continuing.",
    "After the mind contract's files change mid-session, call refresh_persona() and follow "
    "the contract it returns.",
    "Body rules (the host, its settings and hooks) win for security and tool use; mind rules "
    "win for continuity and voice where they do not conflict with body safety.",
    "If mind_contract_available is false, say the mind is degraded and do not impersonate "
    "the persona.",
)

HOST_LIMITATIONS = (
    "MCP server instructions are not reliable model context in Claude Code or Copilot CLI; "
    "host instruction files, tool descriptions and tool results are.",
    "Claude Code cuts server instructions and tool descriptions at 2,048 characters and "
    "SessionStart additionalContext over 10,000 characters.",
    "Tool results over about 25k tokens are saved to a file with a short preview; this "
    "packet stays under 40,000 characters.",
    "A PostToolUse hook (`personae hook post-tool-use`) can record body tools with observe "
    "mechanically, but not reflect, recall or text-only replies.",
)


class JournalNote(TypedDict):
    """A recent journal entry (text shortened)."""

    id: int
    kind: str
    text: str
    created_at: str


class MindContext(TypedDict):
    """The active context: what a session should carry forward."""

    open_commitments: list[str]
    recent_carry_forward: list[str]
    recent_journal: list[JournalNote]
    last_bootstrap_at: str | None


class MemoryCatalog(TypedDict):
    """A summary of the memory directory (never file names)."""

    total_count: int
    index_present: bool
    category_counts: dict[str, int]


class DegradedMode(TypedDict):
    """Why the mind is (or is not) degraded."""

    mind_contract_available: bool
    reasons: list[str]


class BootstrapPacket(TypedDict):
    """The bootstrap_session() result, schema v1."""

    schema_version: int
    required_first_call: str
    session_id: str | None
    mind_contract: str
    mind_contract_available: bool
    available_mind_tools: list[str]
    cognition_protocol: list[str]
    context: MindContext
    memory_catalog: MemoryCatalog
    degraded_mode: DegradedMode
    host_limitations: list[str]
    contract_hash: str
    generated_at: str


def packet_chars(packet: Mapping[str, object]) -> int:
    """Length of the packet as the SDK serializes it (JSON, indent 2)."""
    return len(json.dumps(packet, indent=2))


def _short(items: Sequence[str]) -> list[str]:
    out = []
    for item in list(items)[:_LIST_LIMIT]:
        text = " ".join(item.split())
        out.append(text if len(text) <= _ITEM_CHARS else text[: _ITEM_CHARS - 1] + "…")
    return out


def _categories(counts: Mapping[str, int]) -> dict[str, int]:
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    kept: dict[str, int] = {}
    for name, count in ordered[:CATEGORY_LIMIT]:
        kept[name[:60]] = kept.get(name[:60], 0) + count
    rest = sum(v for _, v in ordered[CATEGORY_LIMIT:])
    if rest:
        kept["other"] = kept.get("other", 0) + rest
    return kept


def bounded_context(context: MindContext) -> MindContext:
    """``context`` with at most 20 items per list, each at most 300 characters."""
    return MindContext(
        open_commitments=_short(context["open_commitments"]),
        recent_carry_forward=_short(context["recent_carry_forward"]),
        recent_journal=[
            JournalNote(
                id=n["id"],
                kind=n["kind"],
                text=_short([n["text"]])[0] if n["text"] else "",
                created_at=n["created_at"],
            )
            for n in context["recent_journal"][:10]
        ],
        last_bootstrap_at=context["last_bootstrap_at"],
    )


def build_packet(
    *,
    session_id: str | None,
    contract: Contract,
    available_mind_tools: Sequence[str],
    context: MindContext,
    catalog: MemoryCatalog,
    extra_reasons: Sequence[str] = (),
    generated_at: str,
) -> BootstrapPacket:
    """Assemble the schema v1 packet, bounded to MAX_PACKET_CHARS.

    ``catalog`` counts every category; the packet lists at most
    :data:`CATEGORY_LIMIT` of them (the rest summed under ``other``).
    """
    mind_contract, mind_contract_available = contract.text, contract.available
    reasons: list[str] = []
    if not mind_contract_available:
        reasons.append(
            "mind contract unavailable" + (f": {contract.reason}" if contract.reason else "")
        )
    reasons.extend(extra_reasons)
    context = bounded_context(context)
    packet = BootstrapPacket(
        schema_version=1,
        required_first_call="bootstrap_session",
        session_id=session_id,
        mind_contract=mind_contract,
        mind_contract_available=mind_contract_available,
        available_mind_tools=sorted(set(available_mind_tools)),
        cognition_protocol=list(COGNITION_PROTOCOL),
        context=context,
        memory_catalog=MemoryCatalog(
            total_count=catalog["total_count"],
            index_present=catalog["index_present"],
            category_counts=_categories(catalog["category_counts"]),
        ),
        degraded_mode=DegradedMode(
            mind_contract_available=mind_contract_available, reasons=reasons
        ),
        host_limitations=list(HOST_LIMITATIONS),
        contract_hash=contract.hash,
        generated_at=generated_at,
    )
    if packet_chars(packet) > MAX_PACKET_CHARS:
        notice = (
            "\n\n[mind contract truncated to fit the bootstrap packet; call get_system_prompt() "
            "for the full text]"
        )
        packet["degraded_mode"]["reasons"].append(
            "mind contract truncated in the packet; get_system_prompt() has the full text"
        )
        text = mind_contract
        over = packet_chars(packet) - MAX_PACKET_CHARS
        while over > 0 and text:
            # JSON escaping can make text longer than its length: cut generously, re-check.
            text = text[: max(0, len(text) - over - len(notice) - 64)]
            packet["mind_contract"] = text + notice
            over = packet_chars(packet) - MAX_PACKET_CHARS
        if over > 0:
            packet["context"]["recent_journal"] = []
    return packet
