"""Corrections that fit the failure: refused tools are scope drift, claims the tool
log contradicts are hallucinations, partial work reaches the synthesis marked partial, and the
validator's model-written correction (made with the shared context) reaches the retried worker.

Each test runs a real turn (``run_turn``) with the in-process scripted function model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _helpers import (
    attempt,
    one_subtask,
    read,
    role_requests,
    run_team,
    team_project,
    tool,
    verdict,
)
from _helpers import events_of as kinds

DIRECTIVE = "DIRECTIVE-7: only report figures read from files."


def _project(tmp_path: Path) -> Path:
    root = team_project(tmp_path)
    (root / ".personae" / "directive.md").write_text(DIRECTIVE)
    return root


def test_refused_tool_is_scope_drift_rephrased_with_the_allowed_tools(tmp_path: Path) -> None:
    root = _project(tmp_path)
    # dev may not use run_shell
    refused = attempt(tool("run_shell", command="cat config.yaml"), "The port is 8081.")
    read_back = attempt(read("config.yaml"), "config.yaml: port 8081.", verdict(True))
    outcome, player = run_team(root, one_subtask("Find the port", refused, read_back))
    first = kinds(outcome, "validation")[0].to_json_dict()["data"]
    assert first["used_llm"] is False
    assert first["completion_signal"]["blocker_type"] == "scope_drift"
    assert first["completion_signal"]["suggested_strategy"] == "rephrase"
    correction = kinds(outcome, "correction")[0]
    assert correction.data["action"] == "rephrase"
    assert correction.data["blocker"] == "scope_drift"
    assert "Do not call run_shell" in correction.message
    assert "Use only these tools: grep, list_dir, read_file, write_file" in correction.message
    assert "DIRECTIVE-7" in correction.message  # built with the shared context
    retried = role_requests(player, "worker")[2]
    assert any("Use only these tools" in str(m["content"]) for m in retried["messages"])
    assert outcome.subtasks[0].status == "validated"


def test_claim_contradicted_by_a_refused_write_is_hallucination(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / ".personae" / "personas" / "dev.md").write_text(
        "---\nname: dev\ndescription: Reads only.\ntools: [read_file, grep]\n---\nRead.\n"
    )
    # The write is refused: not dev's tool.
    claimed = attempt(
        tool("write_file", path="x.txt", content="8081"), "I wrote x.txt with the port."
    )
    read_back = attempt(
        read("config.yaml"),
        "The port is 8081 (I could not write files).",
        verdict(True),
    )
    outcome, _ = run_team(root, one_subtask("Write the port to x.txt", claimed, read_back))
    first = kinds(outcome, "validation")[0].to_json_dict()["data"]
    assert first["completion_signal"]["blocker_type"] == "hallucination"
    assert "x.txt was written, but write_file(x.txt) was refused" in first["issues"][0]
    assert kinds(outcome, "correction")[0].data["action"] == "retry"
    assert not (root / "x.txt").exists()


def _rejected(n: int) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for i in range(n):
        call = read("config.yaml") if i == 0 else tool("grep", pattern=f"p{i}")
        rejected = verdict(False, blocker="hallucination", progress=True, confidence="low")
        steps += attempt(call, f"PARTIAL-RESULT attempt {i}: port 8081, host unknown", rejected)
    return steps


def test_exhausted_budget_with_progress_goes_to_the_synthesis_marked_partial(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    outcome, player = run_team(
        root, one_subtask("Find the port and host", _rejected(3), answer="Port 8081 (partial).")
    )
    assert outcome.subtasks[0].status == "partial"
    synthesis = role_requests(player, "manager")[-1]
    text = "\n".join(str(m["content"]) for m in synthesis["messages"])
    assert "<partial_work subtask='1' status='partial, not validated'>" in text
    assert "PARTIAL-RESULT attempt 2" in text
    assert "<validated_work" not in text
    assert outcome.answer.startswith("Port 8081 (partial).")
    assert "[partial, not validated] Find the port and host" in outcome.answer
    assert outcome.status == "partial"


def test_validator_correction_written_with_shared_context_reaches_the_worker(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    rejected = verdict(False, blocker="partial", progress=True, strategy="retry")
    rejected["output"]["completion_signal"]["blocker_type"] = None
    rejected["output"]["correction"] = "CORR-9: quote config.yaml, as DIRECTIVE-7 requires."
    guessed = attempt(tool("grep", pattern="port"), "port is probably 8081", rejected)
    read_back = attempt(read("config.yaml"), "config.yaml says port: 8081", verdict(True))
    outcome, player = run_team(root, one_subtask("Find the port", guessed, read_back))
    validator_request = role_requests(player, "validator")[0]
    assert any(DIRECTIVE in str(m["content"]) for m in validator_request["messages"])
    retried = role_requests(player, "worker")[2]
    assert any("Validator: CORR-9" in str(m["content"]) for m in retried["messages"])
    assert outcome.subtasks[0].status == "validated"
