"""Assembling one role's context from a snapshot: profile -> sections -> fit -> render."""

from __future__ import annotations

import operator
from dataclasses import dataclass

from personae.context._filled import filled
from personae.context._lru import hold, recall, remember
from personae.context._textcut import count_small
from personae.context.budget import Budget
from personae.context.commands import expand_commands, has_commands
from personae.context.fit import (
    Draft,
    FitResult,
    FittedSection,
    SectionContent,
    known_cuts,
)
from personae.context.history import Exchanges, MessageCosts
from personae.context.messages import ChatMessage
from personae.context.profiles import ProfileSet, load_profiles
from personae.context.render import escape
from personae.context.report import BudgetReport, HistoryPath, SectionReport
from personae.context.rules import Action, Rule
from personae.context.snapshot import Snapshot
from personae.context.spec import Profile, SectionSource, SectionSpec, Truncation, section_keys
from personae.context.window import exchanges_of
from personae.project import CommandsConfig
from personae.tokens.base import TokenCounter

__all__ = ["WARNING_TAG", "AssembledContext", "assemble_snapshot"]


@dataclass(frozen=True)
class AssembledContext:
    """One role's fitted context."""

    role: str
    snapshot_id: str
    sections: tuple[FittedSection, ...]
    """Every section of the profile, in order (``text`` None when not rendered)."""
    rendered: str
    total: int
    """Exact token count of ``rendered``."""
    budget: Budget
    counter: str
    counter_exact: bool
    history_path: HistoryPath
    files: dict[str, str]
    refits: int = 0
    warnings: tuple[str, ...] = ()

    @property
    def messages(self) -> tuple[ChatMessage, ...]:
        """The conversation messages kept (whole exchanges), oldest first."""
        for s in self.sections:
            if s.source == SectionSource.MESSAGES:
                return s.messages
        return ()

    def render(self) -> str:
        """The prompt text: XML boundary tags wrapping Markdown, in profile order."""
        return self.rendered

    def report(self) -> BudgetReport:
        """The budget report (``total`` is the exact count of :meth:`render`)."""
        rows = [
            SectionReport(
                tag=s.tag,
                source=s.source,
                requested=s.requested,
                allotted=s.allotted,
                kept=s.kept if s.text is not None else 0,
                rule=s.rule,
                detail=self.files.get(s.key or s.source, ""),
                target=s.target,
            )
            for s in self.sections
        ]
        kept = sum(r.kept for r in rows)
        return BudgetReport(
            role=self.role,
            snapshot_id=self.snapshot_id,
            counter=self.counter,
            counter_exact=self.counter_exact,
            history_path=self.history_path,
            budget=self.budget.tokens,
            window=self.budget.window,
            share=self.budget.share,
            total=self.total,
            overhead=self.total - kept,
            refits=self.refits,
            sections=rows,
            warnings=list(self.warnings),
        )


_COSTS: dict[tuple[int, str, frozenset[str]], MessageCosts] = {}
"""Message cost counters by counter (its id and name: the counter itself is checked)
and tag set: one is built per counter and tag set, not per assembly (it counts its
separator when built)."""


def _costs_of(counter: TokenCounter, tags: frozenset[str]) -> MessageCosts:
    key = (id(counter), counter.name, tags)
    got = _COSTS.get(key)
    if got is None or got.counter is not counter:
        got = hold(_COSTS, key, MessageCosts(counter, tags), 64)
    return got


def _prepared(
    snapshot: Snapshot, counter: TokenCounter, tags: frozenset[str]
) -> tuple[Exchanges, int]:
    """Escaped exchanges prepared for fitting: through the snapshot's window (only
    what it has not prepared yet), else from scratch."""
    costs_of = _costs_of(counter, tags)
    if snapshot.window is not None:
        return snapshot.window.exchanges(snapshot.messages, costs_of)
    return exchanges_of(snapshot.messages, costs_of)


