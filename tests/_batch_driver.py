"""A batch driver process for kill and Ctrl-C tests (run as a script only).

``python _batch_driver.py TASKS OUT EXECUTOR [ADDRESS]``: runs the batch in the
current folder with :mod:`_batch_child` as every task's child, concurrency 2,
JSON events on stdout; exit code as ``personae batch`` (130 on Ctrl-C).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    from personae.batch.engine import BatchOptions, run_batch
    from personae.batch.job import RunCommand
    from personae.batch.progress import Progress
    from personae.workflow.engines import open_executor

    tasks, out, kind = Path(argv[0]), Path(argv[1]), argv[2]
    address = argv[3] if len(argv) > 3 else None
    options = BatchOptions(
        cwd=Path.cwd(), out=out, concurrency=2, timeout=120, retries=0, backoff=0.05,
        command=RunCommand(prefix=(sys.executable, str(HERE / "_batch_child.py"))),
    )  # fmt: skip
    try:
        with open_executor(kind, address=address, tie=True) as runner:
            outcome = run_batch(
                tasks, options, executor=runner, progress=Progress("json", sys.stderr, sys.stdout)
            )
    except KeyboardInterrupt:
        return 130
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
