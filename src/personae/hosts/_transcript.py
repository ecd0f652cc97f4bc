"""Find the latest completed unlock call in a Claude Code transcript (JSONL), fast and safely.

The transcript is opened without blocking (a FIFO or device is refused, never
read), memory-mapped and scanned backward line by line under a deadline. Only
an assistant-role ``tool_use`` whose name is exactly one of the configured
unlock tools (``mcp__personae__bootstrap_session``, or the taught fallback
``mcp__personae__get_system_prompt``) counts, and only with its
``tool_result`` in a later user-role entry. Result ids are collected on the
way back (results come after their calls), so 20,000 unanswered calls cost
one pass, not 20,000 forward searches.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import stat
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

__all__ = ["PacketVerdict", "latest_bootstrap", "packet_verdict", "read_capped"]

PacketVerdict = tuple[bool | None, str]
"""(True: success, False: failed, None: no completed unlock call found; reason)."""

_PERSISTED = re.compile(r"Full output saved to:\s*(.+?)\s*$", re.MULTILINE)
_MAX_PERSISTED = 20_000_000
_RESULT_MARK = b'"tool_result"'
_RESULT_ID = re.compile(rb'"tool_use_id"\s*:\s*"([^"\\]{1,200})"')
_ID = re.compile(rb'"id"\s*:\s*"([^"\\]{1,200})"')
_CHECK_EVERY = 128
"""Lines between deadline checks."""


def read_capped(path: Path, max_bytes: int) -> bytes | str:
    """The bytes of a regular file up to ``max_bytes``, or why not (never blocks)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except (OSError, ValueError) as exc:
        return f"unreadable: {getattr(exc, 'strerror', None) or exc}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        if info.st_size > max_bytes:
            return f"larger than {max_bytes} bytes"
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(max_bytes + 1)[:max_bytes]
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    finally:
        os.close(fd)


