"""A thread whose reference counts were evicted (``maxmemory-policy volatile-*``
evicts single keys) loses no data to ``prune``: a blob whose count is missing is
kept (leaked), never deleted under the checkpoint that still needs it.

Before, a missing count read as 0 (and a hold re-created it at 1), so prune
deleted the blobs of the latest checkpoint: ``CorruptBlobError`` on every read."""

from __future__ import annotations

import operator
import random
import string
from typing import Annotated, TypedDict

from threadloom.checkpoint.redis import RedisSaver
from threadloom.graph import START, StateGraph


class S(TypedDict):
    msgs: Annotated[list, operator.add]
    big: str


def _noise(seed: int) -> str:
    """Text zstd cannot shrink below the inline size: stored as a blob."""
    return "".join(random.Random(seed).choices(string.ascii_letters, k=2000))


def _graph(saver):
    g = StateGraph(S)
    g.add_node("a", lambda s: {"msgs": ["x" * 300], "big": "B" * 5000})
    g.add_edge(START, "a")
    return g.compile(checkpointer=saver)


def test_prune_keeps_blobs_whose_counts_were_evicted(redis_url, redis_client, key_prefix):
    cfg = {"configurable": {"thread_id": "t1"}}
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        app = _graph(saver)
        for i in range(3):
            app.invoke({"msgs": [f"u{i}"]}, cfg)
        assert redis_client.delete(f"{{{key_prefix}:t1}}:rc") == 1  # evicted
        for i in range(2):
            app.invoke({"msgs": [f"v{i}"]}, cfg)
        before = app.get_state(cfg).values
        dry = saver.prune(["t1"], strategy="keep_latest", dry_run=True)
        assert dry.blobs == saver.prune(["t1"], strategy="keep_latest").blobs == 0
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        assert _graph(saver).get_state(cfg).values == before
        assert len(before["msgs"]) == 10 and before["big"] == "B" * 5000


def test_counts_still_free_blobs_when_nothing_was_lost(redis_url, key_prefix):
    cfg = {"configurable": {"thread_id": "t2"}}
    g = StateGraph(S)
    g.add_node("a", lambda s: {"big": _noise(len(s["msgs"]))})  # a new blob each turn
    g.add_edge(START, "a")
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        app = g.compile(checkpointer=saver)
        for i in range(3):
            app.invoke({"msgs": [f"u{i}"]}, cfg)
        report = saver.prune(["t2"], strategy="keep_latest")
        assert report.blobs == 2  # the two older values are released, as before
        assert app.get_state(cfg).values["big"] == _noise(3)


def test_a_dry_run_counts_missing_counts_as_kept(redis_url, redis_client, key_prefix):
    """``prune(dry_run=True)`` reports what the real prune frees: nothing of a
    thread whose counts were all evicted (it read a missing count as 0)."""
    cfg = {"configurable": {"thread_id": "t3"}}
    g = StateGraph(S)
    g.add_node("a", lambda s: {"big": _noise(len(s["msgs"]))})
    g.add_edge(START, "a")
    with RedisSaver.from_conn_string(redis_url, key_prefix=key_prefix) as saver:
        app = g.compile(checkpointer=saver)
        for i in range(3):
            app.invoke({"msgs": [f"u{i}"]}, cfg)
        assert redis_client.delete(f"{{{key_prefix}:t3}}:rc") == 1
        dry = saver.prune(["t3"], strategy="keep_latest", dry_run=True)
        real = saver.prune(["t3"], strategy="keep_latest")
        assert dry.blobs == real.blobs == 0
        assert app.get_state(cfg).values["big"] == _noise(3)
