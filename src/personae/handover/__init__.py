"""Handovers: versioned files that move work between personas and processes.

``schema`` (the ContextHandover model), ``files`` (load/save, atomic, locked),
``create`` (build and write), ``runflow`` (``begin``/``finish`` for the
receiving run), ``child`` (spawn a child run with timeout and retries) and
``tool`` (``handover_to_persona``). The safety rules (paths, environment,
secrets) live in ``personae.security.policy``; multi-step workflows in
``personae.workflow``.
"""

from typing import TYPE_CHECKING

from personae._lazy import lazy_front

if TYPE_CHECKING:
    from personae.handover.files import LoadedHandover, read_handover, save_handover
    from personae.handover.schema import SCHEMA_VERSION, ContextHandover, Results
    from personae.security.policy import HandoverSecurityError

__all__ = [
    "SCHEMA_VERSION",
    "ContextHandover",
    "HandoverSecurityError",
    "LoadedHandover",
    "Results",
    "read_handover",
    "save_handover",
]

# a lazy front: a run without a handover imports no handover model
__getattr__ = lazy_front(
    __name__,
    {
        "SCHEMA_VERSION": "personae.handover.schema",
        "ContextHandover": "personae.handover.schema",
        "HandoverSecurityError": "personae.security.policy",
        "LoadedHandover": "personae.handover.files",
        "Results": "personae.handover.schema",
        "read_handover": "personae.handover.files",
        "save_handover": "personae.handover.files",
    },
)
