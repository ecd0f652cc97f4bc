"""`personae runs replay|compare|diff` on the scripted server, through the CLI in process.

A stored run is replayed from its record (answers come back without a model) and, from a
call on, live against another scenario; the new run is linked to the original, acts on a
copy of the project as the original saw it, and lays side by side with it call by call.
`runs diff` shows what changed in an assembled context between two calls.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_ai.models import override_allow_model_requests

from _helpers import team_project
from personae.context.report import BudgetReport

PLAN = {
    "rationale": "One subtask.",
    "subtasks": [{"description": "Write the port to answer.txt", "requirements": ["port"]}],
}
VERDICT = {
    "approved": True,
    "requirements_met": True,
    "issues": [],
    "next_action": "continue",
    "completion_signal": {"confidence": "high", "progress_made": True},
}
TASK = "What port does the service use? Write it to answer.txt."


@pytest.fixture(autouse=True)
def scripted_requests() -> Iterator[None]:
    """The conftest forbids model requests; these go to the scripted server only."""
    with override_allow_model_requests(True):
        yield


def _worker_steps(port: str) -> list[dict[str, Any]]:
    return [
        {"when": {"role": "worker"},
         "tool_calls": [{"name": "write_file",
                         "args": {"path": "answer.txt", "content": f"port {port}\n"}}]},
        {"when": {"role": "worker"}, "text": f"Wrote answer.txt: port {port}."},
        {"when": {"role": "validator"}, "output": VERDICT},
        {"when": {"role": "manager"}, "text": f"The port is {port}."},
    ]  # fmt: skip


def _scenario(folder: Path, name: str, steps: list[dict[str, Any]]) -> str:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{path}"


@pytest.fixture
def project(tmp_path: Path, offline_home: Path) -> Path:
    root = team_project(tmp_path / "proj")
    (root / ".personae").mkdir(exist_ok=True)
    return root


def _run(cli: Any, root: Path, spec: str, *extra: str, task: str = TASK) -> str:
    done = cli("run", task, "--persona", "dev", "--model", spec, "--json", *extra, cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    start = json.loads(done.stdout.splitlines()[0])
    return str(start["run_id"])


def _runs(root: Path) -> list[str]:
    with sqlite3.connect(root / ".personae" / "state.db") as db:
        return [r[0] for r in db.execute("SELECT id FROM runs ORDER BY rowid")]


def _show(cli: Any, root: Path, run_id: str) -> dict[str, Any]:
    done = cli("runs", "show", run_id, "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.fixture
def original(project: Path, tmp_path: Path, cli: Any) -> tuple[Path, str, str]:
    """The project, a finished run (5 calls: plan, two worker steps, verdict, answer) and
    the scenario of another model that answers from the worker's first call on."""
    spec = _scenario(tmp_path, "a", [{"when": {"role": "manager"}, "output": PLAN},
                                     *_worker_steps("8081")])  # fmt: skip
    run_id = _run(cli, project, spec)
    other = _scenario(tmp_path, "b", _worker_steps("9999"))
    return project, run_id, other


