"""The per-step fast paths give exactly what the general code gives.

``task_path_str`` formats PULL paths without recursing; ``apply_writes`` visits
only the channels ``end_of_step_channels`` keeps when a run passes them in.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from threadloom.channels.base import MISSING
from threadloom.channels.binop import BinaryOperatorAggregate
from threadloom.channels.ephemeral_value import EphemeralValue
from threadloom.channels.last_value import LastValue, LastValueAfterFinish
from threadloom.channels.topic import Topic
from threadloom.constants import PULL, PUSH
from threadloom.pregel.ids import task_path_str
from threadloom.pregel.writes import apply_writes, end_of_step_channels


def _general(tup: object) -> str:
    """task_path_str's general rule, written out independently."""
    if isinstance(tup, (tuple, list)):
        return "~" + ", ".join(_general(x) for x in tup)
    if isinstance(tup, int):
        return f"{tup:010d}"
    return str(tup)


@pytest.mark.parametrize(
    "path",
    [
        (PULL, "node_0"),
        (sys.intern("__pregel_pull"), "a:b|c"),
        ("".join(["__pregel", "_pull"]), "x"),  # not the interned constant
        (PULL, ""),
        (PUSH, 3, False),
        (PUSH, (PULL, "a"), 2, True),
        [PULL, "listed"],
        (PULL, 7),
        (PULL, "n", "extra"),
    ],
)
def test_task_path_str_matches_the_general_rule(path: object) -> None:
    assert task_path_str(path) == _general(path)


def _channels() -> dict:
    chans = {
        "count": LastValue(int),
        "total": BinaryOperatorAggregate(int, lambda a, b: a + b),
        "__start__": EphemeralValue(object),
        "branch:to:a": EphemeralValue(object),
        "branch:to:b": EphemeralValue(object),
        "late": LastValueAfterFinish(int),
        "__pregel_tasks": Topic(object, accumulate=False),
    }
    for k, c in chans.items():
        c.key = k
    return chans


def _task(name: str, writes: list, triggers: tuple, path: tuple) -> SimpleNamespace:
    return SimpleNamespace(name=name, writes=writes, triggers=triggers, path=path)


STEPS = [
    [_task("__start__", [("count", 1), ("branch:to:a", None)], ("__start__",), (PULL, "s"))],
    [
        _task(
            "a",
            [("total", 2), ("branch:to:b", None), ("late", 5), ("__pregel_tasks", "send")],
            ("branch:to:a",),
            (PULL, "a"),
        )
    ],
    [_task("b", [("total", 3)], ("branch:to:b",), (PULL, "b"))],  # the last: finish() runs
]


def _run(keep: bool) -> list:
    chans = _channels()
    chans["__start__"].update([{"count": 0}])
    checkpoint = {"channel_versions": {"__start__": "1"}, "versions_seen": {}}
    t2n = {"__start__": ["__start__"], "branch:to:a": ["a"], "branch:to:b": ["b"]}
    end = end_of_step_channels(chans) if keep else None
    out = []
    for tasks in STEPS:
        updated = apply_writes(checkpoint, chans, tasks, lambda cur, _c: f"{cur}+", t2n, end)
        values = {k: c.checkpoint() for k, c in chans.items()}
        out.append((sorted(updated), dict(checkpoint["channel_versions"]), values))
    return out


def test_apply_writes_with_kept_end_channels_matches_without() -> None:
    kept, fresh = _run(True), _run(False)
    assert kept == fresh
    # the run really cleared ephemeral channels and finished the after-finish one
    assert kept[-1][2]["late"] == (5, True)
    assert "branch:to:b" in kept[-1][1]
    assert kept[1][2]["__pregel_tasks"] == ["send"]  # a Topic, cleared by the next step
    assert kept[2][2]["__pregel_tasks"] == []
    assert kept[2][1]["__pregel_tasks"] != kept[1][1]["__pregel_tasks"]


def test_end_of_step_channels_skips_noop_kinds() -> None:
    end = end_of_step_channels(_channels())
    assert [(k, plain) for k, _, plain in end.clearable] == [
        ("__start__", True),
        ("branch:to:a", True),
        ("branch:to:b", True),
        ("__pregel_tasks", False),  # a Topic: asked through is_available()
    ]
    assert [k for k, _ in end.finishable] == ["late"]


def test_pool_spawn_runs_the_job_and_survives_its_error(caplog) -> None:
    """The persister's drain goes to the pool without a Future: an error that
    escapes a job is logged, and the pool keeps running jobs."""
    import threading
    import time

    from threadloom.pregel.pool import POOL

    def boom() -> None:
        raise RuntimeError("drain failed")

    def logged() -> bool:
        return any(r.exc_info and "drain failed" in str(r.exc_info[1]) for r in caplog.records)

    ran = threading.Event()
    with caplog.at_level("ERROR", logger="threadloom.pregel"):
        POOL.spawn(boom)
        POOL.spawn(ran.set)
        assert ran.wait(5)
        deadline = time.monotonic() + 5
        while not logged() and time.monotonic() < deadline:
            time.sleep(0.01)
    assert logged()


class _Doubled(LastValue):
    """A LastValue subclass storing something else: must not be read as its value."""

    __slots__ = ()

    def checkpoint(self) -> object:
        return MISSING if self.value is MISSING else self.value * 2


def test_checkpoint_values_match_create_checkpoint() -> None:
    from threadloom.checkpoint.base import create_checkpoint
    from threadloom.pregel.checkpoint import checkpoint_values, stored_channels

    chans = _channels()
    chans["doubled"] = _Doubled(int)
    chans["unversioned"] = LastValue(int)
    chans["count"].update([3])
    chans["doubled"].update([4])
    chans["unversioned"].update([9])
    chans["branch:to:a"].update([None])
    chans["late"].update([7])
    chans["total"].update([5])
    chans["__pregel_tasks"].update(["s1", "s2"])
    versions = {k: "1" for k in chans if k not in ("unversioned", "branch:to:b")}
    versions["branch:to:b"] = "1"  # versioned but empty: skipped
    checkpoint = {"id": "x", "channel_versions": versions, "versions_seen": {}}
    general = create_checkpoint(checkpoint, chans, 1)["channel_values"]
    stored = stored_channels(chans)
    fast = checkpoint_values(stored, versions)
    assert fast == general
    assert list(fast) == list(general)  # same order
    assert fast["doubled"] == 8 and "unversioned" not in fast and "branch:to:b" not in fast
    plain = {k for k, _, p in stored if p}
    assert plain == {"count", "__start__", "branch:to:a", "branch:to:b", "unversioned"}
    given = create_checkpoint(checkpoint, None, 1, values=fast)
    assert given["channel_values"] is fast
    assert MISSING not in fast.values()
