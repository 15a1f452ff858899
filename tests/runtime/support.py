"""Shared by the runtime and Pregel parity tests: both libraries' names, savers,
and a normaliser that makes runs comparable (ids -> <idN> in first-seen order,
timestamps and version tails dropped, dict keys sorted, Interrupt -> tuple).
"""

from __future__ import annotations

import importlib
import re
import sqlite3
from types import SimpleNamespace
from typing import Any

_ID = re.compile(
    r"\d{32}\.[0-9.]+(?:e-\d+)?"  # channel versions with random tails (5e-05 when tiny)
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f.])"
    r"|\d{4}-\d\d-\d\dT[0-9:.+]+"
)


def lib(name: str) -> SimpleNamespace:
    """Public Pregel-level names of ``langgraph`` or ``threadloom``."""

    def m(path: str) -> Any:
        return importlib.import_module(path.replace("X", name))

    return SimpleNamespace(
        name=name,
        Pregel=m("X.pregel").Pregel,
        NodeBuilder=m("X.pregel").NodeBuilder,
        ChannelWrite=m("X.pregel._write").ChannelWrite,
        ChannelWriteEntry=m("X.pregel._write").ChannelWriteEntry,
        ChannelWriteTupleEntry=m("X.pregel._write").ChannelWriteTupleEntry,
        ch=m("X.channels"),
        types=m("X.types"),
        errors=m("X.errors"),
        config=m("X.config"),
    )


def saver(lib_name: str, kind: str) -> Any:
    """A fresh saver of ``kind`` ("memory" | "sqlite") from ``lib_name``."""
    if lib_name == "langgraph":
        if kind == "memory":
            from langgraph.checkpoint.memory import InMemorySaver

            return InMemorySaver()
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    if kind == "memory":
        from threadloom.checkpoint.memory import InMemorySaver

        return InMemorySaver()
    from threadloom.checkpoint.sqlite import SqliteSaver

    s = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None))
    s.setup()
    return s


def canon(x: Any) -> Any:
    """Plain, order-independent data: Interrupts as tuples, dicts with sorted keys."""
    if type(x).__name__ == "Interrupt":
        return ("Interrupt", canon(x.value), x.id)
    if isinstance(x, BaseException):
        return repr(x)  # LangGraph's serializer stores exceptions as their repr
    if isinstance(x, dict):
        return {k: canon(x[k]) for k in sorted(x, key=str)}
    if isinstance(x, (list, tuple)):
        return [canon(v) for v in x]
    if type(x).__name__ == "Send":
        return ("Send", x.node, canon(x.arg))
    return x


def norm(x: Any) -> str:
    """``canon(x)`` as text with ids numbered by first appearance."""
    seen: dict[str, str] = {}
    return _ID.sub(lambda m: seen.setdefault(m.group(0), f"<id{len(seen)}>"), repr(canon(x)))


def run_both(scenario: Any, *args: Any) -> tuple[str, str]:
    """Normalised results of ``scenario(lib, *args)`` on LangGraph and threadloom."""
    return norm(scenario(lib("langgraph"), *args)), norm(scenario(lib("threadloom"), *args))
