"""Runtime scenarios from tests/parity, run on threadloom with a backend saver.

Each ``sc_*`` scenario of the parity suites (written once against the public
API) runs on threadloom twice: with ``InMemorySaver`` (the reference executor of
the shared storage core) and with the backend under test, and the normalised
observations must be identical. Shared by tests/postgres and tests/redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.parity import helpers
from threadloom.errors import StorageError

MODULES = (
    "test_time_travel",
    "test_time_travel_update",
    "test_time_travel_async",
    "test_subgraph_persistence",
    "test_stategraph_core",
)


def _load(name: str) -> Any:
    return importlib.import_module(f"tests.parity.{name}")


def scenarios() -> list[tuple[str, Callable[..., Any]]]:
    """``(id, scenario)`` for every scenario function of the parity modules."""
    found = []
    for module_name in MODULES:
        try:
            module = _load(module_name)
        except Exception:  # a parity module that cannot load is reported by its own run
            continue
        for name, fn in sorted(vars(module).items()):
            if name.startswith("sc_") and callable(fn):
                found.append((f"{module_name.removeprefix('test_')}::{name}", fn))
    return found


def check(
    scenario: Callable[..., Any],
    open_sync: Callable[[], Any],
    open_async: Callable[[], Any],
) -> None:
    """Run ``scenario`` on InMemorySaver and on the backend; fail on any difference."""
    h = helpers
    lib = h._lib("threadloom")
    try:
        expected = _run(scenario, lib, lambda: _memory(lib), asyncio_ok=True)
    except Exception as exc:  # a runtime gap: the parity suite itself tracks it
        pytest.skip(f"fails on InMemorySaver too: {type(exc).__name__}: {exc}")
    assert expected, "scenario observed nothing"
    try:
        actual = _run(scenario, lib, open_async if _is_async(scenario) else open_sync)
    except StorageError as exc:
        if "a* methods" not in str(exc):
            raise
        # the async scenario also calls sync saver methods from its loop (fine on
        # InMemorySaver, refused by async savers): run it on the sync saver instead
        actual = _run(scenario, lib, open_sync)
    h.compare(expected, actual)


def _is_async(scenario: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(scenario)


@contextlib.contextmanager
def _memory(lib: Any) -> Iterator[Any]:
    yield lib.InMemorySaver()


def _run(scenario: Callable[..., Any], lib: Any, opener: Callable[[], Any], **_: Any) -> Any:
    """Run a sync or async scenario with the saver ``opener()`` gives (sync or async cm)."""
    if not _is_async(scenario):
        with opener() as saver:
            return scenario(lib, saver, None)

    async def go() -> Any:
        cm = opener()
        if hasattr(cm, "__aenter__"):
            async with cm as saver:
                return await scenario(lib, saver, None)
        with cm as saver:
            return await scenario(lib, saver, None)

    return asyncio.run(go())
