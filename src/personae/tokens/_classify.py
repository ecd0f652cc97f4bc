"""Content classes for token estimates (private).

Text is split into lines; each line's characters are assigned to one content
class by character-class features (CJK by code point; ASCII lines by their
share of digits, punctuation and indentation). Non-ASCII characters outside
CJK are classed as ``other`` (letters of other scripts) or ``symbol``
(emoji and pictographs), both counted pessimistically.
"""

from __future__ import annotations

import re

__all__: list[str] = []

PROSE = "prose"
CODE = "code"
DATA = "data"
CJK = "cjk"
OTHER = "other"
SYMBOL = "symbol"
CLASSES: tuple[str, ...] = (PROSE, CODE, DATA, CJK, OTHER, SYMBOL)

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

_DIGITS = str.maketrans("", "", "0123456789")
_PUNCT = str.maketrans("", "", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_CODE_PUNCT = str.maketrans("", "", "(){}[]=<>;|&*+\\`$@#^~")
_HEXY = re.compile(r"[0-9a-fA-F]{8,}|[A-Za-z0-9+/_-]{24,}")
_CODE_START = re.compile(
    r"\s*(def |class |return\b|import |from \S+ import|if |elif |else:|for |while |try:|except|"
    r"function |const |let |var |fn |pub |impl |func |package |#include|public |private |"
    r"@\w|//|/\*|\*/|\$ |>>> |\.\.\. )"
)


def _share(line: str, table: dict[int, int | None]) -> int:
    """How many characters of ``line`` are deleted by ``table``."""
    return len(line) - len(line.translate(table))


def classify_line(line: str) -> str:
    """The content class of one ASCII line (``prose``, ``code`` or ``data``)."""
    stripped = line.strip()
    if not stripped:
        return PROSE
    visible = len(stripped) - stripped.count(" ")
    digits = _share(stripped, _DIGITS)
    punct = _share(stripped, _PUNCT)
    code_punct = _share(stripped, _CODE_PUNCT)
    first = stripped[0]
    if (
        digits * 8 > visible
        or first in '{["'
        or '":' in stripped
        or _HEXY.search(stripped) is not None
        or punct * 3 > visible
    ):
        return DATA
    indent = len(line) - len(line.lstrip(" \t"))
    if (
        code_punct * 12 > visible
        or _CODE_START.match(line) is not None
        or (indent >= 2 and punct * 8 > visible)
        or punct * 6 > visible
    ):
        return CODE
    return PROSE


def profile(text: str) -> dict[str, int]:
    """Characters of ``text`` per content class (every character counted once)."""
    counts = dict.fromkeys(CLASSES, 0)
    lines = text.split("\n")
    last = len(lines) - 1
    for index, raw in enumerate(lines):
        line = raw
        if not line.isascii():
            rest = line
            cjk = len(_CJK_RE.findall(rest))
            if cjk:
                rest = _CJK_RE.sub("", rest)
            symbols = len(_SYMBOL_RE.findall(rest))
            if symbols:
                rest = _SYMBOL_RE.sub("", rest)
            line = rest.encode("ascii", "ignore").decode("ascii")
            counts[CJK] += cjk
            counts[SYMBOL] += symbols
            counts[OTHER] += len(rest) - len(line)
        # the line break belongs to its line
        counts[classify_line(line)] += len(line) + (index != last)
    return counts
