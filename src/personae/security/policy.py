"""Safety rules for handover files: confined paths, allow-listed env, no secrets.

A handover file is untrusted input. Nothing in it is executed; artifact paths
must resolve (symlinks followed) inside allowed roots; only allow-listed
environment variables are captured or applied; secrets are never written.
"""

from __future__ import annotations

import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Unpack

from personae.errors import ErrorPlace, UsageError
from personae.layout import user_data_dir
from personae.security.redact import is_secret_name, looks_like_secret, marker, redact_value

__all__ = [
    "DANGEROUS_ENV",
    "DEFAULT_ENV_ALLOW",
    "REDACTED",
    "REFUSED_ENV",
    "SCRATCH_ROOT",
    "HandoverSecurityError",
    "PathPolicy",
    "capture_environment",
    "check_environment",
    "check_path_text",
    "default_roots",
    "held_environment",
    "is_secret_name",
    "looks_like_secret",
    "redact_secrets",
    "user_data_dir",
]

DEFAULT_ENV_ALLOW: tuple[str, ...] = (
    "SLURM_JOB_ID",
    "PBS_JOBID",
    "LSF_JOBID",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "CONDA_DEFAULT_ENV",
)
"""Environment variables a handover may carry by default."""

REFUSED_ENV: frozenset[str] = frozenset(
    {
        "PATH",
        "LD_PRELOAD",
        "LD_AUDIT",
        "DYLD_INSERT_LIBRARIES",
        "NODE_OPTIONS",
        "BASH_ENV",
        "ENV",
        "SHELL",
        "IFS",
    }
)
"""Variables that inject code into whatever runs next: a handover carrying one is refused,
whatever the config says (PATH, LD_PRELOAD and NODE_OPTIONS among them)."""

DANGEROUS_ENV: frozenset[str] = frozenset(
    {
        "LD_LIBRARY_PATH",
        "DYLD_LIBRARY_PATH",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "MODULE_PATH",
        "MODULEPATH",
    }
)
"""Variables that change what runs but that HPC nodes set routinely (handover writers capture
``PYTHONPATH``, ``LD_LIBRARY_PATH`` and ``MODULE_PATH``): a handover carrying one is
accepted, the variable is recorded but not applied, with a warning, unless
``handover.env_allow`` in the project config names it."""

REDACTED = marker("secret-field")
"""What a value under a secret-named key is replaced with before a handover is written."""

MAX_ENV_VALUE = 1024


class HandoverSecurityError(UsageError):
    """A handover breaks a safety rule (path outside roots, refused variable ...)."""

    def __init__(
        self,
        message: str,
        *,
        index: int | None = None,
        **place: Unpack[ErrorPlace],
    ) -> None:
        super().__init__(message, **place)
        self.index = index
        """Position of the offending item in a batch check, if any."""


# --- paths -----------------------------------------------------------------

_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Characters that look like '/' or '.' but are not (NFKC keeps some of them).
_LOOKALIKES = frozenset("\u2215\u2044\u29f8\u2571\uff0f\u3033\u0338\u2024\u2025\u2026\ufe52\uff0e")


SCRATCH_ROOT = Path("/scratch")
"""The HPC scratch space allowed by default (a root only when it exists)."""


def default_roots(
    cwd: Path, handover_dir: Path | None = None, extra: Iterable[Path | str] = ()
) -> list[Path]:
    """The allowed roots: ``cwd``, the handover dir, the system temp dir, ``/scratch`` and
    the user's personae data folder (each only when it exists), plus ``extra``."""
    roots = [Path(cwd)]
    if handover_dir is not None:
        roots.append(Path(handover_dir))
    roots.append(Path(tempfile.gettempdir()))
    roots.extend(r for r in (SCRATCH_ROOT, user_data_dir()) if r.is_dir())
    roots.extend(Path(r) for r in extra)
    return roots


def check_path_text(text: str) -> None:
    """Refuse path spellings that hide traversal or confuse tools.

    Raises ValueError naming the reason (the caller adds the path and field).
    """
    if not text:
        raise ValueError("empty path")
    if text.isascii():
        bad = _ASCII_CONTROL.search(text)
        if bad is not None:
            ch = bad.group()
            if ch == "\x00":
                raise ValueError("contains a NUL byte")
            raise ValueError(f"contains control character U+{ord(ch):04X}")
    else:
        _check_unicode(text)
    if _PERCENT.search(text):
        raise ValueError("contains URL-encoded characters")
    if "\\" in text:
        raise ValueError("contains a backslash")
    if text.startswith("~"):
        raise ValueError("starts with '~' (home expansion is not done)")
    if ".." in text and any(part == ".." for part in text.split("/")):
        raise ValueError("contains a '..' component")


