"""Find the latest completed bootstrap_session in a Claude Code transcript (JSONL).

Scans from the end with ``mmap.rfind`` so a 50 MB transcript costs a
memory scan, not a JSON parse of every line. Only lines mentioning
``bootstrap_session`` are parsed; a matching tool_use's result is then found
by its id, forward from the call.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ScanState",
    "Verdict",
    "latest_bootstrap",
    "packet_verdict",
    "scan_backward",
    "scan_forward",
]

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


def _find_result(mm: mmap.mmap, tool_use_id: str, start: int, limit: int) -> dict[str, Any] | None:
    needle = tool_use_id.encode("utf-8")
    pos = mm.find(needle, start, limit)
    while pos >= 0:
        ls, le = _line_bounds(mm, pos, limit)
        for item in _items(_parse_line(mm[ls:le])):
            if item.get("type") == "tool_result" and item.get("tool_use_id") == tool_use_id:
                return item
        pos = mm.find(needle, le, limit)
    return None


@dataclass
class ScanState:
    """What a scan learned, up to ``offset`` (resumable when the transcript grows)."""

    offset: int
    latest: tuple[int, bool, str] | None = None
    """(position of the call, success, reason) of the latest call that has a result."""
    pending: list[tuple[str, int]] = field(default_factory=list)
    """Calls after ``latest`` still without a result: (tool_use id, position)."""


def _uses(mm: mmap.mmap, ls: int, le: int) -> list[tuple[str, int]]:
    found = []
    for item in _items(_parse_line(mm[ls:le])):
        name, tid = item.get("name"), item.get("id")
        if (
            item.get("type") == "tool_use"
            and isinstance(name, str)
            and name.endswith("bootstrap_session")
            and isinstance(tid, str)
            and tid
        ):
            found.append((tid, mm.find(tid.encode("utf-8"), ls, le)))
    return found


def _judge(result: dict[str, Any], transcript: Path) -> tuple[bool, str]:
    ok, reason = packet_verdict(result, transcript)
    return ok is True, reason


def scan_backward(mm: mmap.mmap, limit: int, transcript: Path) -> ScanState:
    """Scan ``[0, limit)`` from the end; stop at the latest call that has a result."""
    state = ScanState(offset=limit)
    end = limit
    while end > 0:
        pos = mm.rfind(_NEEDLE, 0, end)
        if pos < 0:
            break
        ls, le = _line_bounds(mm, pos, limit)
        end = ls
        for tid, where in reversed(_uses(mm, ls, le)):
            result = _find_result(mm, tid, le, limit)
            if result is None:
                state.pending.append((tid, where))
                continue
            ok, reason = _judge(result, transcript)
            state.latest = (where, ok, reason)
            return state
    return state


def scan_forward(mm: mmap.mmap, state: ScanState, limit: int, transcript: Path) -> ScanState:
    """Extend ``state`` with the bytes ``[state.offset, limit)`` appended since."""
    start = state.offset
    done: list[tuple[int, bool, str]] = []
    still: list[tuple[str, int]] = []
    for tid, where in state.pending:
        result = _find_result(mm, tid, start, limit)
        if result is None:
            still.append((tid, where))
        else:
            done.append((where, *_judge(result, transcript)))
    pos = mm.find(_NEEDLE, start, limit)
    while pos >= 0:
        ls, le = _line_bounds(mm, pos, limit)
        for tid, where in _uses(mm, ls, le):
            result = _find_result(mm, tid, le, limit)
            if result is None:
                still.append((tid, where))
            else:
                done.append((where, *_judge(result, transcript)))
        pos = mm.find(_NEEDLE, le, limit)
    latest = max([*done, *([state.latest] if state.latest else [])], default=None)
    pending = [p for p in still if latest is None or p[1] > latest[0]]
    return ScanState(offset=limit, latest=latest, pending=pending)


def _verdict(state: ScanState) -> Verdict:
    if state.latest is not None:
        return state.latest[1], state.latest[2]
    if state.pending:
        return None, "bootstrap_session was called but has no result yet"
    return None, "no bootstrap_session call in the transcript"


def latest_bootstrap(transcript: Path, cache_dir: Path | None = None) -> Verdict:
    """The verdict of the latest bootstrap_session call that has a result.

    With ``cache_dir``, the scan state is kept per transcript, so a later call
    only reads what was appended since (transcripts are append-only; a
    rewritten or truncated file is detected and scanned afresh).
    """
    try:
        handle = transcript.open("rb")
    except OSError as exc:
        return None, f"transcript unreadable: {exc.strerror or exc}"
    with handle:
        st = os.fstat(handle.fileno())
        if st.st_size == 0:
            return None, "transcript is empty"
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            limit = mm.rfind(b"\n") + 1  # complete lines only; the last may be mid-write
            cached = _load(cache_dir, transcript, st.st_ino, mm) if cache_dir else None
            if cached is None:
                state = scan_backward(mm, limit, transcript)
            else:
                state = scan_forward(mm, cached, limit, transcript)
            if cache_dir is not None:
                _save(cache_dir, transcript, st.st_ino, mm, state)
    return _verdict(state)


def _cache_file(cache_dir: Path, transcript: Path) -> Path:
    key = hashlib.sha256(str(transcript.resolve()).encode("utf-8")).hexdigest()[:40]
    return cache_dir / f"{key}.json"


def _tail(mm: mmap.mmap, offset: int) -> str:
    return hashlib.sha256(mm[max(0, offset - 512) : offset]).hexdigest()


def _safe_dir(cache_dir: Path) -> bool:
    try:
        cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = cache_dir.stat()
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


def _load(cache_dir: Path, transcript: Path, inode: int, mm: mmap.mmap) -> ScanState | None:
    if not _safe_dir(cache_dir):
        return None
    try:
        data = json.loads(_cache_file(cache_dir, transcript).read_text(encoding="utf-8"))
        offset = int(data["offset"])
        if data["inode"] != inode or offset > len(mm) or data["tail"] != _tail(mm, offset):
            return None
        latest = data["latest"]
        return ScanState(
            offset=offset,
            latest=(int(latest[0]), bool(latest[1]), str(latest[2])) if latest else None,
            pending=[(str(t), int(p)) for t, p in data["pending"]],
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def _save(cache_dir: Path, transcript: Path, inode: int, mm: mmap.mmap, state: ScanState) -> None:
    if not _safe_dir(cache_dir):
        return
    data = {
        "inode": inode,
        "offset": state.offset,
        "tail": _tail(mm, state.offset),
        "latest": list(state.latest) if state.latest else None,
        "pending": [list(p) for p in state.pending[-50:]],
    }
    target = _cache_file(cache_dir, transcript)
    try:
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".gate.")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(tmp, target)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


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
