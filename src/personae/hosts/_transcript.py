"""Find the latest completed bootstrap_session in a Claude Code transcript (JSONL).

Scans from the end with ``mmap.rfind`` so a 50 MB transcript costs a
memory scan, not a JSON parse of every line. Only lines mentioning
``bootstrap_session`` are parsed; a matching tool_use's result is then found
by its id, forward from the call.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["Verdict", "latest_bootstrap", "packet_verdict"]

_NEEDLE = b"bootstrap_session"
_PERSISTED = re.compile(r"Full output saved to:\s*(.+?)\s*$", re.MULTILINE)
_MAX_PERSISTED = 20_000_000

Verdict = tuple[bool | None, str]
"""(True: success, False: failed, None: no completed bootstrap found; reason)."""


def _items(obj: Any) -> list[dict[str, Any]]:
    if not isinstance(obj, dict):
        return []
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else obj.get("content")
    return [c for c in content if isinstance(c, dict)] if isinstance(content, list) else []


def _parse_line(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


def _line_bounds(mm: mmap.mmap, pos: int, size: int) -> tuple[int, int]:
    start = mm.rfind(b"\n", 0, pos) + 1
    end = mm.find(b"\n", pos)
    return start, size if end < 0 else end


def _find_result(mm: mmap.mmap, tool_use_id: str, start: int, size: int) -> dict[str, Any] | None:
    needle = tool_use_id.encode("utf-8")
    pos = mm.find(needle, start)
    while pos >= 0:
        ls, le = _line_bounds(mm, pos, size)
        for item in _items(_parse_line(mm[ls:le])):
            if item.get("type") == "tool_result" and item.get("tool_use_id") == tool_use_id:
                return item
        pos = mm.find(needle, le)
    return None


def latest_bootstrap(transcript: Path) -> Verdict:
    """The verdict of the latest bootstrap_session call that has a result."""
    try:
        handle = transcript.open("rb")
    except OSError as exc:
        return None, f"transcript unreadable: {exc.strerror or exc}"
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return None, "transcript is empty"
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            end = size
            pending = 0
            while True:
                pos = mm.rfind(_NEEDLE, 0, end)
                if pos < 0:
                    break
                ls, le = _line_bounds(mm, pos, size)
                end = ls
                uses = [
                    i
                    for i in _items(_parse_line(mm[ls:le]))
                    if i.get("type") == "tool_use"
                    and str(i.get("name", "")).endswith("bootstrap_session")
                    and isinstance(i.get("id"), str)
                ]
                for use in reversed(uses):
                    result = _find_result(mm, use["id"], le, size)
                    if result is None:
                        pending += 1
                        continue
                    return packet_verdict(result, transcript)
                if end == 0:
                    break
    if pending:
        return None, "bootstrap_session was called but has no result yet"
    return None, "no bootstrap_session call in the transcript"


def packet_verdict(result: dict[str, Any], transcript: Path | None = None) -> Verdict:
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
    except ValueError:
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
            except ValueError:
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
        if not resolved.is_relative_to(transcript.resolve().parent):
            return False, "persisted bootstrap_session output is outside the transcript folder"
        if resolved.stat().st_size > _MAX_PERSISTED:
            return False, "persisted bootstrap_session output is too large"
        return resolved.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False, "persisted bootstrap_session output is unreadable"
