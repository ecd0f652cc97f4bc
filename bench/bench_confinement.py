"""Benchmark of race-free confinement: 30,000 attempts each way against a folder flipper.

Run: ``PYTHONPATH=src python bench/bench_confinement.py [ATTEMPTS]``. A second
process swaps a workspace folder with a symlink pointing outside, in a tight
loop, while the real tool functions (``read_file``, ``write_file``,
``list_dir``, ``grep``) run; the table gives escapes, calls that saw the real
folder, refusals, wall and CPU time. The last row is the alternative: check the
path, then open it by name (how the tools worked before), under the same
flipper. Writes ``bench/results/confinement.json``. Takes about a minute.
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _confine_race import KINDS, NAIVE, race

RESULTS = Path(__file__).parent / "results" / "confinement.json"


def main() -> None:
    attempts = int(sys.argv[1]) if len(sys.argv) > 1 else 30_000
    rows = []
    for kind in (*KINDS, NAIVE):
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(race(Path(tmp), kind, attempts))
    print(f"{'kind':<12}{'attempts':>10}{'escapes':>9}{'inside':>8}{'refused':>9}"
          f"{'wall s':>9}{'cpu s':>8}{'us/call':>9}")  # fmt: skip
    for r in rows:
        print(f"{r.kind:<12}{r.attempts:>10}{r.escapes:>9}{r.inside:>8}{r.refused:>9}"
              f"{r.wall:>9.2f}{r.cpu:>8.2f}{r.wall / r.attempts * 1e6:>9.0f}")  # fmt: skip
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {"python": platform.python_version(), "rows": [asdict(r) for r in rows]}, indent=2
        )
        + "\n"
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
