"""The pure fitting function: caps, then truncation by priority, then exact verification.

Every piece is counted once; cuts use an interpolation search on cut points (see
``_textcut``); the whole rendered prompt is counted only to verify the result
(and, in the rare case that tokens merged across a section boundary, to
refit once with the overrun taken off).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from personae.context._textcut import count_small, cut_text, outline
from personae.context.history import fit_history
from personae.context.messages import ChatMessage, Unit
from personae.context.render import SEPARATOR, close_tag, open_tag, render_sections
from personae.context.spec import SectionSpec, Truncation
from personae.errors import BudgetExceededError
from personae.tokens.base import TokenCounter

__all__ = ["FitResult", "FittedSection", "SectionContent", "fit"]


@dataclass(frozen=True)
class SectionContent:
    """One section's input to fitting (content already escaped)."""

    spec: SectionSpec
    """The section's spec."""
    text: str | None = None
    """Text content (text sources)."""
    units: tuple[Unit, ...] = ()
    """Exchanges (the messages source)."""
    costs: tuple[tuple[int, ...], ...] = ()
    """Rendered cost of each message of each unit (counted once)."""
    earlier: int = 0
    """Messages before ``units`` not shown at all (not fetched, not summarized)."""
    tokens: int | None = None
    """Token count of ``text`` when already known."""

    @property
    def present(self) -> bool:
        """True when there is something to render."""
        return bool(self.units) if self.spec.source == "messages" else bool(self.text)


@dataclass(frozen=True)
class FittedSection:
    """One section after fitting."""

    tag: str
    source: str
    text: str | None
    """Content rendered inside the tag (``None``: not rendered)."""
    requested: int
    """Tokens of the full content."""
    allotted: int
    """Tokens the section was allowed (its cap, or what the budget left it)."""
    kept: int
    """Tokens of the rendered content (estimate from counted pieces)."""
    rule: str
    """What happened: full, pinned, cap, cut, outline, dropped, evicted, shrunk, removed, absent."""
    messages: tuple[ChatMessage, ...] = ()
    """Kept conversation messages (the messages source)."""


@dataclass(frozen=True)
class FitResult:
    """Fitted sections, the rendered prompt and its exact token count."""

    sections: tuple[FittedSection, ...]
    rendered: str
    total: int
    """Exact token count of ``rendered``."""
    refits: int = 0
    """Times the exact verification found a boundary merge and refitted."""


@dataclass
class _State:
    content: SectionContent
    index: int
    requested: int = 0
    allotted: int = 0
    text: str | None = None
    tokens: int = 0
    rule: str = "full"
    messages: tuple[ChatMessage, ...] = ()
    notes: list[str] = field(default_factory=list)

    @property
    def spec(self) -> SectionSpec:
        return self.content.spec


def _notice(spec: SectionSpec, total: int, limit: int) -> str:
    omitted = max(0, total - limit)
    return spec.notice.format(tag=spec.tag, omitted=omitted, total=total, kept=limit, messages=0)


_Shrunk = tuple[str, int, str, tuple[ChatMessage, ...]]


