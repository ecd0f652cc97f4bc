"""One context window per session across the turns of a long-lived process.

``personae.Team`` keeps each session's :class:`~personae.context.ContextWindow` and
passes it to the next turn of that session (through ``RunOptions.window`` and
``TurnContext.build``), so the second turn reuses what the first read and prepared.
Real runs against the scripted replay server, the project's real SQLite store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_ai.models import override_allow_model_requests

from _helpers import dev_project, read_config_scenario
from personae import Team


@pytest.fixture(autouse=True)
def scripted_requests() -> Any:
    """The conftest forbids model requests; these go to the scripted server only."""
    with override_allow_model_requests(True):
        yield


def _scenario(answer: str) -> dict[str, Any]:
    return read_config_scenario(answer, description="window reuse (scripted)")


def test_a_session_keeps_one_window_across_turns(tmp_path: Path, offline_home: Path) -> None:
    project = dev_project(tmp_path, {"one": _scenario("FIRST")})
    team = Team.from_project(project, model=f"scripted:{tmp_path / 'one.yaml'}")
    first = team.run("What port does the service use?", persona="dev")
    window = team.window(first.session_id)
    assert window is not None
    [(bundle, (_, reads))] = [(k, v) for k, v in window.files.items() if k[1] is not None]
    assert team.window("no-such-session") is None

    (tmp_path / "one.yaml").write_text(yaml.safe_dump(_scenario("SECOND")))
    second = team.run("And again?", persona="dev", session=first.session_id)
    assert second.answer == "SECOND"
    assert team.window(first.session_id) is window  # the same window, kept by the team
    # Turn 2 read turn 1's stored messages into it; the project files were not read again.
    held = window.messages  # turn 1 as stored, then turn 2's own tool exchanges
    assert held[0].role == "user" and held[0].content == "What port does the service use?"
    stored = next(i for i, m in enumerate(held) if m.content == "FIRST") + 1
    assert window.files[bundle][1] is reads

    (tmp_path / "one.yaml").write_text(yaml.safe_dump(_scenario("THIRD")))
    third = team.run("Once more?", persona="dev", session=first.session_id)
    assert third.answer == "THIRD" and team.window(first.session_id) is window
    # Turn 3 kept turn 1's stored messages (the same objects: read and prepared once)
    # and added turn 2's as stored.
    now = window.messages
    assert all(a is b for a, b in zip(now[:stored], held[:stored], strict=True))
    assert [m.content for m in now[stored:]][:1] == ["And again?"] and "SECOND" in {
        m.content for m in now
    }

    # Another session of the same team gets its own window.
    other = team.run("A new conversation", persona="dev")
    assert other.session_id != first.session_id
    assert team.window(other.session_id) is not window
