"""The pure fitting function: caps, then truncation by priority, then exact verification.

Every piece is counted once; cuts use an interpolation search on cut points (see
``_textcut``); the whole rendered prompt is counted only to verify the result
(and, in the rare case that tokens merged across a section boundary, to
refit once with the overrun taken off).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from personae.context._counted import render_counted
from personae.context._filled import filled
from personae.context._lru import IdentityMemo, SizedMemo, hold
from personae.context._textcut import count_small, cut_text, outline, outline_cut
from personae.context.history import Exchanges, fit_history
from personae.context.messages import ChatMessage, Unit
from personae.context.render import SEPARATOR, close_tag, open_tag
from personae.context.rules import FULL, Action, Bound, Rule
from personae.context.spec import SectionSource, SectionSpec, Truncation, section_keys
from personae.errors import BudgetExceededError
from personae.tokens.base import TokenCounter

__all__ = ["Draft", "FitResult", "FittedSection", "SectionContent", "fit", "known_cuts"]


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
        return bool(self.units) if self.spec.source is SectionSource.MESSAGES else bool(self.text)


@dataclass(frozen=True)
class FittedSection:
    """One section after fitting."""

    tag: str
    source: str
    pieces: tuple[str, ...] | None
    """The content rendered inside the tag: these parts joined by blank lines
    (``None``: not rendered). See :attr:`text`."""
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
    outcome: Rule = FULL
    """What happened, as a typed value (``rule`` is its text)."""
    target: int | None = None
    """The section's target (its ``share`` of the budget), for the report; fitting
    goes by priority, not by targets."""

    @cached_property
    def text(self) -> str | None:
        """Content rendered inside the tag (``None``: not rendered), as it is in the
        prompt. Joined on first use: an agent loop sends the prompt and rarely asks."""
        return None if self.pieces is None else SEPARATOR.join(self.pieces)


@dataclass(frozen=True)
class FitResult:
    """Fitted sections, the rendered prompt and its exact token count."""

    sections: tuple[FittedSection, ...]
    rendered: str
    total: int
    """Exact token count of ``rendered``."""
    refits: int = 0
    """Times the exact verification found a boundary merge and refitted."""


_RULES = {action: Rule(action) for action in Action}
"""The unbounded rule of each action (rules are immutable: built once)."""

_DEFERRED = Rule(Action.SHRUNK).bounded("budget")
"""A conversation left unfitted by an outcomes-only fitting (see ``_to_targets``)."""


class _Form(NamedTuple):
    """One form a section may take."""

    text: str
    """The content (messages: empty, the content is ``pieces`` joined; joined once,
    for the result, never for a trial form)."""
    tokens: int
    rule: Rule
    messages: tuple[ChatMessage, ...] = ()
    pieces: tuple[str, ...] = ()
    """Messages: the pieces ``text`` joins with blank lines (see ``render_counted``)."""


class _State:
    """One section during one fitting. Built per section per fitting: only what
    differs from the defaults below (class attributes) is set on the instance."""

    requested: int = 0
    allotted: int = 0
    text: str | None = None
    tokens: int = 0
    rule: Rule = FULL
    messages: tuple[ChatMessage, ...] = ()
    pieces: tuple[str, ...] = ()
    want: int = 0
    """Tokens of the largest form the section may take (whole, or its cap)."""
    floor_tokens: int = 0
    """Tokens of the section's smallest cut form."""
    alt_tokens: int | None = None
    """Tokens of the content's summary file, when it has one."""
    floor_form: _Form | None = None
    """The conversation's smallest form (messages only)."""
    exchanges: Exchanges | None = None
    """The conversation prepared for fitting (messages only)."""
    frame: int = 0
    """Tokens of the section's opening and closing tags (set by ``_Plan``)."""
    held: int = 0
    """A pinned section over its share: its share in tokens (0: whole, not held)."""
    over: bool = False
    """Messages: the latest turn alone is over the budget, so the conversation's
    largest form is its latest turn shrunk; that form is fitted only when some pass
    needs it (``want`` is then the budget, its upper bound)."""
    deferred: bool = False
    """Messages: an outcomes-only fitting left the conversation at its floor (it is
    cut by the budget whatever form it takes; no other section's outcome depends on
    which)."""

    def __init__(
        self, content: SectionContent, index: int, forms: dict[tuple[int, int], _Form]
    ) -> None:
        self.content = content
        self.spec: SectionSpec = content.spec
        self.is_history: bool = self.spec.source is SectionSource.MESSAGES
        self.index = index
        self.forms = forms
        """Messages: the form at each limit tried, shared by the fittings of one
        assembly (``(id(content), limit)``: the same content fits the same way)."""

    def show(self, form: _Form) -> None:
        self.text, self.tokens, self.rule = form.text, form.tokens, form.rule
        self.messages, self.pieces = form.messages, form.pieces

    def hide(self) -> None:
        self.text, self.tokens, self.messages, self.pieces = None, 0, (), ()

    def bound(self, limit: int) -> Bound | None:
        """``cap`` when the section's own cap (not the budget) bounds it at ``limit``."""
        cap = self.spec.cap
        return "cap" if cap is not None and self.requested > cap and limit >= cap else "budget"


