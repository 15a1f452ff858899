"""Fixtures for the runtime tests: threadloom's savers, fresh per test."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

_spec = importlib.util.spec_from_file_location(
    "tl_runtime_support", pathlib.Path(__file__).with_name("support.py")
)
support = importlib.util.module_from_spec(_spec)
sys.modules["tl_runtime_support"] = support
_spec.loader.exec_module(support)


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