def _text(snapshot: Snapshot, spec: SectionSpec, profile: Profile) -> str | None:
    source = spec.source
    if source is SectionSource.TEXT:
        raw = spec.text
        if not raw:
            return None
        if raw in snapshot.profile_texts:
            return snapshot.profile_texts[raw]
        if has_commands(raw):  # not expanded at build time: never run here
            return expand_commands(raw, CommandsConfig(), snapshot.root)[0]
        return raw
    if (
        source is SectionSource.STEP
        and snapshot.step_without_decisions is not None
        and "decisions" in snapshot.texts
        and any(s.source is SectionSource.DECISIONS for s in profile.sections)
    ):
        return snapshot.step_without_decisions
    return snapshot.content(section_keys(spec)[0])


_MAX_CONTENTS = 256
"""Text sections remembered per window (one per section spec and counter)."""


def _text_content(
    snapshot: Snapshot, spec: SectionSpec, text: str, tags: frozenset[str], counter: TokenCounter
) -> SectionContent:
    """A text section's escaped content and counts; the window's from an earlier turn
    when the spec, the texts (the same objects: files not read again) and tags are."""
    alt = snapshot.content(section_keys(spec)[1])
    memo = snapshot.window.contents if snapshot.window is not None else None
    key = (id(spec), counter.name)
    if memo is not None:
        got = recall(memo, key)
        if got is not None and all(map(operator.is_, got[:4], (spec, text, alt, tags))):
            return got[4]  # type: ignore[no-any-return]
    escaped = escape(text, tags)
    alt_escaped = escape(alt, tags) if alt is not None else None
    content = SectionContent(
        spec,
        text=escaped,
        tokens=count_small(counter, escaped),
        alternative=alt_escaped,
        alt_tokens=count_small(counter, alt_escaped) if alt_escaped is not None else None,
    )
    if memo is not None:
        remember(memo, key, (spec, text, alt, tags, content), _MAX_CONTENTS)
    return content


def _contents(
    snapshot: Snapshot,
    profile: Profile,
    tags: frozenset[str],
    counter: TokenCounter,
    hint: int | None,
) -> list[SectionContent]:
    """Each section's content for fitting: the window's from the last assembly with the
    same profile, counter and tags when it had the same hint, the same messages object
    (so the same prepared exchanges) and the same text objects; else prepared (only what
    the window has not prepared yet) and remembered in its place (one per profile,
    counter and tags: a session's older conversations are not kept alive)."""
    texts = [
        None if spec.source is SectionSource.MESSAGES else _text(snapshot, spec, profile)
        for spec in profile.sections
    ]
    memo = snapshot.window.contents if snapshot.window is not None else None
    key = ("contents", id(profile), id(counter), counter.name, tags)
    if memo is not None:
        got = recall(memo, key)
        if (
            got is not None
            and got[0] is profile
            and got[1] is counter
            and got[2] is snapshot.messages
            and got[3] == (snapshot.earlier, hint)
            and all(map(operator.is_, got[4], texts))
            and all(map(operator.is_, got[5], _summaries(snapshot, profile)))
        ):
            return got[6]  # type: ignore[no-any-return]
    contents: list[SectionContent] = []
    for spec, text in zip(profile.sections, texts, strict=True):
        if spec.source is SectionSource.MESSAGES:
            ex, dropped = _prepared(snapshot, counter, tags)
            contents.append(
                filled(
                    SectionContent, spec=spec, text=None, units=ex.units, costs=ex.costs,
                    earlier=snapshot.earlier + dropped, tokens=None, alternative=None,
                    alt_tokens=None, keep_from=hint, exchanges=ex,
                )
            )  # fmt: skip
        elif text is None:
            contents.append(SectionContent(spec))
        else:
            contents.append(_text_content(snapshot, spec, text, tags, counter))
    if memo is not None:
        held = (profile, counter, snapshot.messages, (snapshot.earlier, hint), texts)
        remember(memo, key, (*held, _summaries(snapshot, profile), contents), _MAX_CONTENTS)
    return contents


def _summaries(snapshot: Snapshot, profile: Profile) -> list[str | None]:
    """The summary file of each section (what :func:`_text_content` shortens to)."""
    return [snapshot.content(section_keys(spec)[1]) for spec in profile.sections]


WARNING_TAG = "context_warning"
"""Section added (before a trailing ``instructions``) when the context had to be cut."""

_WARNING_SPEC = SectionSpec(
    tag=WARNING_TAG, source=SectionSource.TEXT, priority=95, truncation=Truncation.DROP
)


_CUT_ACTIONS = (Action.REMOVED, Action.SHRUNK)


