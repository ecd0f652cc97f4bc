"""refresh_persona and observe's surprise score, through a real MCP client session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from personae.mind import ERROR_PREFIX
from personae.mind.packet import COGNITION_PROTOCOL
from personae.mind.server import MindPaths, create_server
from personae.mind.surprise import HIGH_SURPRISE, score_surprise
from personae.store.db import Store


@pytest.fixture
def paths(tmp_path: Path) -> MindPaths:
    (tmp_path / "memory").mkdir()
    (tmp_path / "prompt").mkdir()
    (tmp_path / "prompt" / "mind.md").write_text("You are Sati.\n@include voice.md\n", "utf-8")
    (tmp_path / "prompt" / "voice.md").write_text("Speak plainly.\n", encoding="utf-8")
    return MindPaths(
        memory_dir=tmp_path / "memory",
        prompt=tmp_path / "prompt" / "mind.md",
        store=tmp_path / "state.db",
    )


def _structured(result: Any) -> dict[str, Any]:
    assert result.is_error is False, result.content
    assert isinstance(result.structured_content, dict)
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def _call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    return client.call_tool(tool, args)


def test_refresh_persona_reassembles_the_contract_after_an_edit(paths: MindPaths) -> None:
    assert paths.prompt is not None
    voice = paths.prompt.parent / "voice.md"
    server, service = create_server(paths)

    async def main() -> None:
        async with Client(server) as client:
            packet = _structured(await client.call_tool("bootstrap_session", {}))
            same = _structured(await client.call_tool("refresh_persona", {}))
            assert same["mind_contract"] == packet["mind_contract"]
            assert same["changed"] is False
            assert same["previous_hash"] == packet["contract_hash"] == same["contract_hash"]
            assert same["sources"] == ["mind.md", "voice.md"]

            voice.write_text("Speak in short sentences.\n", encoding="utf-8")  # edited mid-session
            fresh = _structured(await client.call_tool("refresh_persona", {}))
            assert fresh["mind_contract"] == "You are Sati.\nSpeak in short sentences.\n"
            assert fresh["changed"] is True and fresh["previous_hash"] == packet["contract_hash"]
            assert fresh["mind_contract_available"] is True and fresh["reasons"] == []

            voice.unlink()  # a broken edit degrades, with the same text get_system_prompt gives
            broken = _structured(await client.call_tool("refresh_persona", {}))
            assert broken["mind_contract_available"] is False
            assert broken["mind_contract"].startswith(ERROR_PREFIX)
            assert "voice.md" in broken["reasons"][0]

    anyio.run(main)
    # A refresh is not a bootstrap: only the bootstrap_session call was recorded.
    assert Store(paths.store).fetchone("SELECT count(*) FROM mind_bootstraps")[0] == 1
    assert service.refresh()["changed"] is False  # same broken contract as last handed out


def test_observe_scores_surprise_against_earlier_results(paths: MindPaths) -> None:
    server, _ = create_server(paths)
    args = {"command": "pytest tests/test_portal.py -q"}
    passed = "12 passed in 0.41s"

    async def main() -> None:
        async with Client(server) as client:
            before = _structured(
                await _call(client, "observe", {"tool_name": "Bash", "args": args})
            )
            assert before["surprise"] is None and before["surprise_basis"] == 0  # no result yet
            first = _structured(
                await _call(
                    client, "observe", {"tool_name": "Bash", "args": args, "result": passed}
                )
            )
            assert first["surprise"] is None  # nothing recorded before predicts it
            again = _structured(
                await _call(
                    client,
                    "observe",
                    {"tool_name": "Bash", "args": args, "result": "12 passed in 0.39s"},
                )
            )
            assert again["surprise"] is not None and again["surprise"] < 0.5
            assert again["surprise_basis"] == 1  # the call without a result predicts nothing
            assert not any(f.startswith("surprise") for f in again["cautionary_flags"])
            failed = _structured(
                await _call(
                    client,
                    "observe",
                    {
                        "tool_name": "Bash",
                        "args": args,
                        "result": "ImportError: cannot import name 'Portal'\n1 error in 0.2s",
                    },
                )
            )
            assert failed["surprise"] > HIGH_SURPRISE
            assert any("stop and surface" in f for f in failed["cautionary_flags"])
            other = _structured(
                await _call(
                    client,
                    "observe",
                    {"tool_name": "Bash", "args": {"command": "ls docs"}, "result": "a.md b.md"},
                )
            )
            assert other["surprise"] is None  # a different command predicts nothing

    anyio.run(main)


def test_surprise_is_pure_and_bounded() -> None:
    earlier = [("git status", "nothing to commit, working tree clean")]
    assert score_surprise("git status", "nothing to commit, working tree clean", earlier).score == 0
    changed = score_surprise("git status", "modified: src/app.py", earlier)
    assert changed.score is not None and changed.score > HIGH_SURPRISE
    assert score_surprise("git log", "x", []).score is None
    assert score_surprise("", "", [("", "")]).score == 0  # empty predicts empty


def test_the_stop_rule_is_in_the_doctrine() -> None:
    rule = next(r for r in COGNITION_PROTOCOL if "surprise" in r)
    assert str(HIGH_SURPRISE) in rule and "stop" in rule
    assert any("refresh_persona" in r for r in COGNITION_PROTOCOL)
    assert any(r.startswith("Body rules") for r in COGNITION_PROTOCOL)
