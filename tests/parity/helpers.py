"""Run one scenario on LangGraph (the oracle) and on threadloom, compare what users see.

A *scenario* is a function ``scenario(lib, saver, durability) -> list[(label, value)]``
written once against the public API; ``lib`` holds the public names of one library
(``lib.StateGraph``, ``lib.Command``, ...). Observations are normalised before the
comparison: checkpoint, task and interrupt ids become ``<id0>``, ``<id1>``... in the
order they first appear (so "this parent_config points at that snapshot" still
compares), timestamps become ``<ts>``, and snapshots, tasks, interrupts and errors
become plain dicts.

Test files import it as ``from tests.parity import helpers as h``.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import os
import pprint
import re
from collections.abc import AsyncIterator, Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

LIBS = ("langgraph", "threadloom")
SAVERS = ("memory", "sqlite")
DURABILITIES = ("sync", "async", "exit")

_ID_RE = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f.])"
)


# -- the two libraries' public names ------------------------------------------------


def _lib(name: str) -> SimpleNamespace:
    """Public names of one library, imported the way a user would."""
    if name == "langgraph":
        graph = importlib.import_module("langgraph.graph")
        types = importlib.import_module("langgraph.types")
        errors = importlib.import_module("langgraph.errors")
        memory = importlib.import_module("langgraph.checkpoint.memory")
        sqlite = importlib.import_module("langgraph.checkpoint.sqlite")
        sqlite_aio = importlib.import_module("langgraph.checkpoint.sqlite.aio")
    else:
        try:
            graph = importlib.import_module("threadloom.graph")
            types = importlib.import_module("threadloom.types")
            errors = importlib.import_module("threadloom.errors")
            memory = importlib.import_module("threadloom.checkpoint.memory")
        except ImportError as exc:  # parts still being built by colleagues
            if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
                pytest.fail(f"threadloom does not import: {exc}")
            pytest.skip(f"threadloom not ready for parity: {exc}")
        sqlite = _optional("threadloom.checkpoint.sqlite")
        sqlite_aio = _optional("threadloom.checkpoint.sqlite.aio")
    if name == "langgraph":
        remove_message = importlib.import_module("langchain_core.messages").RemoveMessage
    else:
        remove_message = graph.RemoveMessage
    pregel = importlib.import_module(f"{name}.pregel")
    channels = importlib.import_module(f"{name}.channels")
    return SimpleNamespace(
        name=name,
        Pregel=pregel.Pregel,
        NodeBuilder=pregel.NodeBuilder,
        LastValue=channels.LastValue,
        BinaryOperatorAggregate=channels.BinaryOperatorAggregate,
        StateGraph=graph.StateGraph,
        MessagesState=graph.MessagesState,
        RemoveMessage=remove_message,
        START=graph.START,
        END=graph.END,
        Command=types.Command,
        Send=types.Send,
        Interrupt=types.Interrupt,
        StateUpdate=types.StateUpdate,
        interrupt=types.interrupt,
        InvalidUpdateError=errors.InvalidUpdateError,
        GraphRecursionError=errors.GraphRecursionError,
        InMemorySaver=memory.InMemorySaver,
        SqliteSaver=getattr(sqlite, "SqliteSaver", None),
        AsyncSqliteSaver=getattr(sqlite_aio, "AsyncSqliteSaver", None),
    )


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


@contextlib.contextmanager
def open_saver(lib: SimpleNamespace, kind: str) -> Iterator[Any]:
    """A fresh saver of ``kind`` for ``lib``; skips when threadloom lacks it yet."""
    if kind == "memory":
        yield lib.InMemorySaver()
        return
    if lib.SqliteSaver is None:
        pytest.skip(f"{lib.name}.checkpoint.sqlite.SqliteSaver not available yet")
    with lib.SqliteSaver.from_conn_string(":memory:") as saver:
        yield saver


@contextlib.asynccontextmanager
async def aopen_saver(lib: SimpleNamespace, kind: str) -> AsyncIterator[Any]:
    """Async twin of :func:`open_saver` (AsyncSqliteSaver for ``sqlite``)."""
    if kind == "memory":
        yield lib.InMemorySaver()
        return
    if lib.AsyncSqliteSaver is None:
        pytest.skip(f"{lib.name}.checkpoint.sqlite.aio.AsyncSqliteSaver not available yet")
    async with lib.AsyncSqliteSaver.from_conn_string(":memory:") as saver:
        yield saver


# -- normalising observations -------------------------------------------------------


class Normalizer:
    """Turns library objects into plain, id-free data that compares across libraries."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}

    def _token(self, match: re.Match[str]) -> str:
        raw = match.group(0)
        if raw not in self.ids:
            self.ids[raw] = f"<id{len(self.ids)}>"
        return self.ids[raw]

    def __call__(self, obj: Any) -> Any:
        kind = type(obj).__name__
        if kind == "StateSnapshot":
            out = {f: self(getattr(obj, f)) for f in obj._fields}
            out["created_at"] = "<ts>" if obj.created_at else None
            return {"snapshot": out}
        if kind == "PregelTask":
            return {"task": {f: self(getattr(obj, f)) for f in obj._fields}}
        if kind == "Interrupt":
            return {"interrupt": self(obj.value), "id": self(obj.id)}
        if kind == "Send":
            return {"send": obj.node, "arg": self(obj.arg)}
        if isinstance(obj, BaseException):  # LangGraph stores task errors as repr()
            return repr(obj)
        if isinstance(obj, str):
            return _ID_RE.sub(self._token, obj)
        if isinstance(obj, dict):
            return {self(k): self(obj[k]) for k in sorted(obj, key=_key_order)}
        if isinstance(obj, (list, tuple)):
            return (
                type(obj)(self(v) for v in obj)
                if type(obj) in (list, tuple)
                else [self(v) for v in obj]
            )
        return obj


