"""One redaction pass for secrets, applied before anything is stored or prompted.

Text from a handover file or from memory (memory files, the mind journal)
passes through :func:`redact` before it reaches ``state.db``, a handover file
or a prompt. Each secret is replaced by a marker naming what was removed,
``[REDACTED:<kind>]`` (``[REDACTED:openai-key]``, ``[REDACTED:env:GITHUB_TOKEN]``),
so a reader sees that something was there without seeing it.

What is found:

- credential shapes: OpenAI, Anthropic, GitHub, GitLab, Hugging Face, Slack,
  Stripe and Google API keys, AWS access key ids, JWTs, ``Bearer`` tokens,
  PEM private key blocks, passwords in URLs (``user:pw@host`` and
  ``?password=``), and ``NAME = value`` / ``"name": "value"`` where the name
  says it holds a secret (``api_key``, ``password``, ``client_secret`` ...);
- the values of the current environment's secret-named variables
  (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*`` ...), wherever they
  appear verbatim.

Environment values are hunted for only when they are 8 characters or longer,
and never for the variables the shell keeps (exactly ``PWD`` and ``OLDPWD``),
although ``pwd`` elsewhere reads as a password. Without this, the working
directory in ``$PWD`` was redacted out of every handover written from it.
Values are never exempted for their shape: a secret that happens to look like
a path (``/K7MDENG...``, a base64 key) is still a secret.

This module imports nothing from personae, so every layer can use it.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MARKER_PREFIX",
    "Redaction",
    "is_secret_name",
    "looks_like_secret",
    "marker",
    "only_references",
    "redact",
    "redact_text",
    "redact_value",
    "secret_env_values",
]

MARKER_PREFIX = "[REDACTED:"
"""Every marker starts with this."""

_MIN_ENV_VALUE = 8
_MIN_SHAPE = 14  # no credential shape below is shorter (the cheap early exit)

# (kind, pattern); a pattern with a group named "secret" replaces only that group.
_SHAPES: tuple[tuple[str, str], ...] = (
    (
        "private-key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
    ),
    ("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{16,}"),
    ("openai-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    ("gitlab-token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("huggingface-token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("slack-webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"),
    ("stripe-key", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{30,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("bearer-token", r"(?i:\bbearer)\s+(?P<secret>[A-Za-z0-9._~+/=-]{16,})"),
    ("basic-auth", r"(?i:\bbasic)\s+(?P<secret>[A-Za-z0-9+/]{12,}={0,2})"),
    ("url-password", r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:(?P<secret>[^\s@/]+)@"),
)
# Literal pieces a match must contain: text holding none of a shape's pieces
# skips that shape's pattern (most text holds none, and the scan stays cheap).
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "private-key": ("PRIVATE KEY-----",),
    "anthropic-key": ("sk-ant-",),
    "openai-key": ("sk-",),
    "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab-token": ("glpat-",),
    "huggingface-token": ("hf_",),
    "slack-token": ("xox",),
    "slack-webhook": ("hooks.slack.com",),
    "stripe-key": ("k_live_", "k_test_"),
    "aws-access-key": ("AKIA", "ASIA"),
    "google-api-key": ("AIza",),
    "jwt": ("eyJ",),
    "bearer-token": ("bearer",),  # looked up in the lower-cased text
    "basic-auth": ("basic",),
    "url-password": ("://",),
}
_FOLDED = frozenset({"bearer-token", "basic-auth"})
_PARTIAL = frozenset(i for i, (_, pattern) in enumerate(_SHAPES) if "(?P<secret>" in pattern)


@functools.lru_cache(maxsize=256)
def _shape_re(indices: tuple[int, ...]) -> re.Pattern[str]:
    """One pattern for the shapes ``indices``; groups ``k<i>`` (whole) and ``s<i>`` (secret)."""
    return re.compile(
        "|".join(f"(?P<k{i}>{_SHAPES[i][1].replace('(?P<secret>', f'(?P<s{i}>')})" for i in indices)
    )


def _candidates(text: str) -> tuple[int, ...]:
    folded = text.lower()
    return tuple(
        i
        for i, (kind, _) in enumerate(_SHAPES)
        if any(piece in (folded if kind in _FOLDED else text) for piece in _TRIGGERS[kind])
    )


# NAME = value, NAME: value, "name": "value", ?name=value (the name is checked in code).
_ASSIGN_RE = re.compile(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]{1,63})[\"']?[ \t]*(?:[:=]|=>)[ \t]*(?P<q>[\"']?)"
    r"(?P<secret>[^\s\"'&,;<>\[\]{}]{4,})"
)
_NAME_WORDS = ("key", "secret", "passw", "pwd", "token", "credential", "authorization", "cookie")
_NOT_VALUES = frozenset(
    {"true", "false", "null", "none", "yes", "no", "required", "optional", "bearer", "basic"}
)

_SECRET_NAME = re.compile(
    r"(^|_)(api_?key|apikey|secret|secret_?key|client_?secret|password|passwd|pwd|token|"
    r"auth_?token|access_?token|refresh_?token|id_?token|access_?key|private_?key|"
    r"credentials?|authorization|cookie|session_?key)(_|$)",
    re.IGNORECASE,
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_ENV_SECRET = re.compile(r"(_KEY|_TOKEN|_SECRET|_PAT)$|PASSWORD|PASSWD|SECRET|CREDENTIAL")
_SHELL_ENV = frozenset({"PWD", "OLDPWD"})  # kept by the shell: the working directories


_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token"})


def only_references(value: str) -> bool:
    """Whether ``value`` holds ``${NAME}`` references to environment variables and at most
    an auth scheme word (``${GITHUB_TOKEN}``, ``Bearer ${GITHUB_TOKEN}``): a name, never a
    secret, so it is kept even under a secret-named key."""
    if "${" not in value or not _REFERENCE.search(value):
        return False
    return all(word.lower() in _AUTH_SCHEMES for word in _REFERENCE.sub(" ", value).split())


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``: ``[REDACTED:kind]``."""
    return f"{MARKER_PREFIX}{kind}]"


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a key or variable name says it holds a secret (``API_KEY``, ``authToken`` ...)."""
    return bool(_SECRET_NAME.search(_CAMEL.sub("_", name).replace("-", "_").replace(".", "_")))


@functools.lru_cache(maxsize=1024)
def _secret_env_name(name: str) -> bool:
    """Whether a variable's name says its value is a secret to hunt for in text."""
    if name in _SHELL_ENV:
        return False
    return is_secret_name(name) or bool(_ENV_SECRET.search(name.upper()))


