"""personae.mind: the mind server (bootstrap packet, memory, recall, journal)."""

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
