"""Role profiles as data: the built-in YAML, overridable by ``.personae/profiles.yaml``.

The override file has the built-in file's schema. Entries under ``sections``
change a tag's defaults field by field; entries under ``roles`` replace that
role's section list or add a new role. Every mistake is a :class:`ConfigError`
(or :class:`UnknownNameError`) naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from personae.context._yamlpos import Lines, line_of, load_with_lines
from personae.context.commands import has_commands
from personae.context.spec import SOURCES, Profile, SectionSource, SectionSpec
from personae.errors import ConfigError, UnknownNameError
from personae.fsutil import read_regular
from personae.layout import Layout

__all__ = ["BUILTIN_PROFILES", "ProfileNameError", "ProfileSet", "load_profiles"]

BUILTIN_PROFILES = "profiles.yaml"
"""Name of the built-in profile file inside the ``personae.context`` package."""


class ProfileNameError(UnknownNameError, ConfigError):
    """An unknown name (key, field, section, source) in a profiles file: a ConfigError too."""


_TOP_KEYS = {"version", "sections", "roles"}
_ROLE_KEYS = {"description", "sections"}
_SPEC_FIELDS = set(SectionSpec.model_fields) - {"tag"}


@dataclass(frozen=True)
class ProfileSet:
    """All known role profiles and the tag catalogue."""

    profiles: dict[str, Profile]
    """Role name -> profile."""
    tags: frozenset[str]
    """Every tag any profile may render (used to escape content)."""
    files: tuple[str, ...]
    """The files the set was read from (built-in first)."""

    @cached_property
    def window(self) -> int:
        """Messages read from the store for the recent window: the largest ``max_messages``
        of the profiles (64 for a messages section without one; 6 when none has one)."""
        limits = [
            s.max_messages or 64
            for p in self.profiles.values()
            for s in p.sections
            if s.source is SectionSource.MESSAGES
        ]
        return max(limits, default=6)

    @cached_property
    def named_files(self) -> tuple[SectionSpec, ...]:
        """One section per content key among those that name their own files (sorted)."""
        by_key = {s.content_key: s for p in self.profiles.values() for s in p.sections if s.files}
        return tuple(spec for _, spec in sorted(by_key.items()))

    @cached_property
    def named_keys(self) -> tuple[str, ...]:
        """The content keys of :attr:`named_files`, in the same order."""
        return tuple(s.content_key for s in self.named_files)

    @cached_property
    def command_texts(self) -> tuple[str, ...]:
        """The profiles' own section texts that hold ``!command`` forms (sorted, each once)."""
        texts = {s.text for p in self.profiles.values() for s in p.sections if s.text}
        return tuple(sorted(t for t in texts if has_commands(t)))

    @property
    def roles(self) -> list[str]:
        """Role names, sorted."""
        return sorted(self.profiles)

    def get(self, role: str) -> Profile:
        """The profile of ``role`` (UnknownNameError with the closest role)."""
        try:
            return self.profiles[role]
        except KeyError:
            raise ProfileNameError("role", role, self.profiles) from None


def _fail(message: str, file: str, lines: Lines, path: tuple[str | int, ...]) -> ConfigError:
    field = ".".join(str(p) for p in path) or None
    return ConfigError(message, file=file, line=line_of(lines, path), field=field)


def _check_mapping(value: Any, file: str, lines: Lines, path: tuple[str | int, ...]) -> None:
    if not isinstance(value, dict):
        raise _fail("must be a mapping", file, lines, path)


def _check_keys(
    raw: dict[str, Any],
    allowed: set[str],
    kind: str,
    where: tuple[str, Lines, tuple[str | int, ...]],
    *,
    also: str | None = None,
) -> None:
    """Every key of ``raw`` is one of ``allowed`` (or ``also``, not suggested); else the
    closest, with the file and line (``where``: file, lines, path)."""
    file, lines, path = where
    for key in raw:
        if key not in allowed and key != also:
            raise ProfileNameError(
                kind, str(key), allowed, file=file, line=line_of(lines, (*path, key))
            )


def _spec_fields(
    raw: dict[str, Any], file: str, lines: Lines, path: tuple[str | int, ...]
) -> dict[str, Any]:
    _check_keys(raw, _SPEC_FIELDS, "section field", (file, lines, path), also="tag")
    source = raw.get("source")
    if source is not None and source not in SOURCES:
        raise ProfileNameError(
            "source", str(source), SOURCES, file=file, line=line_of(lines, (*path, "source"))
        )
    return {k: v for k, v in raw.items() if k != "tag"}


def _build_spec(
    tag: Any, fields: dict[str, Any], file: str, lines: Lines, path: tuple[str | int, ...]
) -> SectionSpec:
    try:
        return SectionSpec.model_validate({"tag": tag, **fields})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(str(p) for p in first["loc"])
        where = (*path, *loc) if loc and loc[0] != "tag" else path
        raise _fail(first["msg"], file, lines, where) from exc


_Roles = dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]]


def _merge_file(
    data: Any,
    file: str,
    lines: Lines,
    catalogue: dict[str, dict[str, Any]],
    roles: _Roles,
) -> None:
    if data is None:
        return
    _check_mapping(data, file, lines, ())
    _check_keys(data, _TOP_KEYS, "key", (file, lines, ()))
    if data.get("version", 1) != 1:
        raise _fail("unsupported version (expected 1)", file, lines, ("version",))
    _merge_sections(data.get("sections") or {}, file, lines, catalogue)
    role_map = data.get("roles") or {}
    _check_mapping(role_map, file, lines, ("roles",))
    for role, raw in role_map.items():
        roles[str(role)] = _role(raw, ("roles", str(role)), _Parsing(file, lines, catalogue))


