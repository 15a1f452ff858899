"""The units a Postgres connector runs: :class:`Stmt` (one statement of a
batch) and :class:`Tx` (one open transaction and what it ran), shared by the
sync and async connectors and every module that plans statements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["LOCK_SLOT", "Fetch", "Stmt", "Tx"]

Fetch = Literal["none", "one", "all", "many"]

LOCK_SLOT = "TRUE /*threadloom:thread-lock*/"
"""Where an optimistic statement can take its thread's advisory lock before it
writes anything (:func:`.optimistic.lock_first`); left alone it is just TRUE."""


@dataclass(frozen=True)
class Stmt:
    """One statement of a batch.

    ``"one"``/``"all"`` return the first row / all rows (and wait for them);
    ``"none"`` returns None without waiting, so in a pipeline the statement
    travels with the next one that needs an answer (or the closing Sync);
    ``"many"`` runs ``executemany`` over ``params`` (a list of rows), likewise.
    """

    sql: str
    params: Any = ()
    fetch: Fetch = "none"


@dataclass
class Tx:
    """One open transaction: the connection it runs on and what it ran so far."""

    write: bool
    conn: Any = None
    stack: Any = None
    log: list[tuple[Sequence[Stmt], list[Any]]] = field(default_factory=list)
    locked: set[str] = field(default_factory=set)  # threads whose advisory lock we hold
    optimistic: bool = False  # some reads answered without asking (see optimistic.py)
    pending: Any = None  # an optimistic read whose validation is not queued yet
    snapshot: bool = False  # a read re-run after it tore: one REPEATABLE READ snapshot
    generic: bool = False  # generic plans asked for (see generic.py)
    seen: Any = None  # checkpoint rows a torn-prone read found (seenrows.py)
    absorbed: Any = None  # counts a put_writes insert already added (optimistic.py)
    pipeline: Any = None  # the pipeline this transaction entered (ConnectorBase.settle)
    lazy: bool = False  # its pipeline not entered yet: it may commit through lean.py
