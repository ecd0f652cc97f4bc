"""The pure fitting function: caps, then truncation by priority, then exact verification.

Every piece is counted once; cuts use an interpolation search on cut points (see
``_textcut``); the whole rendered prompt is counted only to verify the result
(and, in the rare case that tokens merged across a section boundary, to
refit once with the overrun taken off).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from personae.context._textcut import count_rendered, count_small, cut_text, outline_cut
from personae.context.history import Exchanges, fit_history
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
    alternative: str | None = None
    """A shorter stand-in used when the whole text does not fit (its summary file)."""
    alt_tokens: int | None = None
    """Token count of ``alternative`` when already known."""
    keep_from: int | None = None
    """Messages: seq of the first message the previous prompt of this conversation
    kept (hysteresis, see :func:`~personae.context.history.fit_history`)."""
    exchanges: Exchanges | None = None
    """Messages: ``units`` and ``costs`` already prepared (running totals, rendered
    blocks); computed from them when ``None``."""

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
    key: str = ""
    """The snapshot text the section read (its source, or source and named files)."""


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
    want: int = 0
    """Tokens of the largest form the section may take (whole, or its cap)."""
    floor_tokens: int = 0
    """Tokens of the section's smallest cut form."""
    alt_tokens: int | None = None
    """Tokens of the content's summary file, when it has one."""
    floor_form: _Shrunk | None = None
    """The conversation's smallest form (messages only)."""
    exchanges: Exchanges | None = None
    """The conversation prepared for fitting (messages only)."""

    @property
    def spec(self) -> SectionSpec:
        return self.content.spec


def _notice(spec: SectionSpec, total: int, limit: int) -> str:
    omitted = max(0, total - limit)
    return spec.notice.format(tag=spec.tag, omitted=omitted, total=total, kept=limit, messages=0)


def _drop_note(st: _State) -> str:
    return f"[{st.spec.tag} omitted: {st.requested} tokens did not fit the budget]"


_Shrunk = tuple[str, int, str, tuple[ChatMessage, ...]]

_CLOSE = 32
"""Overshoot of the piecewise estimate under which the whole render is counted exactly."""

_MIN_KEEP = 8
"""Tokens of content a cut must keep to count as a cut form (and not a bare notice)."""


