"""The mind contract: a prompt file assembled from ``@include`` lines.

An ``@include path`` line is replaced by the text of ``path``, resolved
relative to the including file and confined to the directory of the top
prompt file (symlinks resolved). Includes nest; cycles, missing files,
escapes and oversized results are failures. Any failure gives an
unavailable contract whose text starts with :data:`ERROR_PREFIX`; that same
text is what ``get_system_prompt()`` returns, so hosts see one story.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from personae.fsutil import read_regular

__all__ = ["ERROR_PREFIX", "MAX_CONTRACT_BYTES", "Contract", "load_contract"]

ERROR_PREFIX = "ERROR: personae mind contract failed to assemble"
"""Every unavailable contract text starts with this."""

MAX_CONTRACT_BYTES = 1_000_000
"""Assembled contracts larger than this are refused."""

_MAX_DEPTH = 16
_MAX_BYTES = 2_000_000
_INCLUDE = re.compile(r"^[ \t]*@include[ \t]+(.+?)[ \t]*$")


@dataclass(frozen=True)
class Contract:
    """An assembled (or failed) mind contract."""

    text: str
    """The contract text, or the error text starting with ERROR_PREFIX."""
    available: bool
    """True when the contract assembled without any problem."""
    reason: str | None = None
    """Why the contract is unavailable (None when available)."""
    sources: tuple[str, ...] = field(default_factory=tuple)
    """Files that went into the contract, relative to the prompt directory."""

    @property
    def hash(self) -> str:
        """sha256 of the contract text (hex)."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


class _AssemblyError(Exception):
    pass


def load_contract(prompt: Path | None) -> Contract:
    """Assemble the contract from ``prompt``; never raises for a bad prompt."""
    if prompt is None:
        return _failed("no prompt file configured (use --prompt FILE)")
    try:
        root = prompt.resolve().parent
        top = prompt.resolve()
    except OSError as exc:
        return _failed(f"cannot resolve prompt path {prompt}: {exc.strerror}")
    if not top.exists():  # a FIFO or device is refused by name when read below
        return _failed(f"prompt file not found: {prompt}")
    sources: list[str] = []
    try:
        text = _assemble(top, root, (), sources, 0)
    except _AssemblyError as exc:
        return _failed(str(exc))
    if len(text.encode("utf-8")) > MAX_CONTRACT_BYTES:
        return _failed(f"assembled contract exceeds {MAX_CONTRACT_BYTES} bytes")
    if not text.strip():
        return _failed(f"prompt file is empty: {prompt}")
    return Contract(text=text, available=True, sources=tuple(sources))


def _failed(reason: str) -> Contract:
    text = (
        f"{ERROR_PREFIX}: {reason}. The persona's mind contract is unavailable: "
        "do not impersonate the persona; say the mind is degraded."
    )
    return Contract(text=text, available=False, reason=reason)


def _assemble(
    path: Path, root: Path, stack: tuple[Path, ...], sources: list[str], depth: int
) -> str:
    rel = _rel(path, root)
    if path in stack:
        chain = " -> ".join(_rel(p, root) for p in (*stack, path))
        raise _AssemblyError(f"@include cycle: {chain}")
    if depth > _MAX_DEPTH:
        raise _AssemblyError(f"@include nested deeper than {_MAX_DEPTH} levels at {rel}")
    try:
        raw = read_regular(path, max_bytes=_MAX_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise _AssemblyError(f"{rel}: not UTF-8 text") from None
    except OSError as exc:
        raise _AssemblyError(f"{rel}: cannot read: {exc.strerror}") from None
    sources.append(rel)
    out: list[str] = []
    for number, line in enumerate(raw.splitlines(keepends=True), start=1):
        match = _INCLUDE.match(line.rstrip("\r\n"))
        if match is None:
            out.append(line)
            continue
        target_text = match.group(1).strip().strip("\"'")
        target = Path(target_text)
        where = f"{rel}:{number}"
        if target.is_absolute():
            raise _AssemblyError(f"{where}: @include must be a relative path: {target_text}")
        resolved = (path.parent / target).resolve()
        if not resolved.is_relative_to(root):
            raise _AssemblyError(f"{where}: @include escapes the prompt directory: {target_text}")
        if not resolved.is_file():
            raise _AssemblyError(f"{where}: @include file not found: {target_text}")
        included = _assemble(resolved, root, (*stack, path), sources, depth + 1)
        if included and not included.endswith("\n"):
            included += "\n"
        out.append(included)
    return "".join(out)


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
