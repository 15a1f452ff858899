"""Fixtures for the runtime tests: threadloom's savers, fresh per test."""

from __future__ import annotations

import pytest

from tests.runtime import support


@pytest.fixture(params=["memory", "sqlite"])
def saver(request):
    """A fresh threadloom saver: InMemorySaver and SqliteSaver(":memory:")."""
    s = support.saver("threadloom", request.param)
    yield s
    close = getattr(s, "close", None)
    if close:
        close()


@pytest.fixture
def tl():
    return support.lib("threadloom")