def _check_unicode(text: str) -> None:
    for ch in text:
        cat = unicodedata.category(ch)
        if ch == "\x00":
            raise ValueError("contains a NUL byte")
        if cat == "Cc":
            raise ValueError(f"contains control character U+{ord(ch):04X}")
        if cat == "Cs":
            raise ValueError("contains an unpaired surrogate (bad encoding)")
        if cat in {"Cf", "Co", "Cn"}:
            raise ValueError(f"contains invisible or unassigned character U+{ord(ch):04X}")
    if any(ch in _LOOKALIKES for ch in text):
        raise ValueError("contains a look-alike of '/' or '.'")
    if unicodedata.normalize("NFKC", text) != text:
        raise ValueError("is not in normal form (look-alike unicode characters)")


def _within(real: str, roots: Sequence[str]) -> bool:
    return any(real == r or real.startswith(r if r.endswith("/") else r + "/") for r in roots)


@dataclass(frozen=True, kw_only=True)
class PathPolicy:
    """Where artifact paths may point: inside any of ``roots`` (symlinks resolved)."""

    roots: Sequence[Path]
    """Allowed roots (resolved on use)."""
    _resolved: tuple[Path, ...] = field(init=False, repr=False, default=())
    _root_strs: tuple[str, ...] = field(init=False, repr=False, default=())
    _prefixes: tuple[str, ...] = field(init=False, repr=False, default=())

    def __post_init__(self) -> None:
        resolved = tuple(dict.fromkeys(Path(os.path.realpath(r)) for r in self.roots))
        object.__setattr__(self, "_resolved", resolved)
        object.__setattr__(self, "_root_strs", tuple(str(r) for r in resolved))
        prefixes = tuple(r if r.endswith("/") else r + "/" for r in self._root_strs)
        object.__setattr__(self, "_prefixes", prefixes)

    @property
    def resolved_roots(self) -> tuple[Path, ...]:
        """The roots with symlinks resolved."""
        return self._resolved

    def resolve(self, text: str, base: Path, *, what: str = "path") -> Path:
        """Resolve ``text`` against ``base`` and return it if it stays inside a root.

        Raises HandoverSecurityError naming the path otherwise.
        """
        return self.resolve_many([text], base, what=what)[0]

    def resolve_many(self, texts: Sequence[str], base: Path, *, what: str = "path") -> list[Path]:
        """:meth:`resolve` for many paths (directories resolved once per call)."""
        return [Path(p) for p in self.resolve_strings(texts, base, what=what)]

    def resolve_strings(
        self, texts: Sequence[str], base: Path | str, *, what: str = "path"
    ) -> list[str]:
        """:meth:`resolve_many` returning plain strings (cheaper for thousands of paths).

        Raises HandoverSecurityError with ``index`` set to the offending position.
        """
        dirs: dict[str, tuple[str, bool]] = {}
        out: list[str] = []
        base_s = os.path.realpath(base)
        roots, prefixes = frozenset(self._root_strs), self._prefixes
        candidates = [text if text.startswith("/") else f"{base_s}/{text}" for text in texts]
        links = _LinkProbe(candidates)
        for index, text in enumerate(texts):
            try:
                check_path_text(text)
            except ValueError as exc:
                raise HandoverSecurityError(
                    f"{what} {text!r} refused: {exc}", index=index
                ) from None
            candidate = candidates[index]
            real = self._real(candidate, dirs, links)
            if real not in roots and not real.startswith(prefixes):
                shown = f" (resolves to {real})" if real != os.path.normpath(candidate) else ""
                raise HandoverSecurityError(
                    f"{what} {text!r} refused: outside the allowed roots{shown}; "
                    f"allowed: {', '.join(self._root_strs)}",
                    index=index,
                )
            out.append(real)
        return out

    @staticmethod
    def _real(
        candidate: str, dirs: dict[str, tuple[str, bool]], links: _LinkProbe | None = None
    ) -> str:
        """``os.path.realpath`` with the parent directory's resolution cached."""
        head, _, name = candidate.rpartition("/")
        if name in {"", "."} or not head:
            return os.path.realpath(candidate)
        cached = dirs.get(head)
        if cached is None:
            real_head = os.path.realpath(head)
            cached = dirs[head] = (real_head, os.path.isdir(real_head))
        real_head, exists = cached
        joined = real_head + name if real_head.endswith("/") else f"{real_head}/{name}"
        # Only an existing directory can hold a symlink named ``name``.
        if not exists:
            return joined
        maybe_link = links.maybe_link(head, real_head, joined) if links else os.path.islink(joined)
        return os.path.realpath(joined) if maybe_link else joined

    def allows(self, path: Path) -> bool:
        """Whether ``path`` (symlinks resolved) is inside a root."""
        return _within(os.path.realpath(path), self._root_strs)


