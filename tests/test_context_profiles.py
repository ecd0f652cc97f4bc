"""Profiles are data: built-in roles, overrides, and every bad-input case with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from personae.context import Truncation, load_profiles
from personae.errors import ConfigError, UnknownNameError


def write(root: Path, text: str) -> Path:
    (root / ".personae").mkdir(exist_ok=True)
    path = root / ".personae" / "profiles.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_builtin_roles_and_their_default_sections() -> None:
    ps = load_profiles(None)
    for role in (
        "manager",
        "worker",
        "client",
        "builder",
        "planner",
        "verifier",
        "researcher",
        "inspector",
    ):
        assert role in ps.roles
    worker = [s.tag for s in ps.get("worker").sections]
    client = [s.tag for s in ps.get("client").sections]
    assert "active_persona" in worker and "validation_context" not in worker
    assert "validation_context" in client and "active_persona" not in client
    for tags in (worker, client):
        # what changes most last: the conversation only grows at its end, the turn's
        # request is new every turn (before the conversation it would cost its cache)
        assert tags[-2:] == ["recent_messages", "task"]
    caps = {s.tag: s for s in ps.get("client").sections}
    assert caps["directive"].cap == 500
    assert caps["conversation_summary"].cap == 1800  # the condensed rest plus pinned items
    assert caps["recent_messages"].cap == 800 and caps["recent_messages"].max_messages == 6
    assert caps["validation_context"].cap == 400
    builder = {s.tag: s for s in ps.get("builder").sections}
    assert builder["task"].pinned and builder["vision"].pinned and builder["decisions"].pinned
    assert (
        builder["recent_changes"].priority
        < builder["research"].priority
        < builder["current_step"].priority
    )
    assert builder["current_step"].truncation is Truncation.SUMMARIZE
    assert {"vision", "gameplan", "project_state", "research_summary"} <= {
        s.tag for s in ps.get("planner").sections
    }
    assert "handover" in ps.tags


def test_override_changes_fields_and_roles(tmp_path: Path) -> None:
    write(
        tmp_path,
        "sections:\n"
        "  directive: {cap: 120}\n"
        "  style_guide: {source: text, text: Use short sentences., priority: 80}\n"
        "roles:\n"
        "  worker:\n"
        "    sections: [directive, style_guide, task, {tag: recent_messages, max_messages: 10}]\n"
        "  reviewer:\n"
        "    description: Reviews diffs.\n"
        "    sections: [vision, task]\n",
    )
    ps = load_profiles(tmp_path)
    worker = {s.tag: s for s in ps.get("worker").sections}
    assert list(worker) == ["directive", "style_guide", "task", "recent_messages"]
    assert worker["directive"].cap == 120
    assert worker["recent_messages"].max_messages == 10 and worker["recent_messages"].cap == 800
    assert ps.get("reviewer").description == "Reviews diffs."
    assert ps.get("client").spec("directive").cap == 120  # type: ignore[union-attr]
    assert ps.get("builder").spec("task") is not None  # other roles untouched


def test_unknown_role_names_the_closest() -> None:
    with pytest.raises(UnknownNameError, match="did you mean 'worker'"):
        load_profiles(None).get("wroker")


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("roles:\n  worker:\n    sections: [directive\n", 4, "malformed YAML"),
        ("sections:\n  directive:\n    cap: lots\n", 3, "sections.directive.cap"),
        ("sections:\n  directive:\n    capp: 3\n", 3, "did you mean 'cap'"),
        ("sections:\n  notes:\n    source: vison\n", 3, "did you mean 'vision'"),
        ("sections:\n  newtag: {priority: 3}\n", 2, "needs a source"),
        ("roles:\n  worker:\n    sections: [task, task]\n", 3, "appears twice"),
        ("roles:\n  worker:\n    sections: []\n", 3, "non-empty list"),
        ("roles:\n  worker:\n    sections:\n      - nosuchtag\n", 4, "unknown section 'nosuchtag'"),
        ("roles:\n  worker:\n    sectons: [task]\n", 3, "unknown role field"),
        ("rolez: {}\n", 1, "did you mean 'roles'"),
        ("version: 2\n", 1, "unsupported version"),
        ("- a\n- b\n", 1, "must be a mapping"),
        ("sections:\n  directive:\n    notice: 'cut {nope}'\n", 3, "notice may only use"),
        ("sections:\n  directive:\n    cap: 0\n", 3, "greater than or equal to 1"),
        ("sections:\n  Bad-Tag: {source: text}\n", 2, "should match pattern"),
        ("sections:\n  directive:\n    truncation: middle\n", 3, "truncation"),
    ],
)
def test_bad_profile_files_name_file_and_line(
    tmp_path: Path, text: str, line: int, needle: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_profiles(tmp_path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}:"), message
    assert needle in message


def test_changed_override_is_read_again(tmp_path: Path) -> None:
    path = write(tmp_path, "sections:\n  directive: {cap: 100}\n")
    assert load_profiles(tmp_path).get("worker").spec("directive").cap == 100  # type: ignore[union-attr]
    path.write_text("sections:\n  directive: {cap: 222}\n", encoding="utf-8")
    import os

    os.utime(path, ns=(1, 10**18))
    assert load_profiles(tmp_path).get("worker").spec("directive").cap == 222  # type: ignore[union-attr]


def test_non_utf8_profile(tmp_path: Path) -> None:
    path = write(tmp_path, "")
    path.write_bytes(b"sections:\n  directive: {cap: \xff}\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_profiles(tmp_path)