def _merge_sections(
    sections: Any, file: str, lines: Lines, catalogue: dict[str, dict[str, Any]]
) -> None:
    """Entries under ``sections``: a tag's defaults changed field by field (or a new tag)."""
    _check_mapping(sections, file, lines, ("sections",))
    for tag, raw in sections.items():
        path: tuple[str | int, ...] = ("sections", str(tag))
        _check_mapping(raw, file, lines, path)
        merged = {**catalogue.get(str(tag), {}), **_spec_fields(raw, file, lines, path)}
        if "source" not in merged:
            raise _fail("a new section needs a source", file, lines, path)
        _build_spec(tag, merged, file, lines, path)  # validate now, with this file's lines
        catalogue[str(tag)] = merged


class _Parsing(NamedTuple):
    """The file being merged: its name, its lines (for line numbers), the section
    catalogue so far."""

    file: str
    lines: Lines
    catalogue: dict[str, dict[str, Any]]


def _role(
    raw: Any, rpath: tuple[str | int, ...], src: _Parsing
) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """One entry under ``roles``: its description and its sections (tag, own fields)."""
    file, lines, catalogue = src
    _check_mapping(raw, file, lines, rpath)
    _check_keys(raw, _ROLE_KEYS, "role field", (file, lines, rpath))
    entries = raw.get("sections")
    if not isinstance(entries, list) or not entries:
        raise _fail("sections must be a non-empty list", file, lines, (*rpath, "sections"))
    items: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        epath: tuple[str | int, ...] = (*rpath, "sections", i)
        tag, fields = _role_entry(entry, epath, src)
        if tag in seen:
            raise _fail(f"section {tag!r} appears twice", file, lines, epath)
        seen.add(tag)
        _build_spec(tag, {**catalogue.get(tag, {}), **fields}, file, lines, epath)
        items.append((tag, fields))
    return str(raw.get("description", "")), items


def _role_entry(
    entry: Any, epath: tuple[str | int, ...], src: _Parsing
) -> tuple[str, dict[str, Any]]:
    """A role's section: a tag name, or a mapping with ``tag`` and fields of its own."""
    file, lines, catalogue = src
    if isinstance(entry, str):
        tag, fields = entry, {}
    elif isinstance(entry, dict) and isinstance(entry.get("tag"), str):
        tag, fields = entry["tag"], _spec_fields(entry, file, lines, epath)
    else:
        raise _fail("each section is a tag name or a mapping with 'tag'", file, lines, epath)
    if tag not in catalogue and "source" not in fields:
        raise ProfileNameError("section", tag, catalogue, file=file, line=line_of(lines, epath))
    return tag, fields


def _read(path: Path) -> str:
    try:
        return read_regular(path, max_bytes=_MAX_BYTES).decode("utf-8")
    except OSError as exc:  # a FIFO or device is refused here, never waited on
        raise ConfigError(f"cannot read profiles: {exc.strerror}", file=path) from None
    except UnicodeDecodeError as exc:
        raise ConfigError("profiles file is not UTF-8 text", file=path) from exc


_CACHE: dict[tuple[str, ...], ProfileSet] = {}
_MAX_BYTES = 1_000_000


def load_profiles(root: Path | None = None) -> ProfileSet:
    """The built-in profiles, overridden by ``root/.personae/profiles.yaml`` when present.

    Parsed sets are memoized by the override file's path, size and mtime, so a
    changed file is read again on the next call.
    """
    builtin = resources.files("personae.context") / BUILTIN_PROFILES
    sources: list[tuple[str, str]] = [(f"<builtin>/{BUILTIN_PROFILES}", "")]
    key: tuple[str, ...] = ()
    if root is not None:
        candidate = Layout(Path(root)).profiles_file
        if candidate is not None:
            try:
                stat = candidate.stat()
            except OSError as exc:  # a dangling symlink
                raise ConfigError(f"cannot read profiles: {exc.strerror}", file=candidate) from None
            key = (str(candidate), str(stat.st_size), str(stat.st_mtime_ns))
            if key in _CACHE:
                return _CACHE[key]
            sources.append((str(candidate), _read(candidate)))
    if key in _CACHE:
        return _CACHE[key]
    sources[0] = (sources[0][0], builtin.read_text("utf-8"))
    catalogue: dict[str, dict[str, Any]] = {}
    roles: _Roles = {}
    for file, text in sources:
        data, lines = load_with_lines(text, file)
        _merge_file(data, file, lines, catalogue, roles)
    profiles: dict[str, Profile] = {}
    for role, (description, items) in roles.items():
        specs = tuple(
            SectionSpec.model_validate({"tag": tag, **catalogue.get(tag, {}), **fields})
            for tag, fields in items
        )
        profiles[role] = Profile(role=role, description=description, sections=specs)
    tags = frozenset(catalogue) | {s.tag for p in profiles.values() for s in p.sections}
    result = ProfileSet(profiles=profiles, tags=tags, files=tuple(f for f, _ in sources))
    if len(_CACHE) > 64:
        _CACHE.clear()
    _CACHE[key] = result
    return result
