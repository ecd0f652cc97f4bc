"""personae.context: what each agent sees, fitted to an exact token budget.

``Snapshot.build(..., window=...)`` once per turn (one ``ContextWindow`` per
session, kept by the agent loop); ``assemble_snapshot(snapshot, role, budget, counter)``
for each role; ``.render()`` gives the prompt text, ``.report()`` the budget report.

Names load on first use (a leaf such as ``personae.context.budget`` does not load the
whole engine). ``fit`` is also a module's name: import it from ``personae.context.fit``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from personae._lazy import lazy_front

if TYPE_CHECKING:
    from personae.context.assemble import AssembledContext, assemble_snapshot
    from personae.context.budget import DEFAULT_SHARE, Budget
    from personae.context.fit import FitResult, FittedSection, SectionContent
    from personae.context.messages import ChatMessage, ChatToolCall
    from personae.context.profiles import ProfileSet, load_profiles
    from personae.context.render import escape
    from personae.context.report import BudgetReport, SectionReport
    from personae.context.snapshot import Snapshot, Summarizer
    from personae.context.spec import Profile, SectionSpec, Truncation
    from personae.context.window import ContextWindow

__all__ = [
    "DEFAULT_SHARE",
    "AssembledContext",
    "Budget",
    "BudgetReport",
    "ChatMessage",
    "ChatToolCall",
    "ContextWindow",
    "FitResult",
    "FittedSection",
    "Profile",
    "ProfileSet",
    "SectionContent",
    "SectionReport",
    "SectionSpec",
    "Snapshot",
    "Summarizer",
    "Truncation",
    "assemble_snapshot",
    "escape",
    "load_profiles",
]

__getattr__ = lazy_front(
    __name__,
    {
        "AssembledContext": "personae.context.assemble",
        "assemble_snapshot": "personae.context.assemble",
        "DEFAULT_SHARE": "personae.context.budget",
        "Budget": "personae.context.budget",
        "FitResult": "personae.context.fit",
        "FittedSection": "personae.context.fit",
        "SectionContent": "personae.context.fit",
        "ChatMessage": "personae.context.messages",
        "ChatToolCall": "personae.context.messages",
        "ProfileSet": "personae.context.profiles",
        "load_profiles": "personae.context.profiles",
        "escape": "personae.context.render",
        "BudgetReport": "personae.context.report",
        "SectionReport": "personae.context.report",
        "Snapshot": "personae.context.snapshot",
        "Summarizer": "personae.context.snapshot",
        "Profile": "personae.context.spec",
        "SectionSpec": "personae.context.spec",
        "Truncation": "personae.context.spec",
        "ContextWindow": "personae.context.window",
    },
)
