"""What a batch shows while it runs: a progress line, plain lines, or JSON events.

``tty``: one line redrawn in place (a bar, done/failed/running, an ETA from the
pace of this run); ``plain`` (output piped): one line per finished task;
``json``: one JSON object per event on stdout. Called from executor threads.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from typing import Any, Literal, TextIO

__all__ = ["Progress", "format_eta"]

Mode = Literal["tty", "plain", "json"]


def format_eta(seconds: float | None) -> str:
    """``1:05:09``, ``4:07`` or ``--`` when unknown."""
    if seconds is None:
        return "--"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


class Progress:
    """Counts of a batch run, shown on ``stream`` in ``mode``."""

    def __init__(self, mode: Mode, stream: TextIO, out: TextIO) -> None:
        self.mode = mode
        self.stream = stream
        """Where the progress line and plain lines go (stderr)."""
        self.out = out
        """Where JSON events go (stdout)."""
        self.total = self.skipped = self.ok = self.failed = 0
        self.running: set[str] = set()
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._drawn = 0.0

    def _emit(self, event: dict[str, Any]) -> None:
        self.out.write(json.dumps(event) + "\n")
        self.out.flush()

    def begin(self, total: int, skipped: int) -> None:
        """The batch has ``total`` tasks, ``skipped`` of them done by an earlier run."""
        with self._lock:
            self.total, self.skipped = total, skipped
            self._start = time.monotonic()
            if self.mode == "json":
                self._emit({"event": "begin", "total": total, "skipped": skipped})
            elif self.mode == "plain":
                self.stream.write(f"batch: {total} tasks, {skipped} already done\n")
            self._draw(force=True)

    def started(self, key: str) -> None:
        """A task's child started."""
        with self._lock:
            self.running.add(key)
            if self.mode == "json":
                self._emit({"event": "start", "id": key})
            self._draw()

    def finished(self, row: dict[str, Any]) -> None:
        """A task ended (its result line is written)."""
        with self._lock:
            self.running.discard(row["id"])
            if row["status"] == "failure":
                self.failed += 1
            else:
                self.ok += 1
            if self.mode == "json":
                self._emit({"event": "done", **row})
            elif self.mode == "plain":
                self.stream.write(
                    f"[{row['id']}] {row['status']} after {row['attempts']} attempt(s), "
                    f"{row['duration']:.1f}s ({self._done()}/{self.total})\n"
                )
                self.stream.flush()
            self._draw(force=True)

    def _done(self) -> int:
        return self.skipped + self.ok + self.failed

    def eta(self) -> float | None:
        """Seconds left at this run's pace (``None`` before the first task ends)."""
        finished = self.ok + self.failed
        left = self.total - self._done()
        if finished == 0:
            return None if left else 0.0
        return (time.monotonic() - self._start) / finished * left

    def line(self, width: int) -> str:
        """The progress line (fits ``width`` columns)."""
        counts = (
            f" {self._done()}/{self.total} done, {self.failed} failed, "
            f"{len(self.running)} running, ETA {format_eta(self.eta())}"
        )
        room = min(30, width - len(counts) - 2)
        if room < 5:
            return counts.strip()[: max(1, width - 1)]
        filled = room * self._done() // max(1, self.total)
        return "[" + "#" * filled + "." * (room - filled) + "]" + counts

    def _draw(self, *, force: bool = False) -> None:
        if self.mode != "tty":
            return
        now = time.monotonic()
        if not force and now - self._drawn < 0.1:
            return
        self._drawn = now
        width = shutil.get_terminal_size((80, 24)).columns
        self.stream.write("\r" + self.line(width) + "\x1b[K")
        self.stream.flush()

    def end(self, results: str) -> None:
        """The batch is over; ``results`` is the result file."""
        with self._lock:
            summary = {
                "event": "end", "total": self.total, "skipped": self.skipped, "ok": self.ok,
                "failed": self.failed, "results": results,
                "seconds": round(time.monotonic() - self._start, 3),
            }  # fmt: skip
            if self.mode == "json":
                self._emit(summary)
                return
            if self.mode == "tty":
                self._draw(force=True)
                self.stream.write("\n")
            self.stream.write(
                f"batch: {self.ok} ok, {self.failed} failed, {self.skipped} skipped "
                f"(done before); results: {results}\n"
            )
            self.stream.flush()
