"""MindService: the mind tools as plain Python (no MCP here).

The MCP adapter (``personae.mind._mcp``) exposes these methods as tools; tests
and other code can call them directly.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from personae.errors import UsageError
from personae.layout import SESSION_ID
from personae.mind._flags import cautionary_flags
from personae.mind._tokens import count_tokens, counter_name, warm_up
from personae.mind.bootstraps import HostCall, host_session
from personae.mind.contract import Contract, load_contract
from personae.mind.index import Hit, MindIndex
from personae.mind.memory import INDEX_NAME, MemoryDir, parse_memory
from personae.mind.packet import (
    MAX_PACKET_CHARS,
    BootstrapPacket,
    JournalNote,
    MemoryCatalog,
    MindContext,
    bounded_context,
    build_packet,
)
from personae.mind.results import (
    MemoryFile,
    MemoryFileInfo,
    MemoryList,
    ObserveResult,
    RecallItem,
    RecallResult,
    RefreshResult,
    WriteResult,
)
from personae.mind.surprise import HIGH_SURPRISE, Surprise, score_surprise
from personae.security.redact import redact, redact_text
from personae.store.db import Store
from personae.store.mind import JournalEntry

__all__ = ["REFLECT_KINDS", "MindService", "ReflectKind"]

ReflectKind = Literal["user_said", "time_passed", "ambient", "internal"]
REFLECT_KINDS: tuple[str, ...] = ("user_said", "time_passed", "ambient", "internal")

_FACET = re.compile(r"^([A-Za-z_][\w-]{0,63}):(.{1,200})$")
_MAX_TEXT = 200_000
_RECALL_BUDGET = 1_200
_RESYNC_SECONDS = 10.0
"""recall/observe/list re-stat every file at most this often unless the folder changed."""
_CONTEXT_FILES = {
    "open_commitments": ("running_commitments.md", "commitments.md"),
    "recent_carry_forward": ("carry_forward.md", "recent_carry_forward.md"),
}
_CONTEXT_FACET = {"open_commitments": "commitments", "recent_carry_forward": "carry_forward"}
_PREDICTION_WINDOW = 200
"""Earlier results of the same tool read to find the ones with similar arguments."""


class MindService:
    """The mind: memory directory + prompt (contract) + store tables."""

    def __init__(
        self,
        memory_dir: Path,
        prompt: Path | None,
        store: Store,
        *,
        host: tuple[int, int] | None = None,
        scope: str | None = None,
    ) -> None:
        self.memory = MemoryDir(memory_dir)
        self.host = host
        """The host process (pid, start time) that started this server over stdio, if known."""
        self.scope = scope
        """The project bootstraps are recorded for (:func:`bootstrap_scope` of the store);
        ``None``: recorded for no project, so they unlock no hook gate."""
        if self.memory.exists():
            with contextlib.suppress(OSError):  # memory may hold private notes: 0700
                self.memory.make_private()
        self.prompt = prompt
        self.index = MindIndex(store)
        self._synced_at = 0.0
        self._tokenizer_warm = False
        self._dir_mtime: int | None = None
        self._served_hash: str | None = None

    # -- contract / bootstrap --------------------------------------------------------

    def contract(self) -> Contract:
        """The assembled mind contract (re-read on every call)."""
        return load_contract(self.prompt)

    def system_prompt(self, call: HostCall | None = None) -> str:
        """The contract text, or the error text when it does not assemble.

        An available contract counts as a bootstrap (the fallback the host files teach),
        recorded for the host's session of ``call``.
        """
        contract = self.contract()
        if contract.available:
            self._record(contract, call)
        self._served_hash = contract.hash
        return contract.text

    def refresh(self) -> RefreshResult:
        """Assemble the mind contract again from its files (after an edit) and return it.

        Says whether it changed since this server last handed one out. A refresh is not a
        bootstrap: it unlocks nothing. A contract too big for one tool result is shortened
        with a notice (get_system_prompt() has the whole text).
        """
        contract = self.contract()
        previous, self._served_hash = self._served_hash, contract.hash
        reasons = [] if contract.available else [f"mind contract unavailable: {contract.reason}"]
        text = contract.text
        if len(text) > MAX_PACKET_CHARS:
            text = text[:MAX_PACKET_CHARS] + (
                "\n\n[mind contract shortened; call get_system_prompt() for the full text]"
            )
            reasons.append("mind contract shortened; get_system_prompt() has the full text")
        return RefreshResult(
            mind_contract=text,
            mind_contract_available=contract.available,
            contract_hash=contract.hash,
            previous_hash=previous,
            changed=previous != contract.hash,
            sources=list(contract.sources),
            reasons=reasons,
        )

    def host_session(self, call: HostCall | None) -> str | None:
        """The host's session id for ``call`` (:func:`personae.mind.bootstraps.host_session`)."""
        if call is None:
            return None
        scope = self.scope

        def claimed(call_id: str) -> str | None:
            return None if scope is None else self.index.claimed_session(scope, call_id)

        return host_session(call, claimed)

    def _record(self, contract: Contract, call: HostCall | None) -> None:
        session = self.host_session(call)
        self.index.record_bootstrap(session, contract.hash, self.host, self.scope)

    def bootstrap(
        self,
        session_id: str | None,
        tool_names: Sequence[str],
        call: HostCall | None = None,
    ) -> BootstrapPacket:
        """Build the schema v1 packet; records the bootstrap when the contract is available.

        The bootstrap is recorded for the session the *host* names for ``call``, never for
        ``session_id`` (the model's argument: echoed in the packet when the host names none).
        """
        if session_id is not None and not SESSION_ID.fullmatch(session_id):
            raise UsageError(
                "session_id must be 1-200 characters of letters, digits and . : @ / _ -",
                field="session_id",
            )
        contract = self.contract()
        extra: list[str] = []
        if not self.memory.exists():
            extra.append(f"memory directory not found: {self.memory.root}")
        self.sync(force=True)
        total, counts, index_present = self.index.catalog(self.memory)
        session = self.host_session(call) if contract.available else None
        packet = build_packet(
            session_id=session or session_id,
            contract=contract,
            available_mind_tools=tool_names,
            context=self.context(sync=False),
            catalog=MemoryCatalog(
                total_count=total, index_present=index_present, category_counts=counts
            ),
            extra_reasons=extra,
            generated_at=_now(),
        )
        if contract.available:
            self.index.record_bootstrap(session, contract.hash, self.host, self.scope)
        self._served_hash = contract.hash
        if not self._tokenizer_warm:
            # Load the tokenizer for recall excerpts while the host reads the packet.
            self._tokenizer_warm = True
            warm_up()
        return packet

    # -- catalog ---------------------------------------------------------------------

    def sync(self, *, force: bool = False) -> None:
        """Refresh the catalog cache (cheap when nothing changed)."""
        now = time.monotonic()
        try:
            dir_mtime: int | None = os.stat(self.memory.root).st_mtime_ns
        except OSError:
            dir_mtime = None
        if not force and dir_mtime == self._dir_mtime and now - self._synced_at < _RESYNC_SECONDS:
            return
        self.index.sync(self.memory)
        self._synced_at = now
        self._dir_mtime = dir_mtime

    def context(self, *, sync: bool = True) -> MindContext:
        """Open commitments, carry-forward items, recent journal, last bootstrap."""
        if sync:
            self.sync()
        found: dict[str, list[str]] = {}
        for key, names in _CONTEXT_FILES.items():
            bodies = list(self.index.docs_by_name(self.memory, names).values())
            bodies += self.index.docs_by_facet(self.memory, "context", _CONTEXT_FACET[key])
            items: list[str] = []
            for body in bodies:
                items.extend(_bullets(body))
            found[key] = list(dict.fromkeys(items))
        journal = [
            JournalNote(id=j.id, kind=j.kind, text=j.text, created_at=j.created_at)
            for j in self.index.recent_journal(self.memory, 5)
        ]
        return bounded_context(
            MindContext(
                open_commitments=found["open_commitments"],
                recent_carry_forward=found["recent_carry_forward"],
                recent_journal=journal,
                last_bootstrap_at=self.index.last_bootstrap(),
            )
        )

    def list_memory_files(
        self, type: str | None = None, offset: int = 0, limit: int = 200
    ) -> MemoryList:
        """Memory files in the catalog (name, title, description, type), by name."""
        if offset < 0 or not 1 <= limit <= 1000:
            raise UsageError("offset must be >= 0 and limit between 1 and 1000", field="limit")
        self.sync()
        total, rows = self.index.files(self.memory, type=type, offset=offset, limit=limit)
        files = [MemoryFileInfo(name=n, title=t, description=d, type=ty) for n, t, d, ty in rows]
        return MemoryList(
            total_count=total, offset=offset, files=files, truncated=offset + len(files) < total
        )

    def read_memory_file(self, name: str) -> MemoryFile:
        """One memory file's full text and frontmatter fields."""
        text = redact_text(self.memory.read(name))  # a secret typed into a file by hand
        entry = parse_memory(name, text)
        return MemoryFile(
            name=name,
            title=entry.title,
            description=entry.description,
            type=entry.type,
            content=text,
        )

    def write_memory_file(self, name: str, content: str) -> WriteResult:
        """Write (create or replace) one memory file atomically and index it now.

        Secrets in ``content`` are redacted before anything is written.
        ``MEMORY.md`` and the other reserved names are refused.
        """
        content = redact_text(content)
        entry = self.memory.write(name, content)
        self.index.upsert(self.memory, entry)
        index_text = self.memory.read(INDEX_NAME)
        self.index.upsert(self.memory, parse_memory(INDEX_NAME, index_text))
        return WriteResult(
            name=name,
            type=entry.type,
            bytes=len(content.encode("utf-8")),
            index_updated=True,
        )

    # -- recall / journal ------------------------------------------------------------

    def recall(self, query: str, k: int = 5, facet: str | None = None) -> RecallResult:
        """bm25 search over memory files and the journal, excerpts within a token budget."""
        if not 1 <= k <= 50:
            raise UsageError("k must be between 1 and 50", field="k")
        parsed = _parse_facet(facet)
        self.sync()
        hits = self.index.search(self.memory, query, k=k, facet=parsed)
        items, used = _excerpts(hits, query, _RECALL_BUDGET)
        return RecallResult(
            query=query,
            facet=facet,
            results=items,
            token_budget=_RECALL_BUDGET,
            tokens_used=used,
            token_counter=counter_name(),
        )

    def observe(
        self, tool_name: str, args: Any, result: Any = None, *, excerpts: bool = True
    ) -> ObserveResult:
        """Record a tool call (and its result), secrets redacted; return memories, flags and,
        for a result, its surprise (see :mod:`personae.mind.surprise`).

        ``excerpts=False`` skips the memory excerpts (no tokenizer: the host hook's path).
        """
        if not tool_name or len(tool_name) > 200:
            raise UsageError("tool_name must be 1-200 characters", field="tool_name")
        args_text = args if isinstance(args, str) else dumps(args)
        result_text = (
            None if result is None else (result if isinstance(result, str) else dumps(result))
        )
        text = f"{tool_name} {args_text}" + ("" if result_text is None else f"\n{result_text}")
        _check_size(text)
        # Redacted before the journal stores it (and so before recall can return it).
        red_args, red_result = redact(args_text), redact(result_text or "")
        args_text = red_args.text
        result_text = None if result_text is None else red_result.text
        text = f"{tool_name} {args_text}" + ("" if result_text is None else f"\n{result_text}")
        surprise = Surprise(None, 0)
        if result_text is not None:  # measured before this result joins the journal
            earlier = self.index.tool_results(self.memory, tool_name, _PREDICTION_WINDOW)
            surprise = score_surprise(args_text, result_text, earlier)
        entry = JournalEntry(
            "tool_result" if result is not None else "tool_call",
            text,
            tool_name=tool_name,
            args=args_text,
            result=result_text,
        )
        jid, doc_id = self.index.add_journal(self.memory, entry)
        secret = red_args.changed or red_result.changed
        query = f"{tool_name} {args_text}"
        return self._answer(
            jid,
            entry.kind,
            query,
            doc_id,
            result_text,
            secret=secret,
            surprise=surprise,
            excerpts=excerpts,
        )

    def reflect(self, observation: str, kind: str) -> ObserveResult:
        """Record a non-tool signal, secrets redacted; return related memories and flags."""
        if kind not in REFLECT_KINDS:
            raise UsageError(
                f"kind must be one of {', '.join(REFLECT_KINDS)} (got {kind!r})", field="kind"
            )
        if not observation.strip():
            raise UsageError("observation must not be empty", field="observation")
        _check_size(observation)
        red = redact(observation)
        jid, doc_id = self.index.add_journal(self.memory, JournalEntry(kind, red.text))
        return self._answer(jid, kind, red.text, doc_id, None, secret=red.changed)

    def _answer(
        self,
        jid: int,
        kind: str,
        query: str,
        doc_id: int,
        result: str | None,
        *,
        secret: bool,
        surprise: Surprise | None = None,
        excerpts: bool = True,
    ) -> ObserveResult:
        self.sync()
        hits = [h for h in self.index.search(self.memory, query[:2000], k=3, exclude=doc_id)]
        items = _excerpts(hits, query, 600)[0] if excerpts else []
        flags = cautionary_flags(
            query, result=result, memory_hits=[(h.title, h.type) for h in hits], secret=secret
        )
        surprise = surprise or Surprise(None, 0)
        if surprise.score is not None and surprise.score > HIGH_SURPRISE:
            flags.append(
                f"surprise: {surprise.score} (above {HIGH_SURPRISE}): the result departs from "
                "what earlier calls predicted; stop and surface it to the user before continuing"
            )
        return ObserveResult(
            id=jid,
            kind=kind,
            relevant_memories=items,
            cautionary_flags=flags,
            surprise=surprise.score,
            surprise_basis=surprise.basis,
        )


