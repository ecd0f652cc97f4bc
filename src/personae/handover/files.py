"""Reading and writing handover files: JSON or YAML, size-limited, atomic, locked.

``read_handover`` redacts secrets (``personae.security.redact``) from what it
reads and never crashes on a bad file: unreadable, too large, not
UTF-8, truncated, malformed, wrong shape, newer major version and unsafe
content all raise a :class:`~personae.errors.UsageError` naming the file (and
field or line where known). ``save_handover`` redacts secrets, then writes a
temp file beside the target and renames it over (``os.replace``) while
holding ``<file>.lock`` (removed again on release; temp files a killed writer
left are removed under the lock).
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pydantic_core
import yaml
from filelock import Timeout
from pydantic import ValidationError

from personae.errors import UsageError
from personae.fsutil import (
    NotRegularFileError,
    locked,
    read_regular,
    remove_stale_temps,
    write_atomic,
)
from personae.handover.schema import MAX_FILE_BYTES, SUPPORTED_MAJOR, ContextHandover
from personae.security.policy import (
    HandoverSecurityError,
    PathPolicy,
    check_environment,
    redact_secrets,
)

__all__ = [
    "ContextFormat",
    "LoadedHandover",
    "detect_format",
    "dump_handover",
    "file_lock",
    "parse_handover",
    "read_handover",
    "save_handover",
    "sha256_file",
    "update_handover",
    "validate_safety",
]

ContextFormat = Literal["json", "yaml"]
"""On-disk format of a handover file."""

LOCK_TIMEOUT = 30.0


@dataclass(frozen=True, kw_only=True)
class LoadedHandover:
    """A handover read from disk, with where it came from."""

    handover: ContextHandover
    """The validated model."""
    path: Path
    """The file it came from."""
    format: ContextFormat
    """``json`` or ``yaml``."""
    sha256: str
    """Hash of the bytes read."""
    resolved: tuple[str, ...] = ()
    """Resolved artifact paths (filled when loaded with a policy)."""

    @property
    def artifact_paths(self) -> list[Path]:
        """The resolved artifact paths as ``Path`` objects."""
        return [Path(p) for p in self.resolved]


def detect_format(path: Path, text: str | None = None) -> ContextFormat:
    """``json`` or ``yaml`` from the suffix, else from the first non-blank character."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "json"
    if suffix in {".yaml", ".yml"}:
        return "yaml"
    if text is not None and text.lstrip().startswith("{"):
        return "json"
    return "yaml" if text is not None else "json"


def file_lock(path: Path) -> AbstractContextManager[None]:
    """Hold the lock guarding ``path`` (a ``<name>.lock`` file beside it, removed on release).

    While it is held, temp files a killed writer left for ``path`` are removed.
    """
    return _held(path)


@contextmanager
def _held(path: Path) -> Iterator[None]:
    with locked(Path(str(path) + ".lock"), timeout=LOCK_TIMEOUT):
        remove_stale_temps(path.parent, path.name)
        yield


def sha256_file(path: Path) -> str:
    """sha256 hex digest of a file's bytes."""
    return hashlib.sha256(read_regular(path)).hexdigest()


# --- parsing -----------------------------------------------------------------


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors/aliases (no 'billion laughs')."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases are not allowed in handover files", event.start_mark
            )
        return super().compose_node(parent, index)


