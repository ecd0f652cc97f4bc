"""One usage tree across processes, and budgets the runs of a tree share.

A run started by another (a chain step, a handover child, a batch task) links to its
parent run and its trace through the environment and the handover file; ``runs show
RUN --tree`` sums calls, tokens (the provider's and ours), time and cost (the config's
``prices:``; no price: unknown). Caps on tokens, cost and calls pass down the tree: a
child gets what is left and cannot raise it; reaching a cap ends the run ``partial``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from personae.lineage import Budget, Link, inherited, parse_traceparent, traceparent
from personae.store.db import Store
from personae.store.runs import RunRecord, RunStore

Cli = Callable[..., subprocess.CompletedProcess[str]]
ANALYST = ("--persona", "data-analyst", "--model", "scripted:analysis.scenario.yaml")
TASK = "Compute revenue per region from data/sales.csv."


def _example(tmp_path: Path, config: dict[str, Any] | None = None) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(Path(str(resources.files("personae.examples") / "chain")), root)
    if config is not None:
        (root / ".personae" / "config.yaml").write_text(yaml.safe_dump(config))
    return root


def _documented_config() -> dict[str, Any]:
    """The config of the usage-tree example in docs/runtime.md."""
    doc = Path(__file__).resolve().parents[1] / "docs" / "runtime.md"
    blocks = re.findall(r"^```yaml\n(.*?)^```", doc.read_text(encoding="utf-8"), re.M | re.S)
    (block,) = [b for b in blocks if "(usage-tree example)" in b]
    config: dict[str, Any] = yaml.safe_load(block)
    return config


def _runs(root: Path) -> list[RunRecord]:
    with Store(root / ".personae" / "state.db") as store:
        return RunStore(store).list_runs(limit=50)


def _events(root: Path, run_id: str) -> list[Any]:
    with Store(root / ".personae" / "state.db") as store:
        return RunStore(store).events(run_id)


def _tree(cli: Cli, root: Path, run_id: str) -> dict[str, Any]:
    shown = cli("runs", "show", run_id, "--tree", "--json", cwd=root)
    assert shown.returncode == 0, shown.stderr
    tree: dict[str, Any] = json.loads(shown.stdout)
    return tree


@pytest.mark.process
def test_a_chain_is_one_tree_in_one_trace_and_its_steps_share_one_token_cap(
    tmp_path: Path, cli: Cli
) -> None:
    """Two chain steps run as real `personae run` processes under the chain's own run: each
    links to it and to its trace; the first step leaves what is left of the cap to the
    second (exactly), which stops at it; the chain ends partial (exit 5)."""
    config = _documented_config()  # the worked example of docs/runtime.md
    assert config["limits"] == {"max_tokens_total": 5000}
    assert config["prices"] == {"scripted:analysis.scenario.yaml": {"input": 1.0, "output": 2.0},
                                "report.scenario.yaml": {"input": 3.0, "output": 4.0}}  # fmt: skip
    root = _example(tmp_path, config)
    ran = cli("chain", "run", "workflow.yaml", cwd=root, process=True, timeout=300)
    assert ran.returncode == 5, ran.stdout + ran.stderr
    chain = next(r for r in _runs(root) if r.task == "chain sales-report")
    assert f"chain run {chain.id}" in ran.stderr
    tree = _tree(cli, root, chain.id)
    assert tree["status"] == "partial" and tree["budget"] == {"tokens": 5000}
    analyse, report = tree["children"]
    assert [analyse["persona"], report["persona"]] == ["data-analyst", "report-writer"]
    for step in (analyse, report):
        assert step["parent_run"] == chain.id
        assert step["trace_id"] == chain.trace_id and len(step["trace_id"]) == 32
    records = {r.id: r for r in _runs(root)}
    assert records[report["run"]].parent_span_id == chain.span_id  # under the chain's span
    # The first step ran within the cap; the second got exactly what was left, and stopped.
    assert analyse["status"] == "done" and analyse["budget"] == {"tokens": 5000}
    used = analyse["own"]["tokens"]
    assert 0 < used < 5000 and report["budget"] == {"tokens": 5000 - used}
    assert report["status"] == "partial"
    caps = [e for e in _events(root, report["run"]) if e.data.get("action") == "usage_cap"]
    assert caps and "token cap of" in caps[0].message
    # Totals add up across the processes; the cost is the price table's, to the token.
    total = tree["total"]
    assert total["calls"] == analyse["own"]["calls"] + report["own"]["calls"] > 0
    assert total["tokens"] == used + report["own"]["tokens"]
    assert total["counted_input_tokens"] > 0 and total["unpriced_models"] == []
    expected = (
        analyse["own"]["input_tokens"] * 1
        + analyse["own"]["output_tokens"] * 2
        + report["own"]["input_tokens"] * 3
        + report["own"]["output_tokens"] * 4
    ) / 1e6
    assert total["cost"] == pytest.approx(expected)
    # The second step's handover file carries the link (schema 1.1).
    saved = root / ".personae" / "chains" / "sales-report" / "handovers" / "report.json"
    handover = json.loads(saved.read_text())
    assert handover["version"] == "1.2.0" and handover["lineage"]["parentRun"] == chain.id
    assert parse_traceparent(handover["lineage"]["traceparent"]) == (chain.trace_id, chain.span_id)
    text = cli("runs", "show", chain.id, "--tree", cwd=root)
    assert text.stdout.splitlines()[0].startswith(f"{chain.id} [partial]")
    assert f"├─ {analyse['run']} [done] data-analyst" in text.stdout
    assert f"└─ {report['run']} [partial] report-writer" in text.stdout
    assert "total (3 run(s)):" in text.stdout and "cost unknown" not in text.stdout


def test_a_child_run_keeps_its_link_and_cannot_raise_the_budget_it_inherits(
    tmp_path: Path, cli: Cli
) -> None:
    root = _example(tmp_path)
    trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    env = {"PERSONAE_PARENT_RUN": "run-20260101-000000-abcdef",
           "TRACEPARENT": traceparent(trace, span), "PERSONAE_BUDGET": '{"calls": 1}'}  # fmt: skip
    ran = cli("run", TASK, *ANALYST, "--max-requests", "50", "--json", cwd=root, env=env)
    assert ran.returncode == 5, ran.stdout + ran.stderr  # partial: stopped at the cap
    run = _runs(root)[0]
    assert run.parent_run_id == "run-20260101-000000-abcdef"
    assert (run.trace_id, run.parent_span_id) == (trace, span) and run.span_id != span
    assert run.budget == {"calls": 1}  # the tighter of --max-requests 50 and what it got
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    warnings = [e for e in lines if e["kind"] == "warning" and e["data"]["action"] == "usage_cap"]
    assert warnings and "request cap of 1" in warnings[0]["message"]
    assert lines[-1]["kind"] == "final" and lines[-1]["data"]["status"] == "partial"
    assert lines[-1]["data"]["usage"]["requests"] == 1


def test_a_cost_cap_stops_the_run_and_the_tree_shows_the_cost(tmp_path: Path, cli: Cli) -> None:
    prices = {"scripted:analysis.scenario.yaml": {"input": 100.0, "output": 200.0}}
    root = _example(tmp_path, {"prices": prices})
    ran = cli("run", TASK, *ANALYST, "--max-cost", "0.05", cwd=root)
    assert ran.returncode == 5, ran.stdout + ran.stderr
    run = _runs(root)[0]
    assert run.status == "partial" and run.budget == {"cost": 0.05}
    tree = _tree(cli, root, run.id)
    own = tree["own"]
    cost = (own["input_tokens"] * 100 + own["output_tokens"] * 200) / 1e6
    assert tree["total"]["cost"] == pytest.approx(cost) and cost >= 0.05
    assert 0 < own["calls"] < 5  # the scenario has five calls; the cap stopped it early
    warned = [e for e in _events(root, run.id) if e.data.get("action") == "usage_cap"]
    assert warned and "cost cap of 0.05 reached" in warned[0].message


def test_without_a_price_the_cost_is_unknown_never_a_guess(tmp_path: Path, cli: Cli) -> None:
    root = _example(tmp_path)
    assert cli("run", TASK, *ANALYST, cwd=root).returncode == 0
    run = _runs(root)[0]
    tree = _tree(cli, root, run.id)
    assert tree["total"]["cost"] is None
    assert tree["total"]["unpriced_models"] == ["scripted:analysis.scenario.yaml"]
    assert tree["parent_run"] is None and tree["children"] == [] and len(run.span_id or "") == 16
    text = cli("runs", "show", run.id, "--tree", cwd=root).stdout
    assert "cost unknown (no price for scripted:analysis.scenario.yaml)" in text


@pytest.mark.parametrize(
    ("args", "env", "config", "message"),
    [
        (("--max-cost", "1"), {}, None, "--max-cost needs a price for scripted:analysis"),
        (
            ("--max-cost", "0"),
            {},
            {"prices": {"analysis.scenario.yaml": {"input": 1, "output": 1}}},
            "--max-cost must be a number above zero",
        ),
        (("--max-tokens-total", "0"), {}, None, "--max-tokens-total"),
        ((), {"PERSONAE_BUDGET": "{tokens: 5"}, None, "PERSONAE_BUDGET: not JSON"),
        ((), {"PERSONAE_BUDGET": '{"tokens": -1}'}, None, "PERSONAE_BUDGET: tokens must be"),
        ((), {"PERSONAE_PARENT_RUN": "../x"}, None, "PERSONAE_PARENT_RUN: not a run id"),
        (
            (),
            {},
            {"prices": {"gpt-4o": {"input": 2.5, "output": -1}}},
            "prices.gpt-4o.output: Input should be greater than or equal to 0",
        ),
        ((), {}, {"prices": {"gpt-4o": {"input": 2.5}}}, "prices.gpt-4o.output"),
        ((), {}, {"limits": {"max_cost": "lots"}}, "limits.max_cost"),
    ],
)
def test_bad_caps_prices_and_links_are_one_line_and_nothing_runs(  # noqa: PLR0917
    tmp_path: Path, cli: Cli, args: tuple[str, ...], env: dict[str, str],
    config: dict[str, Any] | None, message: str,
) -> None:  # fmt: skip
    root = _example(tmp_path, config)
    ran = cli("run", TASK, *ANALYST, *args, cwd=root, env=env)
    assert ran.returncode in (1, 2), ran.stdout + ran.stderr
    assert message in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert "Traceback" not in ran.stderr
    assert not (root / ".personae" / "state.db").exists() or _runs(root) == []
    if args and args[0].startswith("--max"):
        assert ran.returncode == 2


def test_the_link_and_budget_read_from_the_environment_and_the_handover_file() -> None:
    env = {"PERSONAE_PARENT_RUN": "run-a", "TRACEPARENT": "00-" + "ab" * 16 + "-" + "cd" * 8
           + "-01", "PERSONAE_BUDGET": '{"tokens": 900, "cost": 0.5}'}  # fmt: skip
    link = inherited(env)
    assert (link.parent_run, link.trace_id, link.parent_span) == ("run-a", "ab" * 16, "cd" * 8)
    wire = Link(parent_run="run-b", budget=Budget(tokens=100, calls=3)).as_wire()
    merged = link.merged(Link.from_wire(wire, source="file: lineage"))
    assert merged.parent_run == "run-a"  # the environment (the live spawner) wins
    assert merged.budget == Budget(tokens=100, cost=0.5, calls=3)  # the tighter of both
    assert inherited({"TRACEPARENT": "00-" + "0" * 32 + "-" + "cd" * 8 + "-01"}).trace_id is None
    with pytest.raises(ValueError, match=r"file: lineage.budget: unknown field 'money'"):
        Link.from_wire({"budget": {"money": 1}}, source="file: lineage")


def test_the_opentelemetry_export_of_a_tree_is_one_trace_with_the_child_under_its_parent(
    tmp_path: Path, cli: Cli
) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from personae.telemetry.otel import export_run, export_tree

    root = _example(tmp_path)
    assert cli("run", TASK, *ANALYST, cwd=root).returncode == 0
    parent = _runs(root)[0]
    assert parent.trace_id and parent.span_id
    link = traceparent(parent.trace_id, parent.span_id)
    env = {"PERSONAE_PARENT_RUN": parent.id, "TRACEPARENT": link}
    assert cli("run", TASK, *ANALYST, cwd=root, env=env).returncode == 0
    child = _runs(root)[0]
    assert child.parent_run_id == parent.id
    db = root / ".personae" / "state.db"
    exporter = InMemorySpanExporter()
    count = export_tree(db, parent.id, exporter=exporter)
    spans = list(exporter.get_finished_spans())
    assert count == len(spans) > 4
    assert {s.context.trace_id for s in spans} == {int(parent.trace_id, 16)}
    tops = {s.attributes["personae.run.id"]: s for s in spans if "personae.run.id" in s.attributes}
    assert tops[parent.id].parent is None
    assert tops[parent.id].context.span_id == int(parent.span_id, 16)
    assert tops[child.id].parent.span_id == int(parent.span_id, 16)
    assert tops[child.id].attributes["personae.parent_run.id"] == parent.id
    by_id = {s.context.span_id for s in spans}
    assert all(s.parent is None or s.parent.span_id in by_id for s in spans)  # one tree
    alone = InMemorySpanExporter()  # the child exported by its own process joins the trace
    export_run(db, child.id, exporter=alone)
    (top,) = [s for s in alone.get_finished_spans() if s.attributes.get("personae.run.id")]
    assert top.context.trace_id == int(parent.trace_id, 16)
    assert top.parent.span_id == int(parent.span_id, 16)
    # The viewer shows the same tree on both runs' pages, linked both ways.
    from personae.ui.data import Reader
    from personae.ui.pages import run_page

    reader = Reader(root)
    try:
        top_page, child_page = run_page(reader.run(parent.id)), run_page(reader.run(child.id))
    finally:
        reader.close()
    assert "<h2>Run tree</h2>" in top_page and f'href="/runs/{child.id}"' in top_page
    assert "Total (2 run(s)):" in top_page and "cost unknown" in top_page
    assert f'started by run <a href="/runs/{parent.id}">' in child_page


@pytest.mark.process
def test_chain_flags_cap_all_its_steps_together(tmp_path: Path, cli: Cli) -> None:
    root = _example(tmp_path)
    spec = yaml.safe_load((root / "workflow.yaml").read_text())
    spec["steps"] = spec["steps"][:1]
    (root / "workflow.yaml").write_text(yaml.safe_dump(spec))
    ran = cli("chain", "run", "workflow.yaml", "--max-requests", "2", "--json", cwd=root,
              process=True, timeout=300)  # fmt: skip
    assert ran.returncode == 5, ran.stdout + ran.stderr
    done = json.loads(ran.stdout.splitlines()[-1])
    assert done["event"] == "done" and done["status"] == "partial"
    tree = _tree(cli, root, done["run"])
    assert tree["budget"] == {"calls": 2} and tree["status"] == "partial"
    (step,) = tree["children"]
    assert step["budget"] == {"calls": 2} and step["own"]["calls"] == 2
    assert step["status"] == "partial"


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (("chain", "run", "workflow.yaml", "--max-cost", "1"),
         "--max-cost needs a price for scripted:analysis.scenario.yaml"),
        (("chain", "run", "workflow.yaml", "--max-cost", "-1"),
         "--max-cost must be a number above zero"),
        (("batch", "tasks.jsonl", "--max-cost", "0.5"),
         "--max-cost needs a price for scripted:report.scenario.yaml"),
        (("chain", "run", "workflow.yaml", "--max-tokens-total", "0"), "--max-tokens-total"),
    ],
)  # fmt: skip
def test_bad_chain_and_batch_caps_are_one_line_and_nothing_runs(
    tmp_path: Path, cli: Cli, command: tuple[str, ...], message: str
) -> None:
    root = _example(tmp_path)
    task = {"task": "Write the report.", "persona": "report-writer",
            "model": "scripted:report.scenario.yaml"}  # fmt: skip
    (root / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    ran = cli(*command, cwd=root)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert message in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert not (root / ".personae" / "state.db").exists()
    assert not (root / ".personae" / "chains").exists()
