"""prune / delete_for_runs given one bare id instead of a list: a typed error, nothing deleted.

Review finding (session 8): ``prune("chat-1", strategy="delete")`` pruned the
threads "c", "h", "a", "t", "-", "1" (deleting an unrelated thread "a") and left
"chat-1" alone, with no error.
"""

from __future__ import annotations

import pytest

from tests.savers.test_retention import cfg, grow
from threadloom.errors import ConfigError


async def test_prune_refuses_a_bare_string(saver) -> None:
    await grow(saver, 2, "chat-1")
    await grow(saver, 2, "a")
    with pytest.raises(ConfigError, match=r"thread_ids must be a list.*\['chat-1'\]"):
        await saver.prune("chat-1", strategy="delete")
    assert await saver.get_tuple(cfg("a")) is not None
    assert await saver.get_tuple(cfg("chat-1")) is not None


async def test_delete_for_runs_refuses_a_bare_string(saver) -> None:
    await grow(saver, 2, "r", run="r")
    with pytest.raises(ConfigError, match="run_ids must be a list"):
        await saver.delete_for_runs("r")
    assert await saver.get_tuple(cfg("r")) is not None
    await saver.delete_for_runs(["r"])
    assert await saver.get_tuple(cfg("r")) is None