def _plain(value: Any) -> Any:
    """YAML scalars JSON has no word for (dates) become ISO strings; keys become str."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, _dt.datetime | _dt.date):
        text = value.isoformat()
        return text.replace("+00:00", "Z")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_text(text: str, fmt: ContextFormat, path: Path) -> Any:
    try:
        if fmt == "json":
            return json.loads(text, parse_constant=_refuse_constant)
        return _plain(yaml.load(text, Loader=_NoAliasLoader))
    except json.JSONDecodeError as exc:
        hint = " (truncated?)" if exc.pos >= len(text.rstrip()) else ""
        raise UsageError(f"malformed JSON: {exc.msg}{hint}", file=path, line=exc.lineno) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or "malformed YAML"
        line = mark.line + 1 if mark is not None else None
        raise UsageError(f"malformed YAML: {problem}", file=path, line=line) from None
    except RecursionError:
        raise UsageError("nested too deeply", file=path) from None
    except ValueError as exc:
        raise UsageError(str(exc), file=path) from None


def _field_path(loc: Iterable[Any], model: type[Any] = ContextHandover) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            text = str(item)
            camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), text)
            parts.append(("." if parts else "") + camel)
    return "".join(parts)


def _precheck_version(raw: dict[str, Any], path: Path) -> None:
    version = raw.get("version")
    if isinstance(version, str):
        head = version.split(".", 1)[0]
        if head.isdigit() and int(head) > SUPPORTED_MAJOR:
            raise UsageError(
                f"handover version {version} is newer than this personae understands "
                f"(reads {SUPPORTED_MAJOR}.x); upgrade personae to read it",
                file=path,
                field="version",
            )


def parse_handover(text: str, path: Path, fmt: ContextFormat | None = None) -> ContextHandover:
    """Parse, redact and validate handover text (no safety checks: ``validate_safety``)."""
    chosen = fmt or detect_format(path, text)
    if not text.strip():
        raise UsageError("empty handover file", file=path)
    raw = _parse_text(text, chosen, path)
    if not isinstance(raw, dict):
        raise UsageError("a handover must be a mapping at the top level", file=path)
    _precheck_version(raw, path)
    # Secrets written into the file by hand never reach a prompt, the ledger or a rewrite.
    raw = redact_secrets(raw)
    try:
        return ContextHandover.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise UsageError(f"{msg}{more}", file=path, field=_field_path(first["loc"])) from None


def validate_safety(
    handover: ContextHandover,
    policy: PathPolicy,
    *,
    env_allow: Iterable[str] = (),
    path: Path | None = None,
) -> list[str]:
    """Apply the safety rules; returns the resolved artifact paths (as strings).

    Raises HandoverSecurityError naming the file, field and offending value.
    """
    try:
        check_environment(handover.source.environment, env_allow)
    except HandoverSecurityError as exc:
        raise HandoverSecurityError(exc.message, file=path, field="source.environment") from None
    workdir = Path(handover.source.working_directory)
    if not workdir.is_absolute():
        raise HandoverSecurityError(
            "source.workingDirectory must be absolute", file=path, field="source.workingDirectory"
        )
    texts = [art.path for art in handover.artifacts.files]
    try:
        resolved = policy.resolve_strings(texts, workdir, what="artifact path")
    except HandoverSecurityError as exc:
        raise HandoverSecurityError(
            exc.message, file=path, field=f"artifacts.files[{exc.index or 0}].path"
        ) from None
    if handover.results is not None and handover.results.artifacts:
        try:
            policy.resolve_strings(handover.results.artifacts, workdir, what="result artifact path")
        except HandoverSecurityError as exc:
            raise HandoverSecurityError(
                exc.message, file=path, field=f"results.artifacts[{exc.index or 0}]"
            ) from None
    return resolved


def _read_limited(path: Path) -> bytes:
    try:
        return read_regular(path, max_bytes=MAX_FILE_BYTES)
    except FileNotFoundError:
        raise UsageError("no such handover file", file=path) from None
    except IsADirectoryError:
        raise UsageError("is a directory, not a handover file", file=path) from None
    except NotRegularFileError as exc:
        if exc.errno == errno.EFBIG:
            raise UsageError(
                f"handover file is larger than {MAX_FILE_BYTES} bytes", file=path
            ) from None
        raise UsageError(f"{exc.strerror}, not a handover file", file=path) from None
    except OSError as exc:
        raise UsageError(f"cannot read: {exc.strerror}", file=path) from None


def _decode(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"not valid UTF-8 at byte {exc.start} (overlong or corrupt encoding)", file=path
        ) from None


def read_handover(
    path: Path | str,
    *,
    policy: PathPolicy | None = None,
    env_allow: Iterable[str] = (),
    fmt: ContextFormat | None = None,
) -> LoadedHandover:
    """Read, parse, validate and (with a ``policy``) safety-check a handover file."""
    file = Path(path)
    data = _read_limited(file)
    text = _decode(data, file).removeprefix("\ufeff")
    chosen = fmt or detect_format(file, text)
    handover = parse_handover(text, file, chosen)
    resolved: list[str] = []
    if policy is not None:
        resolved = validate_safety(handover, policy, env_allow=env_allow, path=file)
    return LoadedHandover(
        handover=handover,
        path=file,
        format=chosen,
        sha256=hashlib.sha256(data).hexdigest(),
        resolved=tuple(resolved),
    )


# --- writing -----------------------------------------------------------------


_YAML_BREAKS = ("\x85", "\u2028", "\u2029")


class _Dumper(yaml.SafeDumper):
    """SafeDumper that double-quotes strings holding NEL, LS or PS.

    YAML reads those characters as line breaks, so in plain or single-quoted
    style they come back folded into spaces; double quotes escape them.
    """


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if any(ch in value for ch in _YAML_BREAKS) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_handover(handover: ContextHandover, fmt: ContextFormat = "json") -> bytes:
    """Serialize (secrets redacted) to JSON or YAML bytes."""
    data = redact_secrets(handover.model_dump(mode="json", by_alias=True))
    if fmt == "yaml":
        raw = yaml.dump(
            data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100
        ).encode("utf-8")
    else:
        raw = pydantic_core.to_json(data, indent=2) + b"\n"
    if len(raw) > MAX_FILE_BYTES:
        raise UsageError(f"handover would be larger than {MAX_FILE_BYTES} bytes")
    return raw


def _write_private(path: Path, raw: bytes) -> None:
    """Write ``raw`` atomically with owner-only bits, creating missing parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, raw, mode=0o600)  # handovers may carry private data


def save_handover(
    handover: ContextHandover, path: Path | str, fmt: ContextFormat | None = None
) -> str:
    """Write atomically under the file lock; returns the sha256 of the bytes written."""
    file = Path(path)
    raw = dump_handover(handover, fmt or detect_format(file))
    try:
        with file_lock(file):
            _write_private(file, raw)
    except Timeout:
        raise UsageError("handover file is locked by another process", file=file) from None
    return hashlib.sha256(raw).hexdigest()


def update_handover(
    path: Path | str, change: Callable[[ContextHandover], ContextHandover]
) -> tuple[ContextHandover, str]:
    """Read-modify-write under the lock (keeps what others wrote meanwhile)."""
    file = Path(path)
    try:
        with file_lock(file):
            loaded = read_handover(file)
            updated = change(loaded.handover)
            raw = dump_handover(updated, loaded.format)
            _write_private(file, raw)
    except Timeout:
        raise UsageError("handover file is locked by another process", file=file) from None
    return updated, hashlib.sha256(raw).hexdigest()
