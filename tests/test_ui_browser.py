"""The web viewer in a real browser: ``personae ui`` over a stored demo run and chain.

Set ``PERSONAE_UI_SCREENSHOTS=docs/img`` to refresh the screenshots in the docs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _helpers import wait_until
from _ui_support import launch_browser, make_project, viewer
from personae.store.db import Store
from personae.store.runs import RunStore

Project = tuple[Path, str, str]
"""The project folder, the demo run's id, the tight-budget run's id."""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    root = tmp_path_factory.mktemp("ui") / "weather-service"
    return (root, *make_project(root))


@pytest.fixture(scope="module")
def base(project: Project) -> Iterator[str]:
    with viewer(project[0]) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -e '.[ui-test]'")
    with sync_playwright() as p:
        chromium = launch_browser(p)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda d: errors.append(f"dialog: {d.message}"))
    yield page
    page.close()
    assert not errors, errors


def shot(page: Any, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("PERSONAE_UI_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000


def test_runs_list_shows_every_run_with_its_facts(
    page: Any, base: str, project: Project, tmp_path: Path
) -> None:
    run_id = project[1]
    page.goto(base + "/")
    rows = page.locator("table.runs tbody tr")
    # the demo run, the tight-budget run, the chain's own run and its two steps
    assert rows.count() == 5
    demo = page.locator(f'tr[data-run="{run_id}"]')
    text = demo.inner_text()
    assert "done" in text and "maintainer" in text and "scripted:" in text
    with Store(project[0] / ".personae" / "state.db") as store:
        usage = RunStore(store).get(run_id).usage
    assert f"{usage['input_tokens']:,} in / {usage['output_tokens']:,} out" in text
    shot(page, "ui-runs.png", tmp_path)
    page.select_option("select[name=persona]", "data-analyst")
    # The filter form reloads the page: read the rows once the new page has loaded (a
    # click returns when the navigation commits, before the new rows are parsed).
    page.click("button[type=submit]")
    page.wait_for_load_state()
    assert page.locator("table.runs tbody tr").count() == 1
    assert "data-analyst" in page.locator("table.runs tbody").inner_text()
    page.fill("input[name=q]", "no such task anywhere")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    assert "No runs match" in page.inner_text("#runs")


def test_run_timeline_has_plan_subagent_rejection_and_budget_bars(
    page: Any, base: str, project: Project, tmp_path: Path
) -> None:
    root, run_id, _ = project
    page.goto(f"{base}/runs/{run_id}")
    assert page.locator('[data-kind="plan"]').count() == 1
    assert page.locator("li.subtask").count() == 2
    rejected = page.locator("li.validation.rejected")
    assert rejected.count() == 1
    assert "hallucination" in rejected.inner_text()
    assert "8080" in page.locator('[data-kind="work_result"]').first.inner_text()
    assert page.locator('[data-kind="correction"]').count() == 1
    # The sub-agent is a tree node holding its own tool call and model calls.
    agent = page.locator('li.subagent[data-kind="subagent"]')
    assert agent.count() == 1
    assert "scout" in agent.locator(".agenthead").inner_text()
    assert "read_file" in agent.locator('[data-kind="tool_call"]').inner_text()
    assert agent.locator('[data-kind="model_call"]').count() == 2
    assert "scout" in page.inner_text(".agents")
    # Every model call is listed; each with a budget report has its bar.
    with Store(root / ".personae" / "state.db") as store:
        calls = RunStore(store).model_calls(run_id)
    assert page.locator('[data-kind="model_call"]').count() == len(calls)
    with_report = sum(1 for c in calls if c.budget.get("sections"))
    assert with_report >= 8
    assert page.locator(".mini .bar").count() == with_report
    assert "8081" in page.inner_text('[data-kind="final"]')
    shot(page, "ui-run.png", tmp_path)


def test_model_call_page_shows_sections_budget_and_answer(
    page: Any, base: str, project: Project, tmp_path: Path
) -> None:
    run_id = project[1]
    page.goto(f"{base}/runs/{run_id}")
    page.locator("li.item.validation.ok").first.wait_for()
    # Open the validator call of subtask 1 from the timeline.
    link = page.locator('li.call:has(.badge:text("validator")) a.calllink').first
    link.click()
    page.wait_for_url("**/calls/*")
    assert page.locator("section.budget .bar.big .seg").count() >= 3
    table = page.inner_text("table.sections")
    assert "validation_context" in table and "directive" in table
    assert page.locator("details.ctx").count() >= 4
    assert "<directive>" in page.inner_text(".prompt")
    # The model's answer as stored: the validator's structured verdict (a tool call).
    verdict = page.inner_text("ol.tool-calls")
    assert "final_result" in verdict and '"approved": true' in verdict
    assert "finish reason: tool_call" in page.inner_text("body")
    shot(page, "ui-call.png", tmp_path)
    root, run_id, _ = project
    with Store(root / ".personae" / "state.db") as store:
        calls = RunStore(store).model_calls(run_id)
    # The worker's first answer: the hallucinated claim the code check rejected.
    worker = next(c for c in calls if c.role == "worker")
    page.goto(f"{base}/runs/{run_id}/calls/{worker.seq}")
    assert "port 8080, the usual default" in page.inner_text("pre.model-answer")
    # A sub-agent's call: no per-section report, and its final message as its answer.
    scout = [c for c in calls if c.role == "subagent"]
    page.goto(f"{base}/runs/{run_id}/calls/{scout[-1].seq}")
    assert "No per-section report" in page.inner_text("section.budget")
    assert "You are Scout" in page.inner_text(".prompt")
    assert "From README.md" in page.inner_text("pre.model-answer")


def test_cut_and_dropped_sections_are_marked_with_their_notices(
    page: Any, base: str, project: Project, tmp_path: Path
) -> None:
    root, _, tight = project
    with Store(root / ".personae" / "state.db") as store:
        calls = RunStore(store).model_calls(tight)

    def gone(section: dict[str, Any]) -> bool:  # dropped or removed: nothing (or a notice) kept
        rule = str(section["rule"])
        return section["requested"] > 0 and (
            section["kept"] == 0 or any(w in rule for w in ("dropped", "removed", "evicted"))
        )

    # The tight run's validator call with the most sections lost.
    call = max(
        (c for c in calls if c.role == "validator"),
        key=lambda c: sum(gone(s) for s in c.budget["sections"]),
    )
    dropped = [s["tag"] for s in call.budget["sections"] if gone(s)]
    cut = [s["tag"] for s in call.budget["sections"] if 0 < s["kept"] < s["requested"]]
    assert dropped and cut
    page.goto(f"{base}/runs/{tight}")
    assert page.locator(".mini .badge.warn").count() >= 1  # "N cut" next to the bar
    page.goto(f"{base}/runs/{tight}/calls/{call.seq}")
    for tag in dropped:
        row = page.locator(f'table.sections tr[data-tag="{tag}"]')
        assert "dropped" in row.inner_text()
        assert page.locator(f'.bar.big .seg.lost.dropped[data-tag="{tag}"]').count() == 1
    for tag in (t for t in cut if t not in dropped):
        assert "cut" in page.locator(f'table.sections tr[data-tag="{tag}"]').inner_text()
        assert page.locator(f'.bar.big .seg.lost.cut[data-tag="{tag}"]').count() == 1
    notices = page.locator("ul.notices li")
    assert notices.count() >= 1
    assert page.locator(".prompt mark.notice").count() == notices.count()
    words = ("omitted", "truncated", "shortened", "budget")
    assert all(any(w in t for w in words) for t in notices.all_inner_texts())
    shot(page, "ui-call-cut.png", tmp_path)


def test_chain_graph_links_steps_to_their_runs_and_handovers(
    page: Any, base: str, tmp_path: Path
) -> None:
    page.goto(base + "/chains")
    page.click("text=sales-report")
    page.wait_for_load_state()  # the chain's page, parsed (the click returns at commit)
    nodes = page.locator("svg.graph a.node")
    assert nodes.count() == 2
    edge = page.locator("svg.graph path.edge")
    assert edge.count() == 1
    assert edge.get_attribute("data-from") == "analyse"
    assert edge.get_attribute("data-to") == "report"
    assert page.locator("svg.graph rect.good").count() == 2
    shot(page, "ui-chain.png", tmp_path)
    page.click('tr[data-step="report"] >> text=handover file')
    assert "report-writer" in page.inner_text("pre.handover")
    page.go_back()
    page.locator('svg.graph a.node[data-step="analyse"]').click()
    page.wait_for_url("**/runs/run-*")
    assert "data-analyst" in page.inner_text("dl.facts")
    assert "analyse.json" in page.inner_text("dl.facts")


def test_a_running_run_updates_live(page: Any, base: str, project: Project) -> None:
    root = project[0]
    with Store(root / ".personae" / "state.db") as store:
        runs = RunStore(store)
        rid = runs.create(
            task="Count the <b>lines</b> sk-livetest0123456789abcdef", model="scripted:x"
        )
        add = runs.add_event
        add(rid, seq=1, kind="start", at=_now(), message="started", subtask=None, data={})
        page.goto(f"{base}/runs/{rid}")
        assert "live" in page.inner_text("p.live")
        assert page.locator('[data-kind="plan"]').count() == 0
        plan = {"subtasks": [{"description": "count them", "requirements": []}]}
        add(rid, seq=2, kind="plan", at=_now(), message="1 subtask(s)", subtask=None, data=plan)
        wait_until(lambda: page.locator('[data-kind="plan"]').count() == 1)
        # An event kind this version does not know (a newer personae wrote it) still shows.
        extra = {"extra": {"nested": True}}
        add(rid, seq=3, kind="brand_new_kind", at=_now(), message="new", subtask=None, data=extra)
        wait_until(lambda: page.locator('[data-kind="brand_new_kind"]').count() == 1)
        runs.finish(rid, status="done", final_text="3 lines", usage={})
        wait_until(lambda: "run finished" in page.inner_text("p.live"))
        wait_until(lambda: "done" in page.inner_text("dl.facts"))
    html = page.content()
    assert "<b>lines</b>" not in html and "&lt;b&gt;lines&lt;/b&gt;" in html
    assert "sk-livetest0123456789abcdef" not in html and "[REDACTED:openai-key]" in html


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="milliseconds")


WAITER = """---
name: waiter
description: Waits for a go-ahead file, then reports.
tools: [run_shell]
max_steps: 4
---
You wait for the go-ahead and report it.
"""

WAIT_SCENARIO = """description: A run that waits in a real shell command until the file go exists.
steps:
  - when: {role: manager}
    output:
      rationale: One step.
      subtasks:
        - description: Wait for the go-ahead file
          requirements: ["The shell command saw the file"]
  - when: {role: worker}
    tool_calls:
      - name: run_shell
        args: {command: "while [ ! -f go ]; do sleep 0.1; done; echo released", timeout: 60}
  - when: {role: worker}
    text: "The shell command printed: released."
  - when: {role: validator}
    output:
      approved: true
      requirements_met: true
      issues: []
      next_action: continue
      completion_signal: {confidence: high, progress_made: true}
  - when: {role: manager}
    text: "Released: the go-ahead file appeared."
