"""Does a hook matcher compile under the host's regex rules? A pure check.

Claude Code compiles matchers as ECMAScript regular expressions; Codex with
Rust's ``regex`` crate, which has no look-around, no backreferences, no
atomic groups or possessive quantifiers, and rejects the whole hook group
when one matcher fails. :func:`matcher_problem` walks the pattern (escapes
and character classes understood) for constructs the dialect lacks, then
compiles it with Python's ``re`` for ordinary syntax errors.
"""

from __future__ import annotations

import re

__all__ = ["DIALECTS", "matcher_problem"]

DIALECTS = ("ecmascript", "rust")
"""Supported matcher dialects."""

_RUST_GROUPS = {
    "(?=": "look-ahead",
    "(?!": "negative look-ahead",
    "(?<=": "look-behind",
    "(?<!": "negative look-behind",
    "(?>": "atomic group",
    "(?(": "conditional group",
    "(?#": "comment group",
}
_ECMA_GROUPS = {"(?P": "Python-style named group", "(?#": "comment group", "(?(": "conditional"}
_INLINE_FLAGS = re.compile(r"\(\?[aiLmsux]+\)")


def _escape_problem(pattern: str, i: int, dialect: str) -> str | None:
    nxt = pattern[i + 1 : i + 2]
    if dialect == "rust":
        if nxt.isdigit() and nxt != "0":
            return f"backreference \\{nxt} at {i} (Rust regex has no backreferences)"
        if nxt == "k" and pattern[i + 2 : i + 3] in ("<", "{", "'"):
            return f"named backreference at {i} (Rust regex has no backreferences)"
        if nxt == "Z":
            return f"\\Z at {i} (Rust regex has no \\Z; use \\z or $)"
    elif nxt in ("A", "Z"):
        return f"\\{nxt} at {i} (ECMAScript has no \\{nxt}; use ^ or $)"
    return None


def _scan(pattern: str, dialect: str) -> str | None:
    groups = _RUST_GROUPS if dialect == "rust" else _ECMA_GROUPS
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            problem = _escape_problem(pattern, i, dialect)
            if problem is not None:
                return problem
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            # A ']' right after '[' or '[^' is a literal member.
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                i += 1
        elif ch == "(":
            for prefix, what in groups.items():
                if pattern.startswith(prefix, i):
                    return f"{what} {prefix!r} at {i} is not supported by {dialect} regex"
            if dialect == "ecmascript" and _INLINE_FLAGS.match(pattern, i):
                return f"inline flags at {i} are not supported by ECMAScript regex"
        elif ch in "*+?}" and pattern[i + 1 : i + 2] == "+":
            return f"possessive quantifier at {i} ({dialect} regex has none)"
        i += 1
    return None


def matcher_problem(pattern: str, dialect: str) -> str | None:
    """Why ``pattern`` would not compile as a ``dialect`` matcher, or ``None`` when it would."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r} (valid: {', '.join(DIALECTS)})")
    problem = _scan(pattern, dialect)
    if problem is not None:
        return problem
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"invalid regex: {exc}"
    return None