def test_a_replay_answers_early_calls_from_the_record_and_the_rest_live(
    original: tuple[Path, str, str], cli: Any
) -> None:
    root, run_id, other = original
    done = cli("runs", "replay", run_id, "--model", other, "--from", "2", "--json", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    new = result["run_id"]
    assert result["replay_of"] == run_id and result["status"] == "done"
    assert result["final_text"].strip() == "The port is 9999."
    link = result["replay"]
    assert link["from_call"] == 2 and link["recorded_calls"] == 1 and link["diverged_at"] is None
    # The run wrote answer.txt after it started: the replay's copy leaves it out, and the
    # user's project keeps the original's file (the replay acted on a copy).
    assert any("answer.txt" in d and "created since" in d for d in link["project_drift"])
    assert (root / "answer.txt").read_text() == "port 8081\n"
    old, shown = _show(cli, root, run_id), _show(cli, root, new)
    assert shown["run"]["replay_of"] == run_id
    calls = shown["model_calls"]
    assert [c["role"] for c in calls] == [c["role"] for c in old["model_calls"]]
    # Call 1 came from the record: same answer and tokens, the original's model, marked.
    assert calls[0]["usage"]["recorded_from"] == 1
    assert calls[0]["model"] == old["model_calls"][0]["model"]
    assert calls[0]["answer"] == old["model_calls"][0]["answer"]
    assert calls[0]["usage"]["input_tokens"] == old["model_calls"][0]["usage"]["input_tokens"]
    # The rest went to the other model.
    assert all(c["model"] == other and "recorded_from" not in c["usage"] for c in calls[1:])
    assert "9999" in calls[1]["answer"]["tool_calls"][0]["args"]
    listed = json.loads(cli("runs", "list", "--json", cwd=root).stdout)
    assert {r["id"]: r["replay_of"] for r in listed} == {run_id: None, new: run_id}
    text = cli("runs", "show", new, cwd=root).stdout
    assert f"replay of {run_id} (live from call 2" in " ".join(text.split())


def test_a_replay_from_the_record_alone_sees_what_the_original_saw(
    project: Path, tmp_path: Path, cli: Any
) -> None:
    """Every call answered from the record: the replay's assembled contexts are the
    original's, word for word, on the second turn of a conversation too (the replay gets
    the conversation as it was when the run started, in a session of its own)."""
    first = _scenario(tmp_path, "first", [{"when": {"role": "manager"}, "output": PLAN},
                                          *_worker_steps("8081")])  # fmt: skip
    second = _scenario(tmp_path, "second", [{"when": {"role": "manager"}, "output": PLAN},
                                            *_worker_steps("8082")])  # fmt: skip
    one = _run(cli, project, first, "--session", "talk")
    two = _run(cli, project, second, "--session", "talk", task="And the port now?")
    done = cli("runs", "replay", two, "--from", "6", "--json", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    new = json.loads(done.stdout)["run_id"]
    old_calls = _show(cli, project, two)["model_calls"]
    new_calls = _show(cli, project, new)["model_calls"]
    assert len(new_calls) == len(old_calls) == 5
    for old, again in zip(old_calls, new_calls, strict=True):
        assert again["context_text"] == old["context_text"], old["seq"]
        assert again["answer"] == old["answer"]
        assert again["usage"]["recorded_from"] == old["seq"]
    assert "port 8081" in old_calls[0]["context_text"]  # the first turn, seen again
    compared = json.loads(cli("runs", "compare", two, new, "--json", cwd=project).stdout)
    assert compared["first_difference"] is None
    # The original conversation is left alone: the replay's turn went to its own session.
    with sqlite3.connect(project / ".personae" / "state.db") as db:
        count = db.execute("SELECT count(*) FROM messages WHERE session_id='talk'").fetchone()
    assert count[0] == len(_messages_of(project, "talk"))
    assert one != two


def _messages_of(root: Path, session: str) -> list[str]:
    with sqlite3.connect(root / ".personae" / "state.db") as db:
        rows = db.execute("SELECT content FROM messages WHERE session_id=?", (session,))
        return [r[0] for r in rows]


def test_a_persona_prompt_file_replaces_the_prompt_of_the_live_calls(
    original: tuple[Path, str, str], cli: Any, tmp_path: Path
) -> None:
    root, run_id, other = original
    prompt = tmp_path / "terse.md"
    prompt.write_text("You are dev, terse edition. Answer in five words.\n")
    done = cli("runs", "replay", run_id, "--model", other, "--from", "2",
               "--persona-prompt", str(prompt), cwd=root)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "with the persona prompt of" in " ".join(done.stdout.split())
    new = _runs(root)[-1]
    calls = _show(cli, root, new)["model_calls"]
    assert "terse edition" in calls[1]["context_text"]
    assert "terse edition" not in _show(cli, root, run_id)["model_calls"][1]["context_text"]


def test_compare_lays_two_runs_side_by_side_in_80_columns(
    original: tuple[Path, str, str], cli: Any
) -> None:
    root, run_id, other = original
    cli("runs", "replay", run_id, "--model", other, "--from", "2", cwd=root, check=True)
    new = _runs(root)[-1]
    done = cli("runs", "compare", run_id, new, cwd=root)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    text = done.stdout
    assert f"B replays {run_id} (live from call 2)" in text
    assert "call 1: same" in text and "call 2: differs" in text
    assert "from the record (call 1)" in text
    assert "approved" in text and "confidence high" in text
    assert "first difference: call 2" in text
    data = json.loads(cli("runs", "compare", run_id, new, "--json", cwd=root).stdout)
    assert data["first_difference"] == 2
    pair = data["pairs"][3]
    assert pair["a"]["role"] == pair["b"]["role"] == "validator"
    assert pair["b"]["verdict"] == "approved"
    assert pair["b"]["completion_signal"]["confidence"] == "high"
    assert data["pairs"][1]["b"]["tool_calls"][0].startswith("write_file(")
    assert data["a"]["calls"] == data["b"]["calls"] == 5


def test_diff_of_two_turns_shows_only_what_changed(project: Path, tmp_path: Path, cli: Any) -> None:
    """Stable section order and cut points: the second turn's manager call differs from
    the first's in the task and the conversation only."""
    first = _scenario(tmp_path, "first", [{"when": {"role": "manager"}, "output": PLAN},
                                          *_worker_steps("8081")])  # fmt: skip
    second = _scenario(tmp_path, "second", [{"when": {"role": "manager"}, "output": PLAN},
                                            *_worker_steps("8082")])  # fmt: skip
    one = _run(cli, project, first, "--session", "talk")
    two = _run(cli, project, second, "--session", "talk", task="And the port now?")
    done = cli("runs", "diff", f"{one}:1", f"{two}:1", "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    diff = json.loads(done.stdout)
    changed = {s["tag"]: s for s in diff["sections"] if s["change"] != "same"}
    assert set(changed) == {"task", "recent_messages"}, changed
    assert changed["recent_messages"]["change"] == "added"
    assert changed["recent_messages"]["delta"] > 0
    assert changed["task"]["lines"] == [
        "@@ -1,3 +1,3 @@", " <task>", f"-{TASK}", "+And the port now?", " </task>",
    ]  # fmt: skip
    same = [s for s in diff["sections"] if s["change"] == "same"]
    assert same and all(s["lines"] == [] and s["delta"] == 0 for s in same)
    # Two steps of one worker call share their assembled context: nothing changed.
    inner = json.loads(cli("runs", "diff", one, "2", "3", "--json", cwd=project).stdout)
    assert all(s["change"] == "same" for s in inner["sections"])
    text = cli("runs", "diff", f"{one}:1", f"{two}:1", cwd=project).stdout
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "@@ task: changed" in text and "+And the port now?" in text
    assert "recent_messages" in text and "added" in text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["runs", "replay", "run-nope"], "unknown run"),
        (["runs", "replay", "RUN", "--from", "0"], "--from: --from 0"),
        (["runs", "replay", "RUN", "--from", "7"], "give a call number from 1 to 6"),
        (["runs", "replay", "RUN", "--persona-prompt", "missing.md"], "missing.md"),
        (["runs", "replay", "RUN", "--persona-prompt", "empty.md"], "persona prompt is empty"),
        (["runs", "replay", "RUN", "--persona-prompt", "."], "persona prompt"),
        (["runs", "replay", "RUN", "--model", "nonsense"], "must look like provider:name"),
        (["runs", "compare", "RUN", "run-nope"], "unknown run"),
        (["runs", "diff", "RUN", "1"], "give RUN CALL_A CALL_B"),
        (["runs", "diff", "RUN", "1", "x"], "is not a call number"),
        (["runs", "diff", "RUN", "1", "9"], "has 5 model call(s): no call 9"),
        (["runs", "diff", "RUN:1", "run-nope:1"], "unknown run"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_stored(
    original: tuple[Path, str, str], cli: Any, args: list[str], expected: str
) -> None:
    root, run_id, _ = original
    (root / "empty.md").write_text("  \n")
    before = _runs(root)
    done = cli(*[a.replace("RUN", run_id) for a in args], cwd=root)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert _runs(root) == before


def test_a_persona_prompt_needs_a_run_with_a_persona(
    project: Path, tmp_path: Path, cli: Any
) -> None:
    spec = _scenario(tmp_path, "plain", [{"when": {"role": "manager"}, "output": PLAN},
                                         *_worker_steps("8081")])  # fmt: skip
    cli("run", TASK, "--model", spec, cwd=project)  # however it ends, it is stored
    run_id = _runs(project)[-1]
    (project / "p.md").write_text("Prompt.\n")
    refused = cli("runs", "replay", run_id, "--persona-prompt", "p.md", cwd=project)
    assert refused.returncode == 2
    assert "used no persona" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_the_viewer_compares_runs_and_shows_a_diff_beside_the_budget_bars(
    original: tuple[Path, str, str], cli: Any
) -> None:
    from starlette.testclient import TestClient

    from personae.ui.app import create_app

    root, run_id, other = original
    cli("runs", "replay", run_id, "--model", other, "--from", "2", cwd=root, check=True)
    new = _runs(root)[-1]
    with TestClient(create_app(root), base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{new}")
        assert page.status_code == 200 and f"/compare/{run_id}/{new}" in page.text
        side = client.get(f"/compare/{run_id}/{new}")
        assert side.status_code == 200, side.text
        assert "First difference: <b>call 2</b>" in side.text
        assert "from the record (call 1)" in side.text and "port 9999" in side.text
        diff = client.get(f"/runs/{new}/calls/4/diff", params={"with": f"{run_id}:4"})
        assert diff.status_code == 200, diff.text
        assert "What changed" in diff.text and diff.text.count('class="budget"') == 2
        call = client.get(f"/runs/{new}/calls/2")
        assert f"/runs/{new}/calls/2/diff" in call.text
        assert client.get(f"/runs/{new}/calls/2/diff").status_code == 200
        bad = client.get(f"/runs/{new}/calls/2/diff", params={"with": "nonsense"})
        assert bad.status_code == 404 and "not RUN:CALL" in bad.text
        assert client.get(f"/compare/{run_id}/run-nope").status_code == 404


def _budget(*sections: tuple[str, str, int]) -> BudgetReport:
    return BudgetReport.model_validate({
        "role": "worker", "snapshot_id": "s", "counter": "chars", "counter_exact": False,
        "history_path": "A", "total": sum(kept for _, _, kept in sections), "budget": 1000,
        "overhead": 0,
        "sections": [{"tag": t, "source": t, "rule": r, "kept": k, "requested": k,
                      "allotted": k} for t, r, k in sections],
    })  # fmt: skip


def test_each_kind_of_section_change_is_named() -> None:
    from personae.context.diff import diff_contexts, render_diff

    before = (
        "personae-role: worker\nDo the work.\n\n<notes>\na\nb\nc\nd\n</notes>\n\n"
        "<conversation_summary>\n- user: hello\n</conversation_summary>\n\n"
        "<recent_messages>\n### user\nhello\n### user\nagain\n</recent_messages>\n\n"
        "<old>\ngone soon\n</old>"
    )
    after = (
        "personae-role: worker\nDo the work.\n\n<notes>\na\nb\n[… 2 lines cut]\n</notes>\n\n"
        "<conversation_summary>\n- user: hello\n- user: again\n</conversation_summary>\n\n"
        "<recent_messages>\n### user\nagain\n</recent_messages>\n\n<new>\nfresh\n</new>"
    )
    a = _budget(("notes", "full", 8), ("conversation_summary", "full", 5),
                ("recent_messages", "full", 9), ("old", "full", 4))  # fmt: skip
    b = _budget(("notes", "budget: cut", 6), ("conversation_summary", "full", 9),
                ("recent_messages", "evicted", 5), ("new", "full", 3))  # fmt: skip
    diff = diff_contexts(("A:1", before, a), ("B:1", after, b))
    changes = {s.tag: s.change for s in diff.sections}
    assert changes == {
        "(instructions)": "same", "notes": "cut", "conversation_summary": "summarized",
        "recent_messages": "summarized", "old": "removed", "new": "added",
    }  # fmt: skip
    notes = next(s for s in diff.sections if s.tag == "notes")
    assert notes.delta == -2
    assert notes.lines == ["@@ -3,4 +3,3 @@", " b", "-c", "-d", "+[… 2 lines cut]", " </notes>"]
    text = render_diff(diff, width=40)
    assert max(len(line) for line in text.splitlines()) <= 40
    assert "@@ old: removed (-4 tokens) @@" in text and "+fresh" in text
