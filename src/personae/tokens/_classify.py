"""Content classes for token estimates (private).

Text is split into lines; each line's characters are assigned to one content
class by character-class features (CJK by code point; random-looking runs such as hashes,
UUIDs and base64 as ``ids``; the rest of each ASCII line by its
share of digits, punctuation and indentation). Non-ASCII characters outside
CJK are classed as ``other`` (letters of other scripts) or ``symbol``
(emoji and pictographs), both counted pessimistically.
"""

from __future__ import annotations

import re

__all__: list[str] = []

CLASSES: tuple[str, ...] = (
    "prose", "code", "data", "dense", "ids", "repeat", "cjk", "other", "symbol"
)  # fmt: skip
"""The content classes, in report order (each also bound to its own name below)."""
PROSE, CODE, DATA, DENSE, IDS, REPEAT, CJK, OTHER, SYMBOL = CLASSES

_CJK_RE = re.compile(
    "["
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi
    "\u3000-\u303f"  # CJK symbols and punctuation
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u31ff"  # Bopomofo, Hangul compatibility, Katakana ext
    "\u3200-\u4dbf"  # enclosed CJK, CJK ext A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f\uac00-\ud7ff"  # Hangul
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\ufe30-\ufe4f"  # CJK compatibility forms
    "\uff00-\uffef"  # half/full width forms
    "\U00020000-\U0003ffff"  # CJK ext B and beyond
    "]"
)
# Emoji, pictographs, dingbats, box drawing, private use, variation selectors,
# zero-width joiners: few characters, many tokens each.
_SYMBOL_RE = re.compile(
    "[\u2000-\u2bff\ue000-\uf8ff\ufe00-\ufe0f\U0001f000-\U0001ffff\U000e0000-\U000fffff]"
)

# Random-looking runs (hashes, UUIDs, base64, request ids): letters and digits
# alternate, which BPE vocabularies split into very short tokens. Candidates are
# runs of 8+ word characters; ``_is_random`` keeps those with a digit, a letter
# and at least three letter/digit alternations, so ``render_46`` or
# ``b64decode`` stay words. (Hex dumps, as pairs, are ``dense`` lines.)
_IDS_RE = re.compile(r"[A-Za-z0-9_+/-]{8,}=*")
_ALTERNATION = re.compile(r"[A-Za-z][0-9]|[0-9][A-Za-z]")
# Runs of one repeated character (rules, separators, padding) compress well,
# but only for ASCII and a few rule characters: a run of one CJK character or
# of most symbols stays about one token (or more) per character.
_REPEAT_RE = re.compile("([\t\x20-\x7e\u2500\u2014\u2026])\\1{7,}")
_REPEAT_KEEP = 4


def _is_random(run: str) -> bool:
    return len(_ALTERNATION.findall(run)) >= 3


def _cut(pattern: re.Pattern[str], line: str, keep: int, accept: bool) -> tuple[str, int]:
    """Remove matches of ``pattern`` (or keep ``keep`` chars of each); return removed count."""
    removed = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal removed
        text = match.group(0)
        if accept and not _is_random(text):
            return text
        removed += len(text) - keep
        return text[:keep]

    return pattern.sub(replace, line), removed


_DIGITS = b"0123456789"
_PUNCT = b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_CODE_PUNCT = b"(){}[]=<>;|&*+\\`$@#^~"
_LONG_RUN = re.compile(rb"[A-Za-z0-9+/_-]{24}")
_ANY_DIGIT = re.compile(r"[0-9]")
_CODE_START = re.compile(
    rb"\s*(def |class |return\b|import |from \S+ import|if |elif |else:|for |while |try:|except|"
    rb"function |const |let |var |fn |pub |impl |func |package |#include|public |private |"
    rb"@\w|//|/\*|\*/|\$ |>>> |\.\.\. )"
)


def _class_of(line: bytes) -> str:
    """The content class of one ASCII line given as bytes (fast C-level counting)."""
    stripped = line.strip()
    if not stripped:
        return PROSE
    size = len(stripped)
    visible = size - stripped.count(b" ")
    digits = size - len(stripped.translate(None, _DIGITS))
    if digits * 4 >= visible:
        return DENSE
    if digits * 8 > visible or b'":' in stripped:
        return DATA
    if size > 2 and stripped[0] in b"{[" and stripped[-1] in b"{[,]}":
        return DATA
    punct = size - len(stripped.translate(None, _PUNCT))
    if punct * 2 >= visible >= 8:
        return DENSE
    if punct * 3 > visible or b"://" in stripped or _LONG_RUN.search(stripped) is not None:
        return DATA
    if b"`" in stripped or b" --" in stripped:  # inline code, command-line flags
        return CODE
    if punct * 6 > visible or _CODE_START.match(line) is not None:
        return CODE
    indent = len(line) - len(line.lstrip(b" \t"))
    code_punct = size - len(stripped.translate(None, _CODE_PUNCT))
    if (indent >= 2 and punct * 8 > visible) or code_punct * 12 > visible:
        return CODE
    return PROSE


def classify_line(line: str) -> str:
    """The content class of one ASCII line: ``prose``, ``code``, ``data`` or ``dense``.

    ``dense`` lines are mostly digits or punctuation (CSV, timestamps, regexes).
    """
    return _class_of(line.encode("ascii", "ignore"))


def profile(text: str) -> dict[str, int]:
    """Characters of ``text`` per content class (every character counted once).

    Whole-text passes first (repeated runs, CJK, symbols, other scripts,
    random-looking IDs), then each remaining ASCII line is classified.
    """
    counts = dict.fromkeys(CLASSES, 0)
    rest = text
    if _REPEAT_RE.search(rest) is not None:
        rest, counts[REPEAT] = _cut(_REPEAT_RE, rest, _REPEAT_KEEP, False)
    if not rest.isascii():
        before = len(rest)
        rest = _CJK_RE.sub("", rest)
        counts[CJK] = before - len(rest)
        before = len(rest)
        rest = _SYMBOL_RE.sub("", rest)
        counts[SYMBOL] = before - len(rest)
        before = len(rest)
        rest = rest.encode("ascii", "ignore").decode("ascii")
        counts[OTHER] = before - len(rest)
    if _ANY_DIGIT.search(rest) is not None:
        rest, counts[IDS] = _cut(_IDS_RE, rest, 0, True)
    lines = rest.encode("ascii").split(b"\n")
    for line in lines:
        # the line break belongs to its line
        counts[_class_of(line)] += len(line) + 1
    counts[_class_of(lines[-1])] -= 1  # no line break after the last line
    return counts
