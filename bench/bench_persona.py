"""Benchmark: loading casts and rendering persona snippets.

Run: ``PYTHONPATH=src python bench/bench_persona.py``. Prints a table and
writes ``bench/results/bench_persona.json``. A few seconds in total.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from personae.persona import Cast
from personae.persona.scaffold import init_project

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "tests" / "data" / "claude_agents"


def timed(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    """Median and max wall time of ``fn`` in milliseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return {"median_ms": statistics.median(samples), "max_ms": max(samples), "runs": repeat}


def main() -> None:
    """Run every case, print the table and write the JSON results."""
    dirs = [CORPUS / "claude-flow", CORPUS / "oh-my-claude-sisyphus"]
    with tempfile.TemporaryDirectory() as tmp:
        example = Path(tmp) / "example"
        init_project(example)
        empty = Path(tmp) / "empty"
        corpus_cast = Cast.load(empty, dirs)
        example_cast = Cast.load(example)
        files = sum(1 for d in dirs for _ in d.rglob("*.md"))
        cases = {
            f"load corpus ({files} Claude Code files)": timed(lambda: Cast.load(empty, dirs), 10),
            "load example project (3 personas, 2 skills)": timed(lambda: Cast.load(example), 50),
            "available_agents_xml (corpus)": timed(corpus_cast.available_agents_xml, 200),
            "execution_block (analyst)": timed(
                lambda: example_cast.execution_block("analyst"), 500
            ),
            "validation_context (analyst)": timed(
                lambda: example_cast.validation_context("analyst"), 500
            ),
        }
    width = max(len(k) for k in cases)
    print(f"{'case':<{width}}  {'median ms':>10}  {'max ms':>8}  runs")
    for name, row in cases.items():
        median, worst, runs = row["median_ms"], row["max_ms"], row["runs"]
        print(f"{name:<{width}}  {median:>10.3f}  {worst:>8.3f}  {runs:>4.0f}")
    out = HERE / "results" / "bench_persona.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(cases, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