"""


def test_a_real_run_in_progress_is_followed_live(browser: Any, tmp_path: Path) -> None:
    """A `personae run` that blocks in a shell command until the test lets it go on."""
    import json
    import subprocess
    import sys

    import httpx

    root = tmp_path / "waiting"
    (root / ".personae" / "personas").mkdir(parents=True)
    (root / ".personae" / "personas" / "waiter.md").write_text(WAITER, encoding="utf-8")
    (root / "scenario.yaml").write_text(WAIT_SCENARIO, encoding="utf-8")
    run = subprocess.Popen(
        [sys.executable, "-m", "personae", "run", "--json", "--persona", "waiter",
         "--model", "scripted:scenario.yaml", "Wait for the go-ahead"],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert run.stdout is not None
        run_id = json.loads(run.stdout.readline())["run_id"]
        with viewer(root) as base:
            wait_until(lambda: httpx.get(f"{base}/runs/{run_id}", timeout=5).status_code == 200, 60)
            runs_page, run_page = browser.new_page(), browser.new_page()
            runs_page.goto(base + "/")
            run_page.goto(f"{base}/runs/{run_id}")
            assert "live" in run_page.inner_text("p.live")
            # The runtime stores in batches after each role call: the manager's call shows
            # up while the worker waits in its shell command; the plan comes with the next batch.
            wait_until(lambda: run_page.locator('[data-kind="model_call"]').count() == 1, 60)
            assert "manager" in run_page.inner_text('[data-kind="model_call"]')
            assert run_page.locator('[data-kind="final"]').count() == 0
            assert "running" in runs_page.inner_text(f'tr[data-run="{run_id}"]')
            (root / "go").write_text("", encoding="utf-8")
            wait_until(lambda: run_page.locator('[data-kind="final"]').count() == 1, 60)
            assert "released" in run_page.inner_text('[data-kind="tool_call"]')
            wait_until(lambda: "run finished" in run_page.inner_text("p.live"))
            wait_until(lambda: "done" in runs_page.inner_text(f'tr[data-run="{run_id}"]'))
            runs_page.close()
            run_page.close()
        assert run.wait(timeout=60) == 0
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=10)
        (root / "go").touch()
        for stream in (run.stdout, run.stderr):
            if stream is not None:
                stream.close()