def _shrink(st: _State, limit: int, counter: TokenCounter) -> _Shrunk | None:
    """The section shortened to at most ``limit`` tokens, or None when nothing fits."""
    spec, c = st.spec, st.content
    if spec.source == "messages":
        h = fit_history(
            c.units,
            c.costs,
            counter,
            limit=limit,
            max_messages=spec.max_messages,
            earlier=c.earlier,
            notice=spec.notice,
            batch=spec.evict_batch or max(2, (spec.max_messages or 16) // 2),
        )
        rule = "evicted" if h.omitted else "full"
        if h.shrunk:
            rule = "shrunk latest turn"
        return h.text, h.tokens, rule, h.messages
    text = c.text or ""
    if spec.truncation is Truncation.DROP:
        note = f"[{spec.tag} omitted: {st.requested} tokens did not fit the budget]"
        tokens = count_small(counter, note)
        return (note, tokens, "dropped", ()) if tokens <= limit else None
    if spec.truncation is Truncation.SUMMARIZE:
        brief = outline(text)
        if brief and brief != text:
            note = f"[outline only (headings, first lines): {spec.tag} is {st.requested} tokens]"
            joined = f"{brief}\n{note}"
            tokens = counter.count(joined)
            if tokens <= limit:
                return joined, tokens, "outline", ()
            cut = cut_text(brief, limit, counter, note)
            return (cut.text, cut.tokens, "outline+cut", ()) if cut else None
    cut = cut_text(
        text,
        limit,
        counter,
        _notice(spec, st.requested, limit),
        keep_head=spec.truncation is not Truncation.HEAD,
        total=st.requested,
    )
    return (cut.text, cut.tokens, "cut", ()) if cut else None


def _fit_once(
    contents: Sequence[SectionContent], budget: int, counter: TokenCounter
) -> list[_State]:
    states = [_State(c, i) for i, c in enumerate(contents)]
    live: list[_State] = []
    for st in states:
        spec, c = st.spec, st.content
        if not c.present:
            st.rule = "absent"
            continue
        live.append(st)
        if spec.source == "messages":
            n_msgs = sum(len(x) for x in c.costs)
            sep_cost = count_small(counter, SEPARATOR) * max(0, n_msgs - 1)
            st.requested = sum(sum(x) for x in c.costs) + sep_cost
            limit = min(spec.cap or budget, budget)
            st.allotted = limit
            res = _shrink(st, limit, counter)
            assert res is not None
            st.text, st.tokens, st.rule, st.messages = res
            continue
        text = c.text or ""
        st.requested = c.tokens if c.tokens is not None else counter.count(text)
        st.text, st.tokens, st.allotted = text, st.requested, st.requested
        if spec.pinned:
            st.rule = "pinned"
        elif spec.cap is not None and st.requested > spec.cap:
            st.allotted = spec.cap
            res = _shrink(st, spec.cap, counter)
            if res is None:
                st.text, st.tokens, st.rule = None, 0, "removed"
            else:
                st.text, st.tokens, rule, _ = res
                st.rule = f"cap {spec.cap}: {rule}"

    def overhead(st: _State) -> int:
        t = st.spec.tag
        return count_small(counter, open_tag(t)) + count_small(counter, close_tag(t))

    sep = count_small(counter, SEPARATOR)

    def total() -> int:
        shown = [s for s in live if s.text is not None]
        return sum(s.tokens + overhead(s) for s in shown) + sep * max(0, len(shown) - 1)

    deficit = total() - budget
    if deficit > 0:
        order = sorted(
            (s for s in live if not s.spec.pinned), key=lambda s: (s.spec.priority, s.index)
        )
        for st in order:
            if deficit <= 0:
                break
            if st.text is None:
                continue
            target = st.tokens - deficit
            res = _shrink(st, target, counter) if target > 0 else None
            if res is None or res[1] > target:
                res = _smallest(st, counter)  # its smallest form (a notice) still helps
            if res is not None and res[1] < st.tokens:
                st.text, st.tokens, rule, st.messages = res
                st.allotted = min(st.allotted, max(target, res[1]))
                st.rule = f"budget: {rule}"
            deficit = total() - budget
        for st in order:  # still over: remove whole sections, lowest priority first
            if deficit <= 0:
                break
            if st.text is None or st.spec.source == "messages":
                continue
            st.text, st.tokens, st.allotted, st.rule = None, 0, 0, "removed"
            deficit = total() - budget
    if deficit > 0:
        raise BudgetExceededError(total(), budget, what="pinned content (and the latest user turn)")
    return states


def _smallest(st: _State, counter: TokenCounter) -> _Shrunk | None:
    """The section reduced to its notice (messages: the latest turn shrunk to the floor)."""
    if st.spec.source == "messages":
        return _shrink(st, 1, counter)
    note = f"[{st.spec.tag} omitted: {st.requested} tokens did not fit the budget]"
    return note, count_small(counter, note), "dropped", ()


def fit(contents: Sequence[SectionContent], budget: int, counter: TokenCounter) -> FitResult:
    """Fit sections (in rendering order) into ``budget`` tokens of rendered text.

    Raises :class:`BudgetExceededError` (saying by how much) when pinned content
    and the latest user turn alone do not fit.
    """
    effective = budget
    refits = 0
    while True:
        states = _fit_once(contents, effective, counter)
        parts = [(s.spec.tag, s.text) for s in states if s.text is not None]
        rendered = render_sections(parts)
        exact = counter.count(rendered) if rendered else 0
        if exact <= budget:
            break
        refits += 1
        effective -= exact - budget
        if refits > 4 or effective < 1:
            raise BudgetExceededError(exact, budget, what="the fitted context")
    sections = tuple(
        FittedSection(
            tag=s.spec.tag,
            source=s.spec.source,
            text=s.text,
            requested=s.requested,
            allotted=s.allotted,
            kept=s.tokens,
            rule=s.rule,
            messages=s.messages,
        )
        for s in states
    )
    return FitResult(sections=sections, rendered=rendered, total=exact, refits=refits)
