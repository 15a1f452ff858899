"""Shared fixtures: server URLs for the Postgres and Redis backends.

Locally, tests that need a server skip unless THREADLOOM_TEST_PG /
THREADLOOM_TEST_REDIS is set. In CI (CI=true) a missing server is a failure,
so a broken service cannot turn the backend tests silently green.
"""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _server_url(var: str, what: str) -> str:
    url = os.environ.get(var)
    if not url:
        if IN_CI:
            pytest.fail(f"{var} is not set: CI must run the {what} tests against a real server")
        pytest.skip(f"{var} not set: no {what} server configured (e.g. {var}=...)")
    return url


@pytest.fixture(scope="session")
def pg_url() -> str:
    """URL of a PostgreSQL database the tests may create tables in."""
    return _server_url("THREADLOOM_TEST_PG", "PostgreSQL")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of a Redis database the tests may write to."""
    return _server_url("THREADLOOM_TEST_REDIS", "Redis")
