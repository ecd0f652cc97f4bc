"""Fresh-context profiles in real runs: `personae run --profile`, a persona's `profile:`, a
chain step's and a handover's profile; the project files reach the worker through
the scripted replay server, the stored per-call report shows them, a cut warns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from _profile_run import SCENARIO, personae


@pytest.fixture
def project(tmp_path: Path, offline_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("PERSONAE_BUDGET_SHARE", raising=False)
    root = tmp_path / "proj"
    root.mkdir()
    personae(root, "init")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(SCENARIO), encoding="utf-8")
    return root


def _run(root: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    spec = f"scripted:{root.parent / 's.yaml'}"
    done = personae(root, "run", *args, "--model", spec, "--json", env=env)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["kind"] == "final" and events[-1]["data"]["status"] == "done"
    shown = personae(root, "runs", "show", events[0]["run_id"], "--json").stdout
    return {"events": events, **json.loads(shown)}


def _worker(run: dict[str, Any]) -> dict[str, Any]:
    calls = [c for c in run["model_calls"] if c["role"] == "worker"]
    assert calls
    return calls[0]  # type: ignore[no-any-return]


@pytest.mark.process
def test_run_with_builder_profile_sends_the_project_files(project: Path) -> None:
    base = project / ".personae" / "project"
    vision = (base / "VISION.md").read_text(encoding="utf-8").strip().splitlines()[0]
    run = _run(project, "01-march-report", "--persona", "analyst", "--profile", "builder")
    call = _worker(run)
    text, report = call["context_text"], call["budget"]
    assert report["role"] == "worker (profile builder)"
    rows = {r["tag"]: r for r in report["sections"]}
    for tag in ("vision", "current_step", "decisions", "task", "instructions"):
        assert rows[tag]["kept"] > 0, tag
        assert f"<{tag}>" in text, tag
    assert vision in text
    assert "March" in text.split("<task>")[1]  # the task file was read
    # instructions come last among the context sections; the persona prompt once
    assert text.index("</instructions>") > text.index("</task>")
    assert "<active_persona>" not in text
    assert report["total"] <= report["budget"]
    # manager and validator keep their own profiles
    roles = {c["budget"]["role"] for c in run["model_calls"]}
    assert {"manager", "validator"} <= roles


def test_cut_context_emits_a_context_cut_warning(project: Path) -> None:
    step = next((project / ".personae" / "project" / "goals").rglob("STEP.md"))
    head, sep, decisions = step.read_text(encoding="utf-8").partition("## Decisions")
    assert sep
    detail = "## Detail\n" + "More detail on the step. " * 2500 + "\n\n"
    step.write_text(head + detail + sep + decisions, encoding="utf-8")
    run = _run(
        project,
        "01-march-report",
        "--profile",
        "builder",
        env={"PERSONAE_BUDGET_SHARE": "0.05"},
    )
    rows = {r["tag"]: r for r in _worker(run)["budget"]["sections"]}
    assert rows["current_step"]["rule"].startswith("budget:")
    cuts = [e for e in run["events"] if e["data"].get("action") == "context_cut"]
    assert cuts and cuts[0]["kind"] == "warning"
    worker_cut = [e for e in cuts if e["data"]["role"] == "worker"]
    assert worker_cut and "current_step" in worker_cut[0]["message"]
    assert {s["tag"] for s in worker_cut[0]["data"]["sections"]} >= {"current_step"}


def test_persona_profile_field_and_unknown_names(project: Path) -> None:
    personas = project / ".personae" / "personas"
    text = (personas / "analyst.md").read_text(encoding="utf-8")
    (personas / "checker.md").write_text(
        text.replace("name: analyst", "name: checker", 1).replace(
            "---\n", "---\nprofile: verifier\n", 1
        ),
        encoding="utf-8",
    )
    run = _run(project, "01-march-report", "--persona", "checker")
    assert _worker(run)["budget"]["role"] == "worker (profile verifier)"
    spec = f"scripted:{project.parent / 's.yaml'}"
    bad = personae(project, "run", "x", "--profile", "buidler", "--model", spec, check=False)
    assert bad.returncode != 0
    assert "unknown profile 'buidler'; did you mean 'builder'?" in bad.stderr
    assert "Traceback" not in bad.stderr
    (personas / "checker.md").write_text(
        text.replace("name: analyst", "name: checker", 1).replace(
            "---\n", "---\nprofile: nope\n", 1
        ),
        encoding="utf-8",
    )
    bad = personae(project, "run", "x", "--persona", "checker", "--model", spec, check=False)
    assert bad.returncode != 0 and "checker.md" in bad.stderr and "'nope'" in bad.stderr


def test_handover_names_the_profile(project: Path) -> None:
    handover = project / "h.json"
    personae(
        project, "handover", "create", "--to", "analyst", "--task", "01-march-report",
        "--out", str(handover),
    )  # fmt: skip
    data = json.loads(handover.read_text(encoding="utf-8"))
    data["target"]["profile"] = "builder"
    handover.write_text(json.dumps(data), encoding="utf-8")
    run = _run(project, "--context-from", str(handover), "--non-interactive")
    call = _worker(run)
    assert call["budget"]["role"] == "worker (profile builder)"
    assert "<vision>" in call["context_text"] and "<handover>" in call["context_text"]


def test_handover_create_names_the_profile(project: Path) -> None:
    """``handover create --profile`` writes ``target.profile``; the run assembles the
    target's worker with it; an unknown name fails before anything is written."""
    handover = project / "h.json"
    personae(
        project, "handover", "create", "--to", "analyst", "--task", "01-march-report",
        "--profile", "builder", "--out", str(handover),
    )  # fmt: skip
    assert json.loads(handover.read_text(encoding="utf-8"))["target"]["profile"] == "builder"
    run = _run(project, "--context-from", str(handover), "--non-interactive")
    assert _worker(run)["budget"]["role"] == "worker (profile builder)"
    bad_file = project / "bad.json"
    bad = personae(
        project, "handover", "create", "--to", "analyst", "--task", "x",
        "--profile", "buidler", "--out", str(bad_file), check=False,
    )  # fmt: skip
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "unknown profile 'buidler'; did you mean 'builder'?" in bad.stderr
    assert not bad_file.exists()