def dumps(value: object) -> str:
    """Compact, deterministic JSON for journal fields."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _check_size(text: str) -> None:
    if len(text) > _MAX_TEXT:
        raise UsageError(f"input larger than {_MAX_TEXT} characters; summarize it first")


def _parse_facet(facet: str | None) -> tuple[str, str] | None:
    if facet is None or not facet.strip():
        return None
    match = _FACET.match(facet.strip())
    if match is None:
        raise UsageError(
            f"facet must look like key:value, e.g. type:user or project:portal (got {facet!r})",
            field="facet",
        )
    return match.group(1).lower(), match.group(2).strip().lower()


def _bullets(body: str) -> list[str]:
    items = []
    for line in body.splitlines():
        stripped = line.strip()
        if not stripped.startswith(("- ", "* ")):
            continue
        item = stripped[2:].strip()
        if item.lower().startswith("[x]"):
            continue
        if item.startswith("[ ]"):
            item = item[3:].strip()
        if item:
            items.append(item)
    return items


def _excerpts(hits: Sequence[Hit], query: str, budget: int) -> tuple[list[RecallItem], int]:
    if not hits:
        return [], 0
    words = [w.lower() for w in re.findall(r"\w+", query)]
    share = max(40, budget // len(hits))
    items: list[RecallItem] = []
    used = 0
    for hit in hits:
        source = hit.body if hit.body.strip() else hit.description
        excerpt = _window(source, words, share)
        tokens = count_tokens(excerpt)
        if used + tokens > budget:
            break
        used += tokens
        items.append(
            RecallItem(
                source=hit.source,
                name=hit.name,
                title=hit.title,
                type=hit.type,
                score=round(hit.score, 4),
                excerpt=excerpt,
                created_at=hit.created_at,
            )
        )
    return items, used


def _window(text: str, words: Sequence[str], budget: int) -> str:
    text = " ".join(text.split())
    lowered = text.lower()
    positions = [p for p in (lowered.find(w) for w in words if w) if p >= 0]
    start = max(0, min(positions) - 80) if positions else 0
    chars = budget * 3
    excerpt = text[start : start + chars]
    limit = max(1, budget - 2)  # room for the ellipses added below
    while excerpt and count_tokens(excerpt) > limit:
        excerpt = excerpt[: int(len(excerpt) * 0.85)]
    if start > 0:
        excerpt = "…" + excerpt[1:]
    if start + len(excerpt) < len(text) and excerpt:
        excerpt = excerpt[:-1] + "…"
    return excerpt