def _notice(spec: SectionSpec, total: int, limit: int) -> str:
    omitted = max(0, total - limit)
    return spec.notice.format(tag=spec.tag, omitted=omitted, total=total, kept=limit, messages=0)


def _drop_note(st: _State) -> str:
    return f"[{st.spec.tag} omitted: {st.requested} tokens did not fit the budget]"


_CLOSE = 32
"""Overshoot of the piecewise estimate under which the whole render is counted exactly."""

_MIN_KEEP = 8
"""Tokens of content a cut must keep to count as a cut form (and not a bare notice)."""


def _history(st: _State, limit: int, counter: TokenCounter) -> _Form:
    key = (id(st.content), limit)
    got = st.forms.get(key)
    if got is None:
        got = st.forms[key] = _history_at(st, limit, counter)
    return got


_FORMS: SizedMemo[tuple[object, ...], tuple[Exchanges, _Form]] = SizedMemo(1 << 22)
"""Conversation forms fitted in this process, by the prepared conversation (an
``Exchanges`` a window published: fresh snapshots of one conversation get the same
object; kept alive here, so its id is not reused) and every argument of the fit, up
to 4 M references held in all (about 32 MB: a 100,000-message conversation's forms
take a tenth of it each). A fresh snapshot per request asks for the same forms
again: its smallest form at every budget, every form at a budget met before."""


