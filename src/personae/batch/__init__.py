"""Batches of independent team runs: one task per JSONL line, one result line per task.

``tasks`` (reading and checking the task file), ``job`` (one task as a child
``personae run`` with timeout and retries), ``results`` (the append-only result
file that makes a batch resumable), ``progress`` (what the user sees) and
``engine`` (:func:`~personae.batch.engine.run_batch`, over any
:class:`~personae.workflow.executors.Executor`: local processes or Ray tasks).
"""

__all__: list[str] = []
