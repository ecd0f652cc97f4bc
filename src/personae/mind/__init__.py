"""personae.mind: the mind server (bootstrap packet, memory, recall, journal).

Names load on first use, so the hook gate, which imports only
:mod:`personae.mind.bootstraps`, does not pay for the service on every tool call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from personae._lazy import lazy_front

if TYPE_CHECKING:
    from personae.mind.contract import ERROR_PREFIX, Contract, load_contract
    from personae.mind.packet import REQUIRED_KEYS, BootstrapPacket, build_packet
    from personae.mind.service import MindService

__all__ = [
    "ERROR_PREFIX",
    "REQUIRED_KEYS",
    "BootstrapPacket",
    "Contract",
    "MindService",
    "build_packet",
    "load_contract",
]

_WHERE = {
    "ERROR_PREFIX": "contract",
    "Contract": "contract",
    "load_contract": "contract",
    "REQUIRED_KEYS": "packet",
    "BootstrapPacket": "packet",
    "build_packet": "packet",
    "MindService": "service",
}


__getattr__ = lazy_front(__name__, {name: f"personae.mind.{home}" for name, home in _WHERE.items()})