def _key_order(key: Any) -> tuple[int, str]:
    text = str(key)
    return (1 if _ID_RE.search(text) else 0, text)


# -- running a scenario on both libraries ---------------------------------------------

Observations = list[tuple[str, Any]]
Scenario = Callable[..., Observations]


def raises(fn: Callable[[], Any], lib: SimpleNamespace) -> Any:
    """Call ``fn``; on an error, the observation is its category, not its wording.

    Messages differ on purpose (threadloom names thread/node/checkpoint), so only
    "InvalidUpdateError" / "ValueError" / the type name is compared.
    """
    try:
        return fn()
    except lib.InvalidUpdateError:
        return ("raises", "InvalidUpdateError")
    except ValueError:
        return ("raises", "ValueError")
    except Exception as exc:
        return ("raises", type(exc).__name__)


async def araises(coro: Any, lib: SimpleNamespace) -> Any:
    """Async twin of :func:`raises`."""
    try:
        return await coro
    except lib.InvalidUpdateError:
        return ("raises", "InvalidUpdateError")
    except ValueError:
        return ("raises", "ValueError")
    except Exception as exc:
        return ("raises", type(exc).__name__)


def compare(oracle: Observations, ours: Observations) -> None:
    """Assert both runs observed the same, reporting the first differing step."""
    norm_o, norm_t = Normalizer(), Normalizer()
    labels_o = [label for label, _ in oracle]
    labels_t = [label for label, _ in ours]
    assert labels_t == labels_o, "scenarios took different paths"
    for (label, value_o), (_, value_t) in zip(oracle, ours):
        expected, actual = norm_o(value_o), norm_t(value_t)
        if actual != expected:
            diff = "\n".join(
                difflib.unified_diff(
                    pprint.pformat(expected, width=110).splitlines(),
                    pprint.pformat(actual, width=110).splitlines(),
                    "langgraph",
                    "threadloom",
                    lineterm="",
                )
            )
            pytest.fail(f"threadloom differs from LangGraph at step {label!r}:\n{diff}")


SELF_CHECK = os.environ.get("THREADLOOM_PARITY_SELF") == "1"
"""Debug switch: run the "threadloom" side on LangGraph too, to check the harness."""


def _libs() -> tuple[str, str]:
    return ("langgraph", "langgraph") if SELF_CHECK else LIBS


def run_parity(scenario: Scenario, saver: str = "memory", durability: str | None = None) -> None:
    """Run ``scenario`` on LangGraph then threadloom (same saver kind) and compare."""
    runs = {}
    for side, name in zip(LIBS, _libs()):
        lib = _lib(name)
        with open_saver(lib, saver) as checkpointer:
            runs[side] = scenario(lib, checkpointer, durability)
    assert runs["langgraph"], "scenario observed nothing"
    compare(runs["langgraph"], runs["threadloom"])


async def arun_parity(
    scenario: Callable[..., Any], saver: str = "memory", durability: str | None = None
) -> None:
    """Async twin of :func:`run_parity` for ``async def`` scenarios."""
    runs = {}
    for side, name in zip(LIBS, _libs()):
        lib = _lib(name)
        async with aopen_saver(lib, saver) as checkpointer:
            runs[side] = await scenario(lib, checkpointer, durability)
    assert runs["langgraph"], "scenario observed nothing"
    compare(runs["langgraph"], runs["threadloom"])


def oracle_only(scenario: Scenario, saver: str = "memory", durability: str | None = None) -> Any:
    """Run ``scenario`` on LangGraph alone (to pin the oracle's behaviour in a test)."""
    lib = _lib("langgraph")
    with open_saver(lib, saver) as checkpointer:
        return Normalizer()(scenario(lib, checkpointer, durability))


def kw(durability: str | None) -> dict[str, Any]:
    """invoke()/stream() keyword arguments for a durability mode (none = default)."""
    return {"durability": durability} if durability else {}