def _secret_env(name: str, value: str) -> bool:
    """Whether the variable ``name=value`` holds a secret to hunt for in text (the cache
    is keyed by the name alone, so every changed value is not one more entry)."""
    return len(value) >= _MIN_ENV_VALUE and not value.isspace() and _secret_env_name(name)


def secret_env_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{value: NAME}`` of the secret-named variables of ``environ`` (default ``os.environ``).

    Short values and the shell's ``PWD``/``OLDPWD`` are left out (see the
    module doc).
    """
    env = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for name, value in env.items():
        if _secret_env(name, value):
            found.setdefault(value, name)
    return found


@functools.lru_cache(maxsize=8)
def _env_pattern(values: frozenset[str]) -> re.Pattern[str] | None:
    if not values:
        return None
    longest_first = sorted(values, key=len, reverse=True)
    return re.compile("|".join(re.escape(v) for v in longest_first))


def looks_like_secret(value: str) -> bool:
    """Whether a string contains something shaped like a credential (environment not consulted)."""
    if len(value) < _MIN_SHAPE or not (indices := _candidates(value)):
        return False
    return _shape_re(indices).search(value) is not None


@dataclass(frozen=True)
class Redaction:
    """The redacted text and what was removed."""

    text: str
    """The text with every secret replaced by its marker."""
    kinds: tuple[str, ...] = ()
    """Kinds removed, in order of appearance (repeats kept)."""

    @property
    def changed(self) -> bool:
        """Whether anything was removed."""
        return bool(self.kinds)


def redact(text: str, *, environ: Mapping[str, str] | None = None) -> Redaction:
    """Replace every secret in ``text`` with ``[REDACTED:<kind>]``; see the module doc."""
    kinds: list[str] = []
    env_values = secret_env_values(environ)
    env_re = _env_pattern(frozenset(env_values))
    if env_re is not None and text:

        def env_sub(match: re.Match[str]) -> str:
            kind = f"env:{env_values[match.group(0)]}"
            kinds.append(kind)
            return marker(kind)

        text = env_re.sub(env_sub, text)
    if len(text) < 6:
        return Redaction(text, tuple(kinds))

    def shape_sub(match: re.Match[str]) -> str:
        index = int(str(match.lastgroup)[1:])
        kind = _SHAPES[index][0]
        kinds.append(kind)
        if index not in _PARTIAL:
            return marker(kind)
        whole, group = match.group(0), f"s{index}"
        start, end = match.start(group) - match.start(0), match.end(group) - match.start(0)
        return whole[:start] + marker(kind) + whole[end:]

    if len(text) >= _MIN_SHAPE and (indices := _candidates(text)):
        text = _shape_re(indices).sub(shape_sub, text)

    def assign_sub(match: re.Match[str]) -> str:
        value = match.group("secret")
        if not is_secret_name(match.group("name")) or value.lower() in _NOT_VALUES:
            return match.group(0)
        if value.startswith(MARKER_PREFIX.rstrip(":")):
            return match.group(0)
        kinds.append("secret-value")
        start = match.start("secret") - match.start(0)
        return match.group(0)[:start] + marker("secret-value")

    folded = text.lower()
    if any(word in folded for word in _NAME_WORDS):
        text = _ASSIGN_RE.sub(assign_sub, text)
    return Redaction(text, tuple(kinds))


def redact_text(text: str, *, environ: Mapping[str, str] | None = None) -> str:
    """:func:`redact` returning only the text."""
    return redact(text, environ=environ).text


_SCALARS = (int, float, bool)


def _secret_field(key: Any, item: Any) -> bool:
    if not (isinstance(item, str) and item and isinstance(key, str)):
        return False
    return is_secret_name(key) and not only_references(item)


def redact_value(value: Any, *, environ: Mapping[str, str] | None = None) -> Any:
    """A copy of a JSON-like value with secrets redacted.

    A non-empty string under a secret-named key is replaced whole
    (``[REDACTED:secret-field]``); every other string
    goes through :func:`redact`.
    Keys are kept; scalars that are not strings are kept.
    """
    if isinstance(value, str):
        return redact(value, environ=environ).text
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if _secret_field(key, item):
                out[key] = item if item.startswith(MARKER_PREFIX) else marker("secret-field")
            elif item is None or type(item) in _SCALARS:
                out[key] = item
            else:
                out[key] = redact_value(item, environ=environ)
        return out
    if isinstance(value, list | tuple):
        return [redact_value(item, environ=environ) for item in value]
    return value
