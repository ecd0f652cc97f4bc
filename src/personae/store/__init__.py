"""SQLite storage: conversations, runs and events, handover ledger, memory index."""

from personae.store.db import Store, StoreError

__all__ = ["Store", "StoreError"]