class _LinkProbe:
    """Answers "is ``dir/name`` a symlink?" for many names, listing busy folders once.

    A name can only resolve to a symlink if the folder holds at least one
    symlink entry. For a folder that many candidates share, one directory
    listing proves it holds none, which answers for every name in it without a
    ``lstat`` each (names not in the listing, on case-folding file systems
    too). Folders with a symlink, few candidates, or too many entries to list
    cheaply are asked per name with ``os.path.islink`` as before.
    """

    _MIN_NAMES = 32
    _ENTRIES_PER_NAME = 8

    def __init__(self, candidates: Sequence[str]) -> None:
        heads: dict[str, int] = {}
        for candidate in candidates:
            head = candidate.rpartition("/")[0]
            heads[head] = heads.get(head, 0) + 1
        self._budget = {h: n for h, n in heads.items() if n >= self._MIN_NAMES}
        self._link_free: dict[str, bool] = {}

    def maybe_link(self, head: str, real_head: str, joined: str) -> bool:
        """Whether ``joined`` (in the existing folder ``real_head``, spelled ``head``) is a link."""
        free = self._link_free.get(real_head)
        if free is None:
            names = self._budget.get(head, 0)
            if names < self._MIN_NAMES:
                return os.path.islink(joined)
            free = self._link_free[real_head] = _no_symlinks(
                real_head, names * self._ENTRIES_PER_NAME
            )
        return not free and os.path.islink(joined)


def _no_symlinks(folder: str, max_entries: int) -> bool:
    """True when ``folder`` (listed once) holds no symlink; False when unsure."""
    try:
        with os.scandir(folder) as entries:
            for seen, entry in enumerate(entries):
                if seen >= max_entries or entry.is_symlink():
                    return False
    except OSError:
        return False
    return True


# --- environment -------------------------------------------------------------


def _allow_set(extra: Iterable[str]) -> frozenset[str]:
    return frozenset(DEFAULT_ENV_ALLOW) | (frozenset(extra) - REFUSED_ENV)


def capture_environment(
    environ: Mapping[str, str] | None = None, extra_allow: Iterable[str] = ()
) -> dict[str, str]:
    """The allow-listed variables of ``environ`` that are set, minus anything secret-looking."""
    env = os.environ if environ is None else environ
    captured: dict[str, str] = {}
    for name in sorted(_allow_set(extra_allow)):
        value = env.get(name)
        if value is None or is_secret_name(name) or looks_like_secret(value):
            continue
        if len(value) > MAX_ENV_VALUE or "\x00" in value:
            continue
        captured[name] = value
    return captured


def check_environment(
    environment: Mapping[str, str], extra_allow: Iterable[str] = ()
) -> dict[str, str]:
    """Validate a loaded handover's environment; returns the variables that may be applied.

    Raises for a :data:`REFUSED_ENV` variable or a bad value. Any other variable
    not on the allow list (the :data:`DANGEROUS_ENV` ones included) is accepted
    but left out of the result: recorded in the file, never applied
    (:func:`held_environment` names them for the warning).
    """
    allowed = _allow_set(extra_allow)
    applicable: dict[str, str] = {}
    for name, value in environment.items():
        if name in REFUSED_ENV:
            raise HandoverSecurityError(
                f"environment variable {name!r} refused: it injects code into what runs"
            )
        if "\x00" in value or len(value) > MAX_ENV_VALUE:
            raise HandoverSecurityError(f"environment variable {name!r} refused: bad value")
        if name in allowed:
            applicable[name] = value
    return applicable


def held_environment(
    environment: Mapping[str, str], extra_allow: Iterable[str] = ()
) -> tuple[list[str], str | None]:
    """Variables recorded in a handover but not applied, and the warning naming them.

    The warning is ``None`` when every variable may be applied.
    """
    allowed = _allow_set(extra_allow)
    held = sorted(n for n in environment if n not in allowed and n not in REFUSED_ENV)
    if not held:
        return [], None
    risky = [n for n in held if n in DANGEROUS_ENV]
    why = "they change what runs" if risky == held else "they are not on the allow list"
    if risky and risky != held:
        why = f"{', '.join(risky)} change what runs; the rest are not on the allow list"
    return held, (
        f"source.environment: {', '.join(held)} recorded but not applied ({why}; allow them "
        "with handover.env_allow in .personae/config.yaml)"
    )


# --- secrets -----------------------------------------------------------------
# One redaction pass for all of personae: personae.security.redact.


def redact_secrets(value: Any) -> Any:
    """A copy of a JSON-like value with secrets replaced by ``[REDACTED:<kind>]`` markers.

    String values under secret-looking keys are replaced whole (:data:`REDACTED`);
    credential-shaped substrings and secret environment values anywhere are
    replaced in place (see :mod:`personae.security.redact`).
    """
    return redact_value(value)