@pytest.mark.process
def test_chain_step_names_the_profile(tmp_path: Path) -> None:
    from _handover_childprog import command
    from personae.workflow.chain import execute_chain
    from personae.workflow.executors import LocalProcessExecutor
    from personae.workflow.spec import load_workflow

    path = tmp_path / "workflow.yaml"
    steps = [
        {"id": "build", "persona": "dev", "task": "do build", "profile": "builder"},
        {"id": "check", "persona": "dev", "task": "do check"},
    ]
    path.write_text(yaml.safe_dump({"name": "p", "steps": steps}), encoding="utf-8")
    out = execute_chain(load_workflow(path), executor=LocalProcessExecutor(command=command))
    assert out.status == "success"
    built = json.loads((out.state_dir / "handovers" / "build.json").read_text())
    checked = json.loads((out.state_dir / "handovers" / "check.json").read_text())
    assert built["target"]["profile"] == "builder"
    assert "profile" not in checked["target"]
    path.write_text(
        yaml.safe_dump({"name": "p", "steps": [{**steps[0], "profile": "Bad Name"}]}),
        encoding="utf-8",
    )
    from personae.errors import UsageError

    with pytest.raises(UsageError, match="profile"):
        load_workflow(path)


def test_no_duplicated_sections(project: Path) -> None:
    run = _run(project, "01-march-report", "--persona", "analyst")
    prompt_line = "You are the analyst. You answer questions about the data files in this"
    for call in run["model_calls"]:
        text = call["context_text"]
        assert text.count("<task>\n") == 1, call["role"]
        if call["role"] == "worker":
            assert text.count(prompt_line) == 1