def _cut_tags(outcomes: list[tuple[str, Rule]]) -> list[str]:
    return [
        tag
        for tag, rule in outcomes
        if tag != WARNING_TAG
        and (
            rule.bound in ("budget", "share")
            or (rule.bound is None and rule.action in _CUT_ACTIONS)
        )
    ]


def _warning_text(tags: list[str]) -> str:
    return (
        "This context was shortened to fit its token budget: "
        + ", ".join(tags)
        + " (cut, outlined, summarized or left out; notices mark where). Read the files"
        " with your tools when you need what is missing."
    )


_WARNINGS: dict[tuple[str, tuple[str, ...]], SectionContent] = {}
"""The warning section naming each set of cut sections, by counter name: the same
text object assembly after assembly (its count and its rendering are found again)."""


def _warning(cut: list[str], counter: TokenCounter) -> SectionContent:
    """The ``context_warning`` section that names the ``cut`` sections."""
    key = (counter.name, tuple(cut))
    got = _WARNINGS.get(key)
    if got is None:
        text = _warning_text(cut)
        got = filled(
            SectionContent, spec=_WARNING_SPEC, text=text, units=(), costs=(), earlier=0,
            tokens=count_small(counter, text), alternative=None, alt_tokens=None,
            keep_from=None, exchanges=None,
        )  # fmt: skip
        hold(_WARNINGS, key, got, 256)
    return got


def _fit_with_warning(
    contents: list[SectionContent], budget: int, counter: TokenCounter
) -> FitResult:
    """Fit; when anything had to be cut, fit again with a ``context_warning`` section
    that names what was cut (until the named sections are the ones cut). Only the
    fitting kept is rendered and counted exactly. The first fitting is skipped when
    what it would name is known without it (:func:`~personae.context.fit.known_cuts`:
    a conversation over the budget beside pinned sections)."""
    known = known_cuts(contents, budget)
    draft = None if known is not None else Draft(contents, budget, counter, outcomes_only=True)
    named: list[str] = []
    for _ in range(3):
        cut = _cut_tags(draft.outcomes()) if draft is not None else known or []
        if cut == named or not cut:
            break
        named = cut
        note = _warning(cut, counter)
        at = len(contents)
        if contents and contents[-1].spec.tag == "instructions":
            at -= 1
        draft = Draft([*contents[:at], note, *contents[at:]], budget, counter, like=draft)
    assert draft is not None  # a known cut is never empty
    return draft.result()


def assemble_snapshot(
    snapshot: Snapshot,
    role: str,
    budget: Budget,
    counter: TokenCounter,
    *,
    profiles: ProfileSet | None = None,
    profile: Profile | None = None,
) -> AssembledContext:
    """Fit the snapshot into ``budget`` for ``role``.

    ``profile`` assembles with that profile instead of ``role``'s own (the
    report still names ``role``). Same snapshot, budget and counter give
    byte-identical output. Raises :class:`~personae.errors.BudgetExceededError`
    when pinned content alone does not fit, and
    :class:`~personae.errors.UnknownNameError` for an unknown role.
    """
    profiles = profiles or snapshot.profiles or load_profiles(snapshot.root)
    if profile is None:
        profile = profiles.get(role)
    tags = profiles.tags
    window = snapshot.window if snapshot.messages else None
    hint_key = (counter.name, tags, profile.role, budget.tokens)
    hint = window.kept_from(hint_key, snapshot.id) if window is not None else None
    contents = _contents(snapshot, profile, tags, counter, hint)
    result = _fit_with_warning(contents, budget.tokens, counter)
    if window is not None:
        kept = next((s.messages for s in result.sections if s.source == SectionSource.MESSAGES), ())
        window.remember_kept_from(hint_key, snapshot.id, hint, kept[0].seq if kept else None)
    return filled(
        AssembledContext,
        role=role if profile.role == role else f"{role} (profile {profile.role})",
        snapshot_id=snapshot.id,
        sections=result.sections,
        rendered=result.rendered,
        total=result.total,
        budget=budget,
        counter=counter.name,
        counter_exact=bool(getattr(counter, "exact", False)),
        history_path=snapshot.history_path,
        files=dict(snapshot.files),
        refits=result.refits,
        warnings=snapshot.warnings,
    )