def _history_at(st: _State, limit: int, counter: TokenCounter) -> _Form:
    spec, c, ex = st.spec, st.content, st.exchanges
    assert ex is not None
    limit = max(1, limit)
    batch = spec.evict_batch or max(2, (spec.max_messages or 16) // 2)
    key = (
        (id(ex), counter.name, limit, spec.max_messages, c.earlier, spec.notice, batch,
         c.keep_from, spec.low_water, spec.cut_step)
        if c.exchanges is ex
        else None
    )  # fmt: skip
    if key is not None:
        held = _FORMS.get(key)
        if held is not None and held[0] is ex:
            return held[1]
    h = fit_history(
        ex, counter, limit=limit, max_messages=spec.max_messages, earlier=c.earlier,
        notice=spec.notice, batch=batch, keep_from=c.keep_from, low_water=spec.low_water,
        cut_step=spec.cut_step,
    )  # fmt: skip
    action = Action.EVICTED if h.omitted else Action.FULL
    if h.shrunk:
        action = Action.SHRUNK
    form = _Form("", h.tokens, _RULES[action], h.messages, h.blocks)
    if key is not None and _asked_before(key):
        # Sized by the references held: the form's and the conversation's it keeps alive.
        _FORMS.put(key, (ex, form), 6 * len(ex.units) + len(form.messages) + len(form.pieces))
    return form


_ASKED: dict[tuple[object, ...], None] = {}
"""Keys of conversation forms fitted once and not remembered (see :func:`_asked_before`)."""
_ASKED_MAX = 1 << 16


def _asked_before(key: tuple[object, ...]) -> bool:
    """Whether this form was fitted before in the process: only a form asked for a
    second time is remembered in :data:`_FORMS`. A budget met once (a request with a
    budget of its own) then leaves nothing behind for the memory and the garbage
    collector to go over; a budget met again (an agent loop's, a server's) is fitted
    twice, then remembered."""
    if key in _ASKED:
        del _ASKED[key]
        return True
    if len(_ASKED) >= _ASKED_MAX:
        _ASKED.clear()
    _ASKED[key] = None
    return False


def _outline(st: _State, text: str, total: int, limit: int, counter: TokenCounter) -> _Form | None:
    note = (
        f"[{st.spec.tag}: the first part in full, the rest outlined (headings, first"
        f" lines); {total} tokens in full]"
    )
    got = outline_cut(text, limit, counter, note)
    if got is not None and got.tokens - count_small(counter, note) >= _MIN_KEEP:
        return _Form(got.text, got.tokens, _RULES[Action.OUTLINE])
    # Not even the outline fits: its start (headings first, the way it reads).
    short = outline(text)
    if short and short != text:
        cut = _cut(st, short, counter.count(short), limit, counter)
        if cut is not None:
            return _Form(cut.text, cut.tokens, _RULES[Action.OUTLINE])
    return None


def _cut(st: _State, text: str, total: int, limit: int, counter: TokenCounter) -> _Form | None:
    notice = _notice(st.spec, total, limit)
    keep_head = st.spec.truncation is not Truncation.HEAD
    cut = cut_text(text, limit, counter, notice, keep_head=keep_head, total=total)
    if cut is not None and cut.tokens - count_small(counter, notice) > 1:
        return _Form(cut.text, cut.tokens, _RULES[Action.CUT])
    return None


def _with_summary(
    st: _State, summary: str, tokens: int, limit: int, counter: TokenCounter
) -> _Form:
    """The summary file first, then as much of the whole text as the room left takes
    (cut with a notice): the summary stands in for the specifics without leaving the
    room it freed unused."""
    form = _Form(summary, tokens, _RULES[Action.SUMMARY_FILE])
    sep = count_small(counter, SEPARATOR)
    rest = limit - tokens - sep
    if rest < count_small(counter, _notice(st.spec, st.requested, rest)) + 1 + _MIN_KEEP:
        return form
    cut = _cut(st, st.content.text or "", st.requested, rest, counter)
    if cut is None:
        return form
    text = f"{summary}{SEPARATOR}{cut.text}"
    joined = counter.count(text)
    return _Form(text, joined, form.rule) if joined <= limit else form


def _form(st: _State, limit: int, counter: TokenCounter) -> _Form | None:
    """The largest form of a text section within ``limit`` tokens, or None.

    In order: whole, its summary file, the first part whole and the rest
    outlined (``summarize``), a cut with a notice, and only then a one-line
    notice that it was dropped.
    """
    c = st.content
    if st.requested <= limit:
        return _Form(c.text or "", st.requested, FULL)
    text, total, of_summary = c.text or "", st.requested, False
    if c.alternative is not None and st.alt_tokens is not None:
        if st.alt_tokens <= limit:
            return _with_summary(st, c.alternative, st.alt_tokens, limit, counter)
        text, total, of_summary = c.alternative, st.alt_tokens, True
    mode = st.spec.truncation
    got = None
    if mode is Truncation.SUMMARIZE:
        got = _outline(st, text, total, limit, counter)
    if got is None and mode is not Truncation.DROP:
        got = _cut(st, text, total, limit, counter)
    if got is not None:
        return got._replace(rule=Rule(got.rule.action, of_summary))
    note = _drop_note(st)
    tokens = count_small(counter, note)
    return _Form(note, tokens, _RULES[Action.DROPPED]) if tokens <= limit else None


def _floor(st: _State, counter: TokenCounter) -> int:
    """Tokens of the section's smallest cut form (its drop notice for ``drop`` sections)."""
    if st.spec.truncation is Truncation.DROP:
        return min(st.want, count_small(counter, _drop_note(st)))
    total = st.alt_tokens if st.alt_tokens is not None else st.requested
    note = _notice(st.spec, total, st.want)
    return min(st.want, count_small(counter, note) + 1 + _MIN_KEEP)


_FRAMES: dict[tuple[str, str | None], int] = {}
"""Tokens of a section's opening and closing tags, by counter name and tag (``None``:
the separator between two sections)."""


def _frame(counter: TokenCounter, tag: str | None, name: str | None = None) -> int:
    """Tokens of ``tag``'s opening and closing tags (``None``: of the separator);
    ``name``: the counter's, when the caller has it."""
    key = (counter.name if name is None else name, tag)
    got = _FRAMES.get(key)
    if got is None:
        if tag is None:
            got = count_small(counter, SEPARATOR)
        else:
            got = count_small(counter, open_tag(tag)) + count_small(counter, close_tag(tag))
        hold(_FRAMES, key, got, 4096)
    return got


class _Plan:
    """Running totals of one fitting: what is shown and how much room is left."""

    def __init__(self, live: list[_State], budget: int, counter: TokenCounter) -> None:
        name = counter.name
        self.counter = counter
        self.sep = _frame(counter, None, name)
        self.budget = budget
        self.live = live
        for st in live:  # counted once per fitting: total() runs after every change
            st.frame = _frame(counter, st.spec.tag, name)

    def overhead(self, st: _State) -> int:
        """Tokens of the section's tags."""
        return st.frame

    def total(self) -> int:
        total, shown = -self.sep, 0
        for s in self.live:
            if s.text is not None:
                total += s.tokens + s.frame + self.sep
                shown += 1
        return total if shown else 0

    def room(self) -> int:
        return self.budget - self.total()

    def room_for(self, st: _State) -> int:
        """Tokens ``st`` may take without the total going over (its own share included)."""
        if st.text is not None:
            return self.room() + st.tokens
        gap = self.sep if any(s.text is not None for s in self.live) else 0
        return self.room() - self.overhead(st) - gap

    def check(self) -> None:
        if self.room() < 0:
            raise BudgetExceededError(
                self.total(), self.budget, what="pinned content (and the latest user turn)"
            )


def _apply(st: _State, res: _Form | None, limit: int, bound: Bound | None) -> None:
    if res is None:
        st.hide()
        st.allotted, st.rule = 0, _RULES[Action.REMOVED]
        return
    st.show(res)
    st.allotted = max(0, limit)
    st.rule = res.rule.bounded(bound, st.held if bound == "share" else st.spec.cap)


def _start(st: _State, budget: int, counter: TokenCounter) -> None:
    """The section whole (the conversation within its cap), and its largest form."""
    c, spec = st.content, st.spec
    if st.is_history:
        st.exchanges = c.exchanges or Exchanges.of(
            c.units, c.costs, count_small(counter, SEPARATOR)
        )
        st.requested = st.exchanges.tokens
        if (spec.cap is None or spec.cap >= budget) and st.exchanges.turn_tokens > budget:
            # Shrunk to the budget whatever else is shown: fitted once its room is known.
            st.over, st.want, st.allotted = True, budget, budget
            st.text, st.tokens, st.rule = "", budget + 1, _RULES[Action.SHRUNK]
            return
        capped = _history(st, min(spec.cap or budget, budget), counter)
        st.want = capped.tokens
        st.show(capped)
        st.allotted = min(spec.cap or budget, budget)
        return
    held = _TEXT_STARTS.get(c)
    if held is not None and held[0] == counter.name:
        vars(st).update(held[1])
        return
    st.requested = c.tokens if c.tokens is not None else counter.count(c.text or "")
    if c.alternative is not None:
        st.alt_tokens = c.alt_tokens if c.alt_tokens is not None else counter.count(c.alternative)
    st.text, st.tokens, st.allotted = c.text, st.requested, st.requested
    st.want = st.requested if spec.pinned else min(st.requested, spec.cap or st.requested)
    st.rule = _RULES[Action.PINNED] if spec.pinned else FULL
    if not spec.pinned:
        st.floor_tokens = _floor(st, counter)
    _TEXT_STARTS.put(c, (counter.name, {k: v for k, v in vars(st).items() if k in _STARTED}))


_STARTED = frozenset(
    ("requested", "alt_tokens", "text", "tokens", "allotted", "want", "rule", "floor_tokens")
)
"""What :func:`_start` sets on a text section's state: its content and counter alone
decide it (not the budget)."""

_TEXT_STARTS: IdentityMemo[SectionContent, tuple[str, dict[str, Any]]] = IdentityMemo(1024)
"""What :func:`_start` set for the text sections fitted lately, by their content (the
same object prompt after prompt: see ``assemble``) with the counter's name."""


def known_cuts(contents: Sequence[SectionContent], budget: int) -> list[str] | None:
    """The tags an outcomes-only :class:`Draft` of ``contents`` names as cut (bounded
    by the budget), when that is known without fitting; ``None``: fit to know.

    Known when the only section that is not pinned is a conversation whose latest turn
    alone is over the budget (and whose cap is not under it), and no pinned section
    has a share: pinned sections are then whole and the conversation is shrunk, so
    the draft names the conversation alone, or raises
    :class:`~personae.errors.BudgetExceededError` when pinned content and the
    conversation's smallest form do not fit (a fitting that adds a droppable section
    then raises the same: that section is dropped first)."""
    history = None
    for c in contents:
        spec = c.spec
        if spec.source is SectionSource.MESSAGES:
            if not c.units:
                continue
            if spec.pinned or history is not None or c.exchanges is None:
                return None
            history = c
        elif c.text and (not spec.pinned or spec.share is not None):
            return None
    if history is None or history.exchanges is None:
        return None
    cap = history.spec.cap
    if (cap is None or cap >= budget) and history.exchanges.turn_tokens > budget:
        return [history.spec.tag]
    return None


def _fits_whole(plan: _Plan, counter: TokenCounter) -> bool:
    """Everything fits whole (caps apart from messages already applied)."""
    if not all(s.tokens <= s.want and not s.over for s in plan.live):
        return False
    if plan.room() >= 0:
        return True
    if plan.room() <= -_CLOSE:
        return False
    # Piecewise counts can overshoot by a few tokens: ask the exact count.
    return _render(plan.live, counter)[1] <= plan.budget


def _over_takes_rest(plan: _Plan, counter: TokenCounter) -> bool:
    """A conversation whose latest turn alone is over the budget, fitted in one go into
    the room every other section leaves whole: what the passes give when it is the
    lowest in priority of the sections that may shrink, every other section fits
    whole, no pinned section has a share, and the room holds its smallest form (they
    then grow the others to whole and leave it that room). False, with nothing
    changed, when any of that does not hold: the passes decide."""
    over = None
    for st in plan.live:
        if st.over and over is None and not st.spec.pinned:
            over = st
        elif st.over or st.tokens > st.want or st.spec.share is not None:
            return False
    if over is None:
        return False
    last = _by_priority(over)
    if any(not s.spec.pinned and _by_priority(s) > last for s in plan.live):
        return False
    limit = min(over.want, plan.room_for(over))
    if limit < 1 or _history(over, 1, counter).tokens > limit:
        return False
    got = _history(over, limit, counter)
    if got.tokens > limit:
        return False
    _apply(over, got, limit, "budget")
    return True


def _at_floors(plan: _Plan, movable: list[_State], counter: TokenCounter) -> list[_State]:
    """Pass 0: every movable section at its floor (the conversation at its smallest
    form); whole sections dropped, lowest priority first, while even that is over.
    Returns the text sections that keep at least their floor."""
    texts = [s for s in movable if not s.is_history]
    for st in movable:
        if st.is_history:
            # Shrinking notices can outweigh tiny contents: the floor is never above whole.
            smallest = _history(st, 1, counter)
            if st.over and smallest.tokens > st.want:
                st.show(_history(st, st.want, counter))  # the placeholder is not a form
            if smallest.tokens >= st.tokens:  # the floor is the form shown
                smallest = _Form(st.text or "", st.tokens, st.rule, st.messages, st.pieces)
            st.floor_form, st.floor_tokens = smallest, smallest.tokens
            st.show(smallest)
    for st in texts:
        st.text, st.tokens = "", st.floor_tokens
    for st in reversed(texts):
        if plan.room() >= 0:
            break
        st.hide()
    plan.check()
    for st in texts:
        if st.text is None:
            _apply(st, None, 0, None)
    return [s for s in texts if s.text is not None]


def _to_targets(
    plan: _Plan,
    movable: list[_State],
    kept: list[_State],
    counter: TokenCounter,
    outcomes_only: bool = False,
) -> bool:
    """Pass 1: by priority, highest first, each section grows to its whole size (or
    cap): a section is cut only when every section of lower priority is at its floor
    (the designed truncation order).

    ``outcomes_only``: a conversation over the budget that comes last, after every
    other section took its whole size, is left at its floor (``deferred``): it is
    cut by the budget whatever form it takes, and nothing after it can change. Returns
    True when it was left so."""
    for st in movable:
        limit = min(st.want, plan.room_for(st))
        if (
            outcomes_only
            and st.over
            and st is movable[-1]
            and limit < st.want
            and all(s.text is not None and s.tokens >= s.want for s in movable[:-1])
        ):
            st.deferred, st.rule = True, _DEFERRED
            return True
        if st.is_history:
            got = _history(st, limit, counter)
            _apply(st, got if got.tokens <= limit else st.floor_form, limit, "budget")
        elif st in kept:
            _apply(st, _form(st, limit, counter), limit, st.bound(limit))
    return False


def _refill(plan: _Plan, movable: list[_State], counter: TokenCounter) -> None:
    """Pass 2: what is left goes back to what was cut (and to removed sections)."""
    for st in movable:
        if plan.room() <= 0:
            return
        if st.text is not None and st.tokens >= st.want:
            continue
        limit = min(st.want, plan.room_for(st))
        if limit <= (st.tokens if st.text is not None else 0):
            continue
        res = _history(st, limit, counter) if st.is_history else _form(st, limit, counter)
        if res is not None and (st.text is None or res.tokens > st.tokens) and res.tokens <= limit:
            _apply(st, res, limit, st.bound(limit))


def _hold_shares(plan: _Plan, live: list[_State], counter: TokenCounter) -> list[_State]:
    """Pass 0 for pinned sections with a ``share`` (vision): one larger than its share of
    the budget is held to it (outlined, or cut, with a notice; never dropped), so it
    never crowds out the rest; it gets its excess back only in the last refill."""
    held = []
    for st in live:
        share = st.spec.share
        if not st.spec.pinned or share is None or st.is_history:
            continue
        limit = int(share * plan.budget)
        if st.requested <= limit:
            continue
        got = _form(st, limit, counter)
        if got is None or got.rule.action is Action.DROPPED:
            continue  # pinned: not even a cut form fits its share, so it stays whole
        st.held = limit
        _apply(st, got, limit, "share")
        held.append(st)
    return held


def _regrow(plan: _Plan, held: list[_State], counter: TokenCounter) -> None:
    """Last refill: what every other section left goes back to held pinned sections."""
    for st in held:
        limit = min(st.requested, plan.room_for(st))
        if limit <= st.tokens:
            continue
        got = _form(st, limit, counter)
        if got is not None and got.tokens > st.tokens and got.rule.action is not Action.DROPPED:
            if got.rule.action is Action.FULL:
                st.show(got)
                st.allotted, st.rule = st.requested, _RULES[Action.PINNED]
            else:
                _apply(st, got, limit, "share")


def _by_priority(st: _State) -> tuple[int, int]:
    """Fitting order: highest priority first, then rendering order."""
    return -st.spec.priority, st.index


def _fit_once(
    contents: Sequence[SectionContent],
    budget: int,
    counter: TokenCounter,
    forms: dict[tuple[int, int], _Form],
    outcomes_only: bool = False,
) -> list[_State]:
    """Pinned sections held to their shares, floors, then by priority, then refill
    (``outcomes_only``: see :func:`_to_targets`)."""
    states = [_State(c, i, forms) for i, c in enumerate(contents)]
    live: list[_State] = []
    for st in states:
        if st.content.units if st.is_history else st.content.text:  # SectionContent.present
            live.append(st)
            _start(st, budget, counter)
        else:
            st.rule = _RULES[Action.ABSENT]
    plan = _Plan(live, budget, counter)
    if _fits_whole(plan, counter) or (not outcomes_only and _over_takes_rest(plan, counter)):
        return states
    held = _hold_shares(plan, live, counter)
    movable = sorted((s for s in live if not s.spec.pinned), key=_by_priority)
    kept = _at_floors(plan, movable, counter)
    if _to_targets(plan, movable, kept, counter, outcomes_only and not held):
        return states
    for _ in range(2):
        _refill(plan, movable, counter)
    _regrow(plan, held, counter)
    plan.check()
    return states


def _render(states: Sequence[_State], counter: TokenCounter) -> tuple[str, int]:
    """The rendered prompt of the shown sections and its exact count (not remembered
    when a conversation's latest turn was cut to this budget: see ``render_counted``)."""
    return render_counted(
        counter,
        [(s.spec.tag, s.pieces or (s.text,)) for s in states if s.text is not None],
        remember_prompt=all(s.rule.action is not Action.SHRUNK for s in states),
    )


def _fitted(st: _State, budget: int) -> FittedSection:
    """The section's public result (a text section shown as its last fitting showed it
    gets a copy of that result's fields, not built again)."""
    spec = st.spec
    target = None if spec.share is None else int(spec.share * budget)
    shown = (st.text, st.pieces, st.tokens, st.requested, st.allotted, st.rule, target)
    held = None if st.is_history else _SHOWN.get(st.content)
    if held is not None and held[0] == shown:
        got: FittedSection = object.__new__(FittedSection)
        got.__dict__.update(held[1])
        return got
    got = filled(
        FittedSection,
        tag=spec.tag,
        source=spec.source,
        pieces=None if st.text is None else st.pieces or (st.text,),
        requested=st.requested,
        allotted=st.allotted,
        kept=st.tokens,
        rule=str(st.rule),
        messages=st.messages,
        key=section_keys(spec)[0],
        outcome=st.rule,
        target=target,
    )
    if not st.is_history:
        _SHOWN.put(st.content, (shown, dict(vars(got))))
    return got


_SHOWN: IdentityMemo[SectionContent, tuple[tuple[Any, ...], dict[str, Any]]] = IdentityMemo(1024)
"""The fields of the last result of each text section fitted lately, by its content,
with what it showed."""


class Draft:
    """A fitting before its exact verification: which form each section took.

    :meth:`result` renders it, counts it exactly and refits when tokens merged
    across a boundary. The caller may look at :meth:`outcomes` first and fit
    other contents instead (``assemble`` adds a warning when anything was cut)
    without rendering this one.
    """

    def __init__(
        self,
        contents: Sequence[SectionContent],
        budget: int,
        counter: TokenCounter,
        *,
        like: Draft | None = None,
        outcomes_only: bool = False,
    ) -> None:
        """Fit ``contents``; ``like``: an earlier draft of the same assembly (sections
        that are the same objects reuse the forms it tried). ``outcomes_only``: the
        caller looks at :meth:`outcomes` first and expects to fit other contents when
        anything is cut; a conversation cut by the budget in any form is then not
        fitted (:meth:`result` fits it when asked)."""
        self.contents, self.budget, self.counter = contents, budget, counter
        self._forms: dict[tuple[int, int], _Form] = like._forms if like is not None else {}
        self._keep: list[Sequence[SectionContent]] = [
            *(like._keep if like is not None else ()),
            contents,
        ]
        """The contents the forms were computed for (their ids stay theirs)."""
        self.states = _fit_once(contents, budget, counter, self._forms, outcomes_only)

    def outcomes(self) -> list[tuple[str, Rule]]:
        """``(tag, outcome)`` of each section, in order."""
        return [(s.spec.tag, s.rule) for s in self.states]

    def result(self) -> FitResult:
        """Render, count exactly, refit with the overrun taken off when over (rare)."""
        contents, budget, counter = self.contents, self.budget, self.counter
        states, effective, refits = self.states, budget, 0
        if any(s.deferred for s in states):
            states = _fit_once(contents, budget, counter, self._forms)
        while True:
            rendered, exact = _render(states, counter)
            if exact <= budget:
                break
            refits += 1
            effective -= exact - budget
            if refits > 4 or effective < 1:
                raise BudgetExceededError(exact, budget, what="the fitted context")
            try:
                states = _fit_once(contents, effective, counter, self._forms)
            except BudgetExceededError as exc:
                # A refit after a boundary merge: report against the caller's budget.
                raise BudgetExceededError(
                    exc.needed + budget - effective, budget, what="the fitted context"
                ) from None
        sections = tuple(_fitted(s, budget) for s in states)
        return filled(FitResult, sections=sections, rendered=rendered, total=exact, refits=refits)


def fit(contents: Sequence[SectionContent], budget: int, counter: TokenCounter) -> FitResult:
    """Fit sections (in rendering order) into ``budget`` tokens of rendered text.

    Raises :class:`BudgetExceededError` (saying by how much) when pinned content
    and the latest user turn alone do not fit.
    """
    return Draft(contents, budget, counter).result()