def _parse(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _entry(obj: Any, role: str) -> list[dict[str, Any]]:
    """Content items of a transcript entry, only when the entry is of ``role``."""
    if not isinstance(obj, dict):
        return []
    message = obj.get("message")
    if not isinstance(message, dict):
        return []
    kind, actual = obj.get("type"), message.get("role")
    # Both markers, when present, must say ``role``; at least one must be present.
    if kind not in (role, None) or actual not in (role, None) or kind is actual is None:
        return []
    content = message.get("content")
    return [c for c in content if isinstance(c, dict)] if isinstance(content, list) else []


def _calls(obj: Any, unlock: Collection[str]) -> list[tuple[str, str]]:
    """(tool_use id, name) of the unlock calls in an assistant entry, in order."""
    return [
        (item["id"], item["name"])
        for item in _entry(obj, "assistant")
        if item.get("type") == "tool_use"
        and item.get("name") in unlock
        and isinstance(item.get("id"), str)
        and item["id"]
    ]


def _result(obj: Any, tool_use_id: str) -> dict[str, Any] | None:
    for item in _entry(obj, "user"):
        if item.get("type") == "tool_result" and item.get("tool_use_id") == tool_use_id:
            return item
    return None


def latest_bootstrap(
    transcript: Path, unlock: Collection[str], *, deadline: float | None = None
) -> PacketVerdict:
    """The verdict of the latest unlock call in ``transcript`` that has a result.

    ``unlock`` holds the exact tool names that count; ``deadline`` is a
    ``time.monotonic()`` value after which the scan gives up (verdict ``None``).
    """
    try:
        fd = os.open(transcript, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except (OSError, ValueError) as exc:
        return None, f"transcript unreadable: {getattr(exc, 'strerror', None) or exc}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "transcript is not a regular file; refused"
        if info.st_size == 0:
            return None, "transcript is empty"
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as mm:
            return _scan(mm, transcript, unlock, deadline)
    except (OSError, ValueError) as exc:
        return None, f"transcript unreadable: {getattr(exc, 'strerror', None) or exc}"
    finally:
        os.close(fd)


def _scan(
    mm: mmap.mmap, transcript: Path, unlock: Collection[str], deadline: float | None
) -> PacketVerdict:
    """Visit, from the end, only the lines holding a tool result or an unlock call name."""
    names = [json.dumps(n).encode() for n in unlock]
    markers = [_RESULT_MARK, *names]
    limit = mm.rfind(b"\n") + 1  # complete lines only; the last may be mid-write
    # Latest position of each marker not yet visited (each byte is searched once).
    found = {m: mm.rfind(m, 0, limit) for m in markers}
    results: dict[str, tuple[int, int]] = {}
    pending = visited = 0
    while (top := max(found.values())) >= 0:
        visited += 1
        if deadline is not None and visited % _CHECK_EVERY == 0 and time.monotonic() > deadline:
            return None, "transcript too large to scan within the gate's time budget"
        start = mm.rfind(b"\n", 0, top) + 1
        end = mm.find(b"\n", top, limit)
        if found[_RESULT_MARK] >= start:
            for match in _RESULT_ID.finditer(mm, start, end):  # type: ignore[call-overload]
                results.setdefault(match.group(1).decode("utf-8", "replace"), (start, end))
        if any(found[n] >= start for n in names):
            verdict = _line_verdict(mm, (start, end), results, unlock, transcript)
            if verdict is not None:
                return verdict
            pending += 1
        for marker, at in found.items():
            if at >= start:
                found[marker] = mm.rfind(marker, 0, start)
    if pending:
        return None, f"{pending} transcript line(s) with unlock calls have no result yet"
    return None, "no bootstrap_session call in the transcript"


def _line_verdict(
    mm: mmap.mmap,
    line: tuple[int, int],
    results: dict[str, tuple[int, int]],
    unlock: Collection[str],
    transcript: Path,
) -> PacketVerdict | None:
    """The verdict of the latest unlock call on ``line`` that has a result, else ``None``."""
    ids = {m.group(1).decode("utf-8", "replace") for m in _ID.finditer(mm, *line)}  # type: ignore[call-overload]
    if not ids & results.keys():
        return None  # no call on this line has a result yet: skip the JSON parse
    for tool_id, name in reversed(_calls(_parse(mm[line[0] : line[1]]), unlock)):
        where = results.get(tool_id)
        item = None if where is None else _result(_parse(mm[where[0] : where[1]]), tool_id)
        if item is not None:
            return _judge(name, item, transcript)
    return None


def _judge(name: str, item: dict[str, Any], transcript: Path) -> PacketVerdict:
    if name.endswith("get_system_prompt"):
        return _prompt_verdict(item)
    return packet_verdict(item, transcript)


def _prompt_verdict(result: dict[str, Any]) -> PacketVerdict:
    if result.get("is_error") is True:
        return False, "get_system_prompt returned an error"
    texts = _texts(result.get("content"))
    text = texts[0].strip() if texts else ""
    try:
        wrapped = json.loads(text)
        if isinstance(wrapped, dict) and isinstance(wrapped.get("result"), str):
            text = wrapped["result"].strip()
    except ValueError:
        pass
    if not text:
        return False, "get_system_prompt result is empty"
    if text.startswith("ERROR"):
        return False, "get_system_prompt reports the mind contract unavailable (mind degraded)"
    return True, "get_system_prompt returned the mind contract (transcript)"


def packet_verdict(result: dict[str, Any], transcript: Path | None = None) -> PacketVerdict:
    """Judge one tool_result item: success only for a packet with mind_contract_available true."""
    if result.get("is_error") is True:
        return False, "bootstrap_session returned an error"
    texts = _texts(result.get("content"))
    if not texts:
        return False, "bootstrap_session result is empty"
    reasons = []
    for text in texts:
        ok, reason = _judge_text(text, transcript)
        if ok:
            return True, reason
        reasons.append(reason)
    return False, reasons[0]


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, dict):
        return [json.dumps(content)]
    if isinstance(content, list):
        return [
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
    return []


def _judge_text(text: str, transcript: Path | None) -> tuple[bool, str]:
    stripped = text.strip()
    if stripped.startswith("<persisted-output>"):
        loaded = _persisted(stripped, transcript)
        if isinstance(loaded, tuple):
            return loaded
        stripped = loaded.strip()
    try:
        packet: Any = json.loads(stripped)
    except (ValueError, RecursionError):
        return False, "bootstrap_session result is not JSON"
    if isinstance(packet, list) and transcript is not None:
        # A persisted file may hold the content blocks themselves.
        verdicts = [_judge_text(t, None) for t in _texts(packet)]
        ok = [v for v in verdicts if v[0]]
        return ok[0] if ok else (verdicts[0] if verdicts else (False, "empty content blocks"))
    if isinstance(packet, dict) and "result" in packet and "schema_version" not in packet:
        inner = packet["result"]
        if isinstance(inner, str):
            try:
                packet = json.loads(inner)
            except (ValueError, RecursionError):
                return False, "bootstrap_session result wrapper does not hold JSON"
        else:
            packet = inner
    if not isinstance(packet, dict) or "schema_version" not in packet:
        return False, "bootstrap_session result is not a bootstrap packet"
    if packet.get("mind_contract_available") is not True:
        return False, "bootstrap packet has mind_contract_available false (mind degraded)"
    return True, "bootstrap_session succeeded (transcript)"


def _persisted(text: str, transcript: Path | None) -> str | tuple[bool, str]:
    match = _PERSISTED.search(text)
    if match is None:
        return False, "persisted bootstrap_session output has no file path"
    path = Path(match.group(1))
    if transcript is None:
        return False, "persisted bootstrap_session output cannot be located"
    if not path.is_absolute():
        path = transcript.parent / path
    try:
        resolved = path.resolve()
        inside = resolved.is_relative_to(transcript.resolve().parent)
    except (OSError, ValueError):
        return False, "persisted bootstrap_session output cannot be located"
    if not inside:
        return False, "persisted bootstrap_session output is outside the transcript folder"
    data = read_capped(resolved, _MAX_PERSISTED)
    if isinstance(data, str):
        return False, f"persisted bootstrap_session output is {data}"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return False, "persisted bootstrap_session output is not UTF-8"
