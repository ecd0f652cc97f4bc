"""Team runtime benchmark: personae's own overhead per model call, and validator cost.

1. Overhead per model call: the demo turn is run repeatedly with the scripted
   model answering instantly (in-process FunctionModel replaying the demo
   scenario; it is scripted, not a real model). Time spent in personae's own
   code per model call is measured by timing context assembly
   (``TurnContext.view``), event fan-out with SQLite writes (``EventBus.emit``)
   and model-call storage (``RunStore.add_model_call``). Target: median < 2 ms.
   For reference the wall time per call over real loopback HTTP (scripted
   server + OpenAI provider) is reported too.
2. Calls and tokens per validated subtask: this design (code checks first,
   then one structured call) against a design of five separate
   validator calls per validation (requirements, unjustified failure,
   coherence, correction, completion signal), each carrying the same context.
   Tokens are exact o200k_base counts of the validator prompts actually sent.

Usage: python bench/bench_team.py [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic_ai.models import override_allow_model_requests

from personae.models import ModelResolver, load_scenario, scripted_function_model
from personae.models.scenario import ROLE_MARKER
from personae.store.runs import RunStore
from personae.team.events import EventBus
from personae.team.session import RunOptions, run_turn
from personae.team.turn_context import TurnContext
from personae.tokens.exact import exact_counter

FIVE_CALL_VALIDATOR_CALLS = 5
TASK = "Give me the port the service listens on and the setup steps."


class Timer:
    """Accumulates time spent in wrapped functions."""

    def __init__(self) -> None:
        self.total = 0.0
        self.cpu = 0.0
        self.depth = 0

    def wrap(self, owner: Any, name: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)
        timer = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            if timer.depth:  # nested (emit -> store): counted by the outer call
                return original(*args, **kwargs)
            timer.depth += 1
            start, cpu = time.perf_counter(), time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                timer.total += time.perf_counter() - start
                timer.cpu += time.process_time() - cpu
                timer.depth -= 1

        setattr(owner, name, timed)


def _demo() -> tuple[Path, Path]:
    bundle = Path(str(resources.files("personae.examples") / "demo"))
    return bundle / "project", bundle / "scenario.yaml"


def overhead(turns: int) -> dict[str, Any]:
    project_src, scenario_path = _demo()
    scenario = load_scenario(scenario_path)
    timer = Timer()
    for owner, name in ((TurnContext, "view"), (EventBus, "emit"), (RunStore, "write_batch")):
        timer.wrap(owner, name)
    per_call: list[float] = []
    cpu_per_call: list[float] = []
    wall_per_call: list[float] = []
    validator_prompts: list[str] = []
    validated = 0
    validator_calls = 0
    total_calls = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "p"
        shutil.copytree(project_src, root)
        for i in range(turns):
            model = scripted_function_model(scenario)
            options = RunOptions(
                root=root, persona="maintainer", session="bench", include_git_log=False
            )
            before, cpu_before = timer.total, timer.cpu
            start = time.perf_counter()
            outcome = asyncio.run(
                run_turn(TASK, options, resolver=ModelResolver.using(model, "scripted:bench"))
            )
            wall = time.perf_counter() - start
            calls = outcome.usage.requests
            per_call.append((timer.total - before) / calls)
            cpu_per_call.append((timer.cpu - cpu_before) / calls)
            wall_per_call.append(wall / calls)
            if i == 0:
                marker = ROLE_MARKER.format(role="validator")
                for body in model.player.requests:
                    text = "\n".join(str(m.get("content")) for m in body["messages"])
                    if marker in text:
                        validator_prompts.append(text)
                validated = sum(o.status == "validated" for o in outcome.subtasks)
                validator_calls = len(validator_prompts)
                total_calls = calls
                validations = [e for e in outcome.events if e.kind.value == "validation"]
    counter = exact_counter("o200k_base")
    tokens = [counter.count(p) for p in validator_prompts]
    ours_tokens = sum(tokens)
    # The five-call design makes five calls per validation, including the ones decided in code here.
    mean_prompt = ours_tokens / max(1, len(tokens))
    seed_calls = FIVE_CALL_VALIDATOR_CALLS * len(validations)
    seed_tokens = round(FIVE_CALL_VALIDATOR_CALLS * mean_prompt * len(validations))
    return {
        "turns": turns,
        "overhead_ms_per_call": {
            "median": statistics.median(per_call) * 1000,
            "p90": sorted(per_call)[int(0.9 * (len(per_call) - 1))] * 1000,
            "cpu_median": statistics.median(cpu_per_call) * 1000,
            "target_median": 2.0,
            "load_average_1m": os.getloadavg()[0],
            "cpus": os.cpu_count(),
        },
        "wall_ms_per_call_in_process": statistics.median(wall_per_call) * 1000,
        "validation": {
            "validated_subtasks": validated,
            "validations": len(validations),
            "this_design": {
                "validator_calls_per_validated_subtask": validator_calls / validated,
                "validator_input_tokens_per_validated_subtask": ours_tokens / validated,
                "all_calls_per_validated_subtask": total_calls / validated,
            },
            "five_call_validator": {
                "validator_calls_per_validated_subtask": seed_calls / validated,
                "validator_input_tokens_per_validated_subtask": seed_tokens / validated,
                "all_calls_per_validated_subtask": (total_calls - validator_calls + seed_calls)
                / validated,
            },
        },
    }


def loopback(turns: int) -> float:
    """Median wall ms per model call over real loopback HTTP (scripted server)."""
    project_src, scenario_path = _demo()
    samples: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, override_allow_model_requests(True):
        root = Path(tmp) / "p"
        shutil.copytree(project_src, root)
        for _ in range(turns):
            options = RunOptions(
                root=root, persona="maintainer", model=f"scripted:{scenario_path}",
                include_git_log=False,
            )  # fmt: skip
            start = time.perf_counter()
            outcome = asyncio.run(run_turn(TASK, options))
            samples.append((time.perf_counter() - start) / outcome.usage.requests)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12)
    args = parser.parse_args()
    result = overhead(args.turns)
    result["wall_ms_per_call_loopback_http"] = loopback(max(2, args.turns // 4))
    o = result["overhead_ms_per_call"]
    v = result["validation"]
    wall_in = result["wall_ms_per_call_in_process"]
    wall_http = result["wall_ms_per_call_loopback_http"]
    ours, seed = v["this_design"], v["five_call_validator"]
    print(f"personae team benchmark ({result['turns']} demo turns, "
          "scripted replay server, instant; "
          f"load average {o['load_average_1m']:.1f} on {o['cpus']} CPUs)")  # fmt: skip
    print(f"{'metric':<52}{'value':>12}")
    print(f"{'own overhead per model call, median (ms)':<52}{o['median']:>12.3f}")
    print(f"{'own overhead per model call, p90 (ms)':<52}{o['p90']:>12.3f}")
    print(f"{'own CPU time per model call, median (ms)':<52}{o['cpu_median']:>12.3f}")
    print(f"{'target median (ms)':<52}{o['target_median']:>12.1f}")
    print(f"{'wall per call, in-process model (ms)':<52}{wall_in:>12.2f}")
    print(f"{'wall per call, loopback HTTP scripted server (ms)':<52}{wall_http:>12.2f}")
    counts = f"{v['validated_subtasks']} validated, {v['validations']} validations"
    print(f"\nper validated subtask ({counts})")
    print(f"{'design':<34}{'validator calls':>16}{'validator tokens':>18}{'all calls':>11}")
    for label, row in (
        ("personae (code checks + 1 call)", ours),
        ("five validator calls per validation", seed),
    ):
        print(
            f"{label:<34}{row['validator_calls_per_validated_subtask']:>16.1f}"
            f"{row['validator_input_tokens_per_validated_subtask']:>18.0f}"
            f"{row['all_calls_per_validated_subtask']:>11.1f}"
        )  # fmt: skip
    out = Path(__file__).parent / "results" / "team.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
