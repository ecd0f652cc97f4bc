"""How the scripted server cuts a streamed answer's text: word by word, like a model."""

from __future__ import annotations

import re

__all__ = ["text_pieces"]

_PIECE = re.compile(r"\s*\S+|\s+$")


def text_pieces(text: str) -> list[str]:
    """``text`` in pieces of one word each (with the whitespace before it); joined, they
    are ``text`` exactly. An empty text is one empty piece."""
    return _PIECE.findall(text) or [text]
