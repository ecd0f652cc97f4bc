"""Workflows: declarative chains of persona steps, run stage by stage with fan-out.

``spec`` (the workflow file), ``chain`` (running it: checkpoints, resume, the
report) and ``executors`` (where each step's job runs; the local process
executor, and the interface other engines implement). Each step is a
handover (``personae.handover``) run in a child ``personae`` process.
"""

__all__: list[str] = []
