"""LangGraph's published checkpointer conformance suite against each backend.

Runs ``langgraph.checkpoint.conformance.validate`` on the async API of every
threadloom saver; every capability (base + delete_for_runs + copy_thread +
prune) must be detected and pass. Version 0.0.2 of the suite ships 81 tests.
"""

from __future__ import annotations

import pytest

conformance = pytest.importorskip("langgraph.checkpoint.conformance")

from tests.savers.backends import BACKENDS  # noqa: E402

EXPECTED = {
    "put": 17,
    "put_writes": 10,
    "get_tuple": 10,
    "list": 16,
    "delete_thread": 5,
    "delete_for_runs": 7,
    "copy_thread": 8,
    "prune": 8,
}


@pytest.mark.parametrize("backend", BACKENDS, ids=[b.name for b in BACKENDS])
async def test_langgraph_conformance(backend, tmp_path, request) -> None:
    fixtures = {name: request.getfixturevalue(name) for name in backend.needs}

    @conformance.checkpointer_test(name=f"threadloom-{backend.name}")
    async def factory():
        async with backend.open(str(tmp_path), fixtures) as saver:
            yield saver

    report = await conformance.validate(factory)
    failures = {
        cap: result.failures for cap, result in report.results.items() if result.passed is not True
    }
    assert not failures, failures
    passed = {cap: result.tests_passed for cap, result in report.results.items()}
    assert passed == EXPECTED
    assert report.passed_all_base()
