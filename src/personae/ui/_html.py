"""Small HTML helpers: escaping, the page layout, badges, durations, token counts.

Every value that reaches a page goes through :func:`h` (or is built from
numbers); pages never interpolate raw text.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from personae.store.status import RunStatus
from personae.telemetry.inputcount import input_count
from personae.telemetry.runtree import parse_time

__all__ = ["badge", "call_tokens", "duration", "h", "layout", "short", "tokens", "url"]

RUN_TONES: dict[RunStatus, str] = {
    RunStatus.DONE: "good",
    RunStatus.PARTIAL: "warn",
    RunStatus.RUNNING: "warn",
    RunStatus.FAILED: "bad",
    RunStatus.CRASHED: "bad",
    RunStatus.CANCELLED: "bad",
}
"""The tone of each run status (every member: a new one must be given its tone)."""

_GOOD = frozenset({"success", "approved", "full", "pinned", "ok", "high"})
_BAD = frozenset({"failure", "rejected", "dropped", "removed", "none"})
_WARN = frozenset({"pending", "medium", "low", "evicted", "skipped"})
"""The tones of the other words a badge shows (a sub-agent's or handover's status,
a verdict, a section's fate, a confidence)."""

_RUN_WORDS: dict[str, str] = {status.value: tone for status, tone in RUN_TONES.items()}


def h(value: Any) -> str:
    """HTML-escape ``value`` (quotes too: safe in attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def url(*parts: Any) -> str:
    """A path from parts, each percent-encoded (``url("runs", id)`` -> ``/runs/<id>``)."""
    return "/" + "/".join(quote(str(p), safe="") for p in parts)


def short(value: Any, limit: int = 160) -> str:
    """One line of at most ``limit`` characters (not escaped)."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def badge(text: Any, tone: str | None = None) -> str:
    """A coloured label; the tone follows the word (done, failed, cut ...) unless given."""
    word = str(text)
    if tone is None:
        low = word.lower()
        if low in _RUN_WORDS:
            tone = _RUN_WORDS[low]
        elif low in _GOOD:
            tone = "good"
        elif low in _BAD:
            tone = "bad"
        elif low in _WARN or "cut" in low or "cap" in low or "budget" in low:
            tone = "warn"
        else:
            tone = "plain"
    return f'<span class="badge {h(tone)}">{h(word)}</span>'


def duration(start: str | None, end: str | None) -> str:
    """``1.2 s``, ``3 min 4 s`` or ``-``; an open run counts up to now."""
    begin = parse_time(start)
    if begin is None:
        return "-"
    finish = parse_time(end) or datetime.now(UTC)
    seconds = max(0.0, (finish - begin).total_seconds())
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s"


def tokens(usage: dict[str, Any]) -> str:
    """``1,234 in / 56 out`` from a usage dict (``-`` when it has no counts)."""
    given = [usage.get(k) for k in ("input_tokens", "output_tokens")]
    if not any(isinstance(v, int) for v in given):
        return "-"
    inp, out = (v if isinstance(v, int) else 0 for v in given)
    return f"{inp:,} in / {out:,} out"


def call_tokens(usage: dict[str, Any], *, long: bool = False) -> str:
    """One model call's tokens: the input figure with our count's drift, and the output.

    ``1,234 in (ours +5.4%) / 56 out``; ``long``: the figure's source and our counter too.
    """
    count = input_count(usage)
    out = usage.get("output_tokens")
    head = f"{count.text()} in" if long and count.figure is not None else count.short()
    return f"{head} / {out:,} out" if isinstance(out, int) else head


def layout(title: str, body: str, *, crumbs: list[tuple[str, str]] | None = None) -> str:
    """A whole page: head (stylesheet and script from ``/static``), breadcrumbs, body."""
    trail = "".join(f'<a href="{h(href)}">{h(label)}</a> / ' for href, label in (crumbs or []))
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{h(title)} · personae</title>"
        '<link rel="stylesheet" href="/static/app.css">'
        '<script src="/static/app.js" defer></script></head>'
        '<body><header><a class="brand" href="/">personae</a>'
        '<nav><a href="/">runs</a><a href="/chains">chains</a></nav>'
        '<span class="ro">read-only · 127.0.0.1</span></header>'
        f'<main><p class="crumbs">{trail}<b>{h(title)}</b></p>{body}</main></body></html>'
    )
