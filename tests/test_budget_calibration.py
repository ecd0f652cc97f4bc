"""The per-model request calibration: the provider's input tokens over our count of the
same requests, learned after each run, narrowing the next run's context budget when
the provider counts more (bounded, persisted, never widening)."""

from __future__ import annotations

import json
from pathlib import Path

from _helpers import personae_cli
from personae.store.db import Store
from personae.team.budget_calibration import calibrated_budget, learn_from_run
from personae.telemetry.inputcount import input_count
from personae.tokens.calibration import MAX_FACTOR, MAX_NARROWING, MIN_FACTOR, Calibration

DEMO_SCENARIO = Path(__file__).resolve().parents[1] / "src/personae/examples/demo/scenario.yaml"
DEMO_TASK = "Give me the port the service listens on and the setup steps."


def test_request_factor_learns_persists_is_bounded_and_only_narrows(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        cal = Calibration(store)
        assert cal.request_factor("openai:gpt-4o") == (1.0, 0) and cal.narrowing("gpt-4o") == 1.0
        assert cal.calibrate_request("openai:gpt-4o", ours=1000, reported=1200) == 1.2
        # exact counters too: a provider's template counts what our tokenizer does not see
        assert Calibration(store).request_factor("gpt-4o") == (1.2, 1)  # persisted
        budget, note = calibrated_budget(store, "openai:gpt-4o", 128_000, 0.3)
        assert budget.tokens == int(128_000 * 0.3 / 1.2) and note is not None
        assert "1.20x our count" in note and "1 run(s)" in note
        cal.calibrate_request("gpt-4o", ours=100, reported=100_000)  # one wild report
        factor, runs = Calibration(store).request_factor("gpt-4o")
        assert runs == 2 and factor <= MAX_FACTOR
        assert Calibration(store).narrowing("gpt-4o") == MAX_NARROWING  # budget keeps 2/3
        # a provider counting less than we do never widens the budget
        learn_from_run(store, {"llama-3": (500, 1000)})
        assert Calibration(store).request_factor("llama-3") == (0.5, 1) == (MIN_FACTOR, 1)
        assert calibrated_budget(store, "llama-3", 8192, 0.3) == (
            calibrated_budget(store, "never-seen", 8192, 0.3)[0], None)  # fmt: skip
        # nothing reported, nothing learned
        assert cal.calibrate_request("qwen", ours=0, reported=10) == 1.0
        assert Calibration(store).request_factor("qwen") == (1.0, 0)


def _demo(tmp_path: Path) -> Path:
    target = tmp_path / "weather"
    done = personae_cli("demo", "--keep", str(target), "--json", cwd=tmp_path,
                        drop=["PERSONAE_MODEL"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    return target


def _run(root: Path, model: str) -> dict[str, object]:
    done = personae_cli("run", DEMO_TASK, "--persona", "maintainer", "--model", model,
                        cwd=root, drop=["PERSONAE_MODEL"])  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = personae_cli("runs", "show", done.stdout.split()[1], "--json", cwd=root)
    record: dict[str, object] = json.loads(shown.stdout)
    return record


def test_a_run_learns_from_the_servers_figures_and_the_next_run_is_narrowed(
    tmp_path: Path,
) -> None:
    root = _demo(tmp_path)  # the demo's own run calibrated once already
    model = f"scripted:{DEMO_SCENARIO}"
    with Store(root / ".personae" / "state.db") as store:
        before = store.calibration_factors()
    first = _run(root, model)
    calls = first["model_calls"]
    assert isinstance(calls, list) and calls
    counts = [input_count(c["usage"]) for c in calls if c["model"] == calls[0]["model"]]
    reported = sum(c.reported or 0 for c in counts if c.reported and c.ours)
    ours = sum(c.ours or 0 for c in counts if c.reported and c.ours)
    label = str(calls[0]["model"])
    with Store(root / ".personae" / "state.db") as store:
        factor, runs = Calibration(store).request_factor(label)
        was, seen = before.get(Calibration.request_key(label), (1.0, 0))
        # one step, from the run's own calls, toward the server's real count over ours
        observed = max(MIN_FACTOR, reported / ours)
        assert runs == seen + 1 and min(was, observed) <= factor <= max(was, observed)
        assert factor < 1  # ours is an estimate with a safety margin: never narrowed
        assert all(c["budget"]["budget"] == 38_400 for c in calls if c["budget"].get("budget"))
        for _ in range(6):  # a provider that counts twice what we do
            Calibration(store).calibrate_request(label, ours=1000, reported=2000)
        narrowing = Calibration(store).narrowing(label)
    assert 1.0 < narrowing <= MAX_NARROWING
    second = _run(root, model)
    budgets = [c["budget"] for c in second["model_calls"] if c["budget"].get("budget")]  # type: ignore[union-attr]
    assert budgets and all(b["budget"] == int(128_000 * (0.3 / narrowing)) for b in budgets)
    assert all(any("budget narrowed" in w for w in b["warnings"]) for b in budgets)
