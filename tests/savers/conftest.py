"""Fixtures: ``saver`` is every backend x (sync API, async API), as an ``Api``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.savers.api import Api
from tests.savers.backends import BACKENDS


def _params() -> list[Any]:
    params = []
    for backend in BACKENDS:
        for mode in ("sync", "async"):
            if mode == "sync" and not backend.sync_api:
                continue
            params.append(pytest.param((backend, mode), id=f"{backend.name}-{mode}"))
    return params


@pytest.fixture(params=_params())
async def saver(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    backend, mode = request.param
    fixtures = {name: request.getfixturevalue(name) for name in backend.needs}
    async with backend.open(str(tmp_path), fixtures) as raw:
        yield Api(raw, mode, backend)
