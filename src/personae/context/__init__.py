"""personae.context: what each agent sees, fitted to an exact token budget.

``Snapshot.build(..., window=...)`` once per turn (one ``ContextWindow`` per
session, kept by the agent loop); ``assemble_snapshot(snapshot, role, budget, counter)``
for each role; ``.render()`` gives the prompt text, ``.report()`` the budget report.
"""

from personae.context.assemble import AssembledContext, assemble_snapshot
from personae.context.budget import DEFAULT_SHARE, Budget
from personae.context.fit import FitResult, FittedSection, SectionContent, fit
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
    "fit",
    "load_profiles",
]
