"""Handovers: versioned files that move work between personas and processes.

``schema`` (the ContextHandover model), ``files`` (load/save, atomic, locked),
``security`` (paths, environment, secrets), ``create`` (build and write),
``runflow`` (``begin``/``finish`` for the receiving run), ``executor`` (spawn a
child run with timeout and retries), ``tool`` (``handover_to_persona``) and
``chain`` (declarative multi-step workflows with fan-out and resume).
"""

from personae.handover.files import LoadedHandover, load_handover, save_handover
from personae.handover.schema import SCHEMA_VERSION, ContextHandover, Results
from personae.handover.security import HandoverSecurityError

__all__ = [
    "SCHEMA_VERSION",
    "ContextHandover",
    "HandoverSecurityError",
    "LoadedHandover",
    "Results",
    "load_handover",
    "save_handover",
]
