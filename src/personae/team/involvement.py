"""Involvement level from the task type only (never from earlier failures).

The validator's model call decides the level (``Verdict.involvement_level``);
:func:`involvement_for` is the offline keyword rule used when no model call is
made (checks decided in code) or the model gives none. Its accuracy on a
labelled set of task phrasings is pinned by ``tests/test_team_involvement.py``.
"""

from __future__ import annotations

import re

from personae.team.signals import InvolvementLevel

__all__ = ["involvement_for"]

# Asking for checking of results: verbs and the usual shorthands (QA, double-check).
_CHECK = re.compile(
    r"\b(verify|verifies|verification|validate|double[- ]?check|re-?check|cross[- ]check|"
    r"sanity[- ]check|check (?:that|whether|if|for errors)|make sure|ensure|prove|assert|"
    r"confirm|audit|qa|proof-?read)\b",
    re.IGNORECASE,
)
# Testing as the work itself ("run the tests", "test the parser").
_TEST = re.compile(r"\b(test|tests|testing|unit[- ]test)\b", re.IGNORECASE)
# Writing a document *about* testing is writing, not testing ("write a testing plan doc").
_DOC = re.compile(
    r"\b(write|draft|create|prepare|outline|document|describe|summari[sz]e)\b.*?"
    r"\b(plan|doc|docs|document|documentation|guide|strategy|checklist|readme|section|"
    r"proposal|report|notes|outline)\b",
    re.IGNORECASE,
)
_INFO = re.compile(
    r"^\s*(?:(?:could|can|would) you\s+|please\s+)?(what|who|when|where|which|why|"
    r"how (?:does|do|is|are|many|much)|explain|describe|summari[sz]e|list|show|tell me|"
    r"find out|look up|read)\b",
    re.IGNORECASE,
)
_CHANGE = re.compile(
    r"\b(write|create|edit|change|modify|fix|add|remove|delete|rename|refactor|implement|"
    r"update|install|run|deploy|generate|save)\b",
    re.IGNORECASE,
)


def involvement_for(task: str) -> InvolvementLevel:
    """The keyword rule: ``thorough`` when the user asks to check, verify, QA or test
    results (not when the task is to write a document about testing); ``minimal``
    for information-only requests; ``standard`` otherwise. Depends on the text alone."""
    if _CHECK.search(task):
        return InvolvementLevel.THOROUGH
    if _TEST.search(task) and not _DOC.search(task):
        return InvolvementLevel.THOROUGH
    if _INFO.search(task) and not _CHANGE.search(task):
        return InvolvementLevel.MINIMAL
    return InvolvementLevel.STANDARD