def _history(st: _State, limit: int, counter: TokenCounter) -> _Shrunk:
    spec, c = st.spec, st.content
    assert st.exchanges is not None
    h = fit_history(
        st.exchanges,
        counter,
        limit=max(1, limit),
        max_messages=spec.max_messages,
        earlier=c.earlier,
        notice=spec.notice,
        batch=spec.evict_batch or max(2, (spec.max_messages or 16) // 2),
        keep_from=c.keep_from,
        low_water=spec.low_water,
    )
    rule = "evicted" if h.omitted else "full"
    if h.shrunk:
        rule = "shrunk latest turn"
    return h.text, h.tokens, rule, h.messages


def _form(st: _State, limit: int, counter: TokenCounter) -> _Shrunk | None:
    """The largest form of a text section within ``limit`` tokens, or None.

    In order: whole, its summary file, the first part whole and the rest
    outlined (``summarize``), a cut with a notice, and only then a one-line
    notice that it was dropped.
    """
    spec, c = st.spec, st.content
    if st.requested <= limit:
        return c.text or "", st.requested, "full", ()
    text, total, what = c.text or "", st.requested, ""
    if c.alternative is not None and st.alt_tokens is not None:
        if st.alt_tokens <= limit:
            return c.alternative, st.alt_tokens, "summary file", ()
        text, total, what = c.alternative, st.alt_tokens, "summary file "
    mode = spec.truncation
    if mode is not Truncation.DROP:
        if mode is Truncation.SUMMARIZE:
            note = (
                f"[{spec.tag}: the first part in full, the rest outlined (headings, first"
                f" lines); {total} tokens in full]"
            )
            got = outline_cut(text, limit, counter, note)
            if got is not None and got.tokens - count_small(counter, note) >= _MIN_KEEP:
                return got.text, got.tokens, f"{what}outline", ()
        cut = cut_text(
            text,
            limit,
            counter,
            _notice(spec, total, limit),
            keep_head=mode is not Truncation.HEAD,
            total=total,
        )
        if cut is not None and cut.tokens - count_small(counter, _notice(spec, total, limit)) > 1:
            return cut.text, cut.tokens, f"{what}cut", ()
    note = _drop_note(st)
    tokens = count_small(counter, note)
    return (note, tokens, "dropped", ()) if tokens <= limit else None


def _floor(st: _State, counter: TokenCounter) -> int:
    """Tokens of the section's smallest cut form (its drop notice for ``drop`` sections)."""
    if st.spec.truncation is Truncation.DROP:
        return min(st.want, count_small(counter, _drop_note(st)))
    total = st.alt_tokens if st.alt_tokens is not None else st.requested
    note = _notice(st.spec, total, st.want)
    return min(st.want, count_small(counter, note) + 1 + _MIN_KEEP)


class _Plan:
    """Running totals of one fitting: what is shown and how much room is left."""

    def __init__(self, live: list[_State], budget: int, counter: TokenCounter) -> None:
        self.counter = counter
        self.sep = count_small(counter, SEPARATOR)
        self.budget = budget
        self.live = live

    def overhead(self, st: _State) -> int:
        t = st.spec.tag
        return count_small(self.counter, open_tag(t)) + count_small(self.counter, close_tag(t))

    def total(self) -> int:
        shown = [s for s in self.live if s.text is not None]
        return sum(s.tokens + self.overhead(s) for s in shown) + self.sep * max(0, len(shown) - 1)

    def room(self) -> int:
        return self.budget - self.total()

    def room_for(self, st: _State) -> int:
        """Tokens ``st`` may take without the total going over (its own share included)."""
        if st.text is not None:
            return self.room() + st.tokens
        gap = self.sep if any(s.text is not None for s in self.live) else 0
        return self.room() - self.overhead(st) - gap


def _apply(st: _State, res: _Shrunk | None, limit: int, cap_bound: bool) -> None:
    if res is None:
        st.text, st.tokens, st.allotted, st.rule, st.messages = None, 0, 0, "removed", ()
        return
    st.text, st.tokens, rule, st.messages = res
    st.allotted = max(0, limit)
    if rule == "full":
        st.rule = "full"
    else:
        st.rule = f"cap {st.spec.cap}: {rule}" if cap_bound else f"budget: {rule}"


def _fit_once(
    contents: Sequence[SectionContent], budget: int, counter: TokenCounter
) -> list[_State]:
    """Two passes: targets by priority (floors reserved for the rest), then refill."""
    states = [_State(c, i) for i, c in enumerate(contents)]
    live: list[_State] = []
    for st in states:
        if not st.content.present:
            st.rule = "absent"
            continue
        live.append(st)
        c = st.content
        if st.spec.source == "messages":
            st.exchanges = c.exchanges or Exchanges.of(
                c.units, c.costs, count_small(counter, SEPARATOR)
            )
            st.requested = st.exchanges.tokens
            capped = _history(st, min(st.spec.cap or budget, budget), counter)
            st.want = capped[1]
            st.text, st.tokens, st.rule, st.messages = capped
            st.allotted = min(st.spec.cap or budget, budget)
            continue
        st.requested = c.tokens if c.tokens is not None else counter.count(c.text or "")
        if c.alternative is not None:
            st.alt_tokens = (
                c.alt_tokens if c.alt_tokens is not None else counter.count(c.alternative)
            )
        st.text, st.tokens, st.allotted = c.text, st.requested, st.requested
        st.want = st.requested if st.spec.pinned else min(st.requested, st.spec.cap or st.requested)
        st.rule = "pinned" if st.spec.pinned else "full"
        if not st.spec.pinned:
            st.floor_tokens = _floor(st, counter)
    plan = _Plan(live, budget, counter)
    whole = all(s.tokens <= s.want for s in live)
    if whole and plan.room() >= 0:
        return states  # everything fits whole (caps apart from messages already applied)
    if whole and plan.room() > -_CLOSE:
        # Piecewise counts can overshoot by a few tokens: ask the exact count.
        parts = [(s.spec.tag, s.text) for s in live if s.text is not None]
        if count_rendered(counter, render_sections(parts)) <= budget:
            return states
    movable = sorted(
        (s for s in live if not s.spec.pinned), key=lambda s: (-s.spec.priority, s.index)
    )
    texts = [s for s in movable if s.spec.source != "messages"]
    history = [s for s in movable if s.spec.source == "messages"]
    for st in history:
        # The smallest form, needed only now that not everything fits whole. Shrinking
        # notices can outweigh tiny contents: the floor is never above whole.
        smallest = _history(st, 1, counter)
        capped = (st.text or "", st.tokens, st.rule, st.messages)
        st.floor_form = smallest if smallest[1] < capped[1] else capped
        st.floor_tokens = st.floor_form[1]
    # Pass 0: every movable section at its floor (the conversation at its smallest form).
    for st in history:
        assert st.floor_form is not None
        st.text, st.tokens, st.rule, st.messages = st.floor_form
    for st in texts:
        st.text, st.tokens = "", st.floor_tokens
    # Not even the floors fit: drop whole sections, lowest priority first.
    for st in reversed(texts):
        if plan.room() >= 0:
            break
        st.text, st.tokens = None, 0
    if plan.room() < 0:
        raise BudgetExceededError(
            plan.total(), budget, what="pinned content (and the latest user turn)"
        )
    kept_floor = [s for s in texts if s.text is not None]
    for st in texts:
        if st.text is None:
            _apply(st, None, 0, False)
    # Pass 1: by priority, each section grows to its target (share of the budget).
    for st in movable:
        want = st.want
        if st.spec.share is not None:
            want = min(want, max(st.floor_tokens, int(st.spec.share * budget)))
        limit = min(want, plan.room_for(st))
        cap_bound = st.spec.cap is not None and st.requested > st.spec.cap and limit >= st.spec.cap
        if st.spec.source == "messages":
            got = _history(st, limit, counter)
            _apply(st, got if got[1] <= limit else st.floor_form, limit, False)
        elif st in kept_floor:
            _apply(st, _form(st, limit, counter), limit, cap_bound)
    # Pass 2: what is left goes back to what was cut (and to removed sections), by priority.
    for _ in range(2):
        for st in movable:
            if plan.room() <= 0:
                break
            if st.text is not None and st.tokens >= st.want:
                continue
            limit = min(st.want, plan.room_for(st))
            if limit <= (st.tokens if st.text is not None else 0):
                continue
            cap_bound = (
                st.spec.cap is not None and st.requested > st.spec.cap and limit >= st.spec.cap
            )
            if st.spec.source == "messages":
                res: _Shrunk | None = _history(st, limit, counter)
            else:
                res = _form(st, limit, counter)
            if res is not None and (st.text is None or res[1] > st.tokens) and res[1] <= limit:
                _apply(st, res, limit, cap_bound)
    if plan.room() < 0:
        raise BudgetExceededError(
            plan.total(), budget, what="pinned content (and the latest user turn)"
        )
    return states


def fit(contents: Sequence[SectionContent], budget: int, counter: TokenCounter) -> FitResult:
    """Fit sections (in rendering order) into ``budget`` tokens of rendered text.

    Raises :class:`BudgetExceededError` (saying by how much) when pinned content
    and the latest user turn alone do not fit.
    """
    effective = budget
    refits = 0
    while True:
        try:
            states = _fit_once(contents, effective, counter)
        except BudgetExceededError as exc:
            if effective == budget:
                raise
            # A refit after a boundary merge: report against the caller's budget.
            raise BudgetExceededError(
                exc.needed + budget - effective, budget, what="the fitted context"
            ) from None
        parts = [(s.spec.tag, s.text) for s in states if s.text is not None]
        rendered = render_sections(parts)
        exact = count_rendered(counter, rendered) if rendered else 0
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
            key=s.spec.content_key,
        )
        for s in states
    )
    return FitResult(sections=sections, rendered=rendered, total=exact, refits=refits)
