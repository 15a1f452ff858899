"""Storage core shared by every saver backend (memory, SQLite, Postgres, Redis).

``ops`` is the contract (operations an executor runs), ``flows`` the logic
written once as generators, ``drive`` the sync/async drivers, ``core`` the
``BaseCheckpointSaver`` built on them. See docs/storage.md.
"""

from threadloom.checkpoint.storage import ops

__all__ = ["ops"]
