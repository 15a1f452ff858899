"""The same Pregel programs on LangGraph (the oracle) and threadloom, compared.

Each scenario is written once against ``lib`` (either library's public names) and
returns what a user can observe: results, stream chunks, checkpoint metadata
sequences, channel values, pending writes (task ids included). Ids are numbered
by first appearance, so "this write belongs to the task that interrupted" still
compares; timestamps and random version tails are dropped.
"""

from __future__ import annotations

import asyncio
import operator
import threading
import time

import pytest

from tests.runtime import support

SAVERS = ["memory", "sqlite"]


def history(saver, cfg, ns=""):
    cfg = {**cfg, "configurable": {**cfg["configurable"], "checkpoint_ns": ns}}
    return [
        (
            t.metadata,
            t.checkpoint["channel_values"],
            t.checkpoint["versions_seen"],
            _writes(t.pending_writes),
        )
        for t in saver.list(cfg)
    ]


def _writes(pending):
    """Pending writes, minus the stale ``__resume__`` of a task that later finished.

    When a resumed task completes, its final ``__resume__`` write arrives in the same
    call as its outputs; LangGraph's InMemorySaver overwrites the stored one, its
    SqliteSaver keeps the first (INSERT OR IGNORE). Which one survives is a saver
    choice, so it is left out of the comparison.
    """
    finished = {t for t, c, _ in pending if c not in ("__resume__", "__interrupt__", "__error__")}
    return [w for w in pending if not (w[1] == "__resume__" and w[0] in finished)]


def check(scenario, *args):
    lg, tl = support.run_both(scenario, *args)
    assert tl == lg


# -- scenarios ---------------------------------------------------------------------


def parallel_with_manual_interrupt(L, kind):
    """Seed 002 #1: bar1 raises GraphInterrupt, bar2 succeeds in the same step."""

    def handle(name, stop=False):
        if stop:
            raise L.errors.GraphInterrupt("manual interrupt")
        return [name]

    saver = support.saver(L.name, kind)
    app = L.Pregel(
        nodes={
            "foo": L.NodeBuilder()
            .subscribe_to("foo")
            .do(lambda _: handle("foo"))
            .write_to(nodes=lambda x: x, bar=lambda _: "triggered by foo"),
            "bar1": L.NodeBuilder()
            .subscribe_to("bar")
            .do(lambda _: handle("bar1", True))
            .write_to("nodes"),
            "bar2": L.NodeBuilder()
            .subscribe_to("bar")
            .do(lambda _: handle("bar2"))
            .write_to("nodes"),
        },
        channels={
            "foo": L.ch.LastValue(str),
            "bar": L.ch.LastValue(str),
            "nodes": L.ch.BinaryOperatorAggregate(list, operator.add),
        },
        checkpointer=saver,
        input_channels=["foo"],
        output_channels=["nodes"],
    )
    cfg = {"configurable": {"thread_id": "123"}}
    result = app.invoke({"foo": "triggered by user"}, cfg)
    interrupts = result.pop("__interrupt__")
    if L.name == "langgraph":
        # LangGraph's bug: the string is iterated into one interrupt per character
        assert interrupts == list("manual interrupt")
        interrupts = ["manual interrupt"]
    else:  # threadloom: one interrupt, as the author meant (docs/compatibility.md)
        interrupts = [i.value for i in interrupts]
    return [result, interrupts, history(saver, cfg)]


def two_interrupts_all_modes(L, kind, durability):
    saver = support.saver(L.name, kind)

    def ask(_):
        a = L.types.interrupt("q1")
        b = L.types.interrupt("q2")
        return [f"{a}-{b}"]

    app = L.Pregel(
        nodes={
            "ask": L.NodeBuilder().subscribe_only("inp").do(ask).write_to("out"),
            "other": L.NodeBuilder().subscribe_only("inp").do(lambda _: ["other"]).write_to("out"),
        },
        channels={
            "inp": L.ch.LastValue(str),
            "out": L.ch.BinaryOperatorAggregate(list, operator.add),
        },
        input_channels="inp",
        output_channels="out",
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "t"}}
    modes = ["updates", "values", "tasks", "checkpoints", "debug"]
    out = [app.invoke("x", cfg, durability=durability)]
    out.append(
        list(
            app.stream(L.types.Command(resume="a1"), cfg, stream_mode=modes, durability=durability)
        )
    )
    out.append(
        list(
            app.stream(L.types.Command(resume="a2"), cfg, stream_mode=modes, durability=durability)
        )
    )
    out.append(history(saver, cfg))
    return out


def subgraphs_with_resume_map(L, kind):
    saver = support.saver(L.name, kind)

    def sub(question):
        node = (
            L.NodeBuilder()
            .subscribe_to("start")
            .do(lambda _: [L.types.interrupt(question)])
            .write_to("out")
        )
        return L.Pregel(
            nodes={"sub_node": node},
            channels={"start": L.ch.LastValue(str), "out": L.ch.LastValue(list)},
            input_channels=["start"],
            output_channels=["out"],
        )

    called = sub("sub q")
    as_node = sub("sub2 q")

    def handle(_):
        r = called.invoke({"start": "begin"})
        return [r, L.types.interrupt("main q")]

    app = L.Pregel(
        nodes={
            "main_node": L.NodeBuilder().subscribe_to("start").do(handle).write_to("res"),
            "asnode": L.NodeBuilder().subscribe_to("start").do(as_node).write_to(res2=lambda x: x),
        },
        channels={
            "start": L.ch.LastValue(str),
            "res": L.ch.LastValue(list),
            "res2": L.ch.LastValue(dict),
        },
        input_channels=["start"],
        output_channels=["res", "res2"],
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "1"}}
    first = app.invoke({"start": "begin"}, cfg)
    first["__interrupt__"].sort(key=lambda i: i.value)
    out = [first]
    answers = {i.id: "r-" + i.value for i in first["__interrupt__"]}
    chunks = list(
        app.stream(
            L.types.Command(resume=answers), cfg, stream_mode=["updates", "values"], subgraphs=True
        )
    )
    out.append(sorted(chunks, key=support.norm))
    ints = [
        i
        for ns, mode, p in chunks
        if mode == "updates" and ns == () and "__interrupt__" in p
        for i in p["__interrupt__"]
    ]
    out.append(app.invoke(L.types.Command(resume={i.id: "s-" + i.value for i in ints}), cfg))
    out.append(history(saver, cfg))
    for ns in sorted({ns[0] for ns, _, _ in chunks if ns}):
        out.append(history(saver, cfg, ns))
    return out


def crash_and_resume(L, kind, durability):
    saver = support.saver(L.name, kind)
    fail = {"flaky": True}
    ok_done = threading.Event()

    def make(name):
        def fn(_):
            if fail.get(name):
                # fail only once "ok" finished: LangGraph drops writes of tasks still
                # running when another fails (its loop is gone when they commit)
                ok_done.wait(5)
                time.sleep(0.01)
                raise ValueError(f"{name} failed")
            if name == "ok":
                ok_done.set()
            return [name]

        return fn

    app = L.Pregel(
        nodes={
            "start": L.NodeBuilder()
            .subscribe_only("inp")
            .do(make("start"))
            .write_to("log", fan=lambda _: "go"),
            "ok": L.NodeBuilder().subscribe_only("fan").do(make("ok")).write_to("log"),
            "flaky": L.NodeBuilder().subscribe_only("fan").do(make("flaky")).write_to("log"),
        },
        channels={
            "inp": L.ch.LastValue(str),
            "fan": L.ch.LastValue(str),
            "log": L.ch.BinaryOperatorAggregate(list, operator.add),
        },
        input_channels="inp",
        output_channels="log",
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "c"}}
    try:
        app.invoke("x", cfg, durability=durability)
    except ValueError as exc:
        out = [str(exc)]
    out.append(history(saver, cfg))
    fail["flaky"] = False
    out.append(app.invoke(None, cfg, durability=durability))
    out.append(history(saver, cfg))
    return out


def sends_and_interrupt_before(L, kind):
    """Seed 002 #3: PUSH tasks from Sends written to __pregel_tasks by a tuple writer."""
    saver = support.saver(L.name, kind)
    foo = (
        L.NodeBuilder()
        .subscribe_to("foo")
        .do(lambda _: [L.types.Send(node=n, arg="foo") for n in ["bar1", "bar2", "bar3"]])
        .build()
    )
    foo.writers.append(
        L.ChannelWrite(writes=[L.ChannelWriteTupleEntry(lambda args: [("__pregel_tasks", args)])])
    )
    bars = {n: L.NodeBuilder() for n in ["bar1", "bar2", "bar3"]}
    app = L.Pregel(
        nodes={"foo": foo, **bars},
        channels={"foo": L.ch.LastValue(None)},
        input_channels=["foo"],
        output_channels=[],
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "s"}}
    out = [app.invoke({"foo": None}, cfg, interrupt_before="bar2")]
    out.append(history(saver, cfg))
    # three parallel PUSH tasks: the order they finish in is not deterministic
    out.append(sorted(app.stream(None, cfg, stream_mode=["updates", "tasks"]), key=support.norm))
    out.append(history(saver, cfg))
    return out


def recursion_limit_steps(L, kind):
    saver = support.saver(L.name, kind)
    app = L.Pregel(
        nodes={"loop": L.NodeBuilder().subscribe_only("c").do(lambda x: x + 1).write_to("c")},
        channels={"c": L.ch.LastValue(int)},
        input_channels="c",
        output_channels="c",
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "r"}, "recursion_limit": 4}
    try:
        app.invoke(0, cfg, durability="sync")
    except L.errors.GraphRecursionError as exc:
        out = [type(exc).__name__, str(exc).split(".")[0]]
    out.append([(t.metadata["step"], t.checkpoint["channel_values"]) for t in saver.list(cfg)])
    return out


def interrupt_after_all_and_exit_durability(L, kind):
    saver = support.saver(L.name, kind)
    app = L.Pregel(
        nodes={
            "one": L.NodeBuilder().subscribe_only("a").do(lambda x: x + 1).write_to("b"),
            "two": L.NodeBuilder().subscribe_only("b").do(lambda x: x * 10).write_to("c"),
        },
        channels={k: L.ch.LastValue(int) for k in "abc"},
        input_channels="a",
        output_channels=["b", "c"],
        checkpointer=saver,
        interrupt_after_nodes="*",
    )
    cfg = {"configurable": {"thread_id": "e"}}
    out = [app.invoke(1, cfg, durability="exit"), history(saver, cfg)]
    out.append(list(app.stream(None, cfg, durability="exit", stream_mode=["values", "updates"])))
    out.append(app.invoke(None, cfg, durability="exit"))
    out.append(history(saver, cfg))
    return out


def async_interrupts(L, kind):
    saver = support.saver(L.name, kind)

    async def ask(x):
        await asyncio.sleep(0)
        return [L.types.interrupt(f"q-{x}")]

    app = L.Pregel(
        nodes={
            "ask": L.NodeBuilder().subscribe_only("inp").do(ask).write_to("out"),
            "sync_other": L.NodeBuilder()
            .subscribe_only("inp")
            .do(lambda _: ["other"])
            .write_to("out"),
        },
        channels={
            "inp": L.ch.LastValue(str),
            "out": L.ch.BinaryOperatorAggregate(list, operator.add),
        },
        input_channels="inp",
        output_channels="out",
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "a"}}

    async def go():
        out = [await app.ainvoke("x", cfg)]
        out.append(
            [
                c
                async for c in app.astream(
                    L.types.Command(resume="yes"), cfg, stream_mode="updates"
                )
            ]
        )
        return out

    if kind == "sqlite" and L.name == "langgraph":
        pytest.skip("LangGraph's sync SqliteSaver has no async methods")
    out = asyncio.run(go())
    out.append(history(saver, cfg))
    return out


# -- tests -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", SAVERS)
def test_parallel_step_with_manual_interrupt(kind):
    check(parallel_with_manual_interrupt, kind)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("kind", SAVERS)
def test_two_interrupts_and_every_stream_mode(kind, durability):
    check(two_interrupts_all_modes, kind, durability)


@pytest.mark.parametrize("kind", SAVERS)
def test_subgraphs_namespaces_and_resume_maps(kind):
    check(subgraphs_with_resume_map, kind)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("kind", SAVERS)
def test_crash_then_resume(kind, durability):
    check(crash_and_resume, kind, durability)


@pytest.mark.parametrize("kind", SAVERS)
def test_sends_and_interrupt_before(kind):
    check(sends_and_interrupt_before, kind)


@pytest.mark.parametrize("kind", SAVERS)
def test_recursion_limit(kind):
    check(recursion_limit_steps, kind)


@pytest.mark.parametrize("kind", SAVERS)
def test_interrupt_after_all_with_exit_durability(kind):
    check(interrupt_after_all_and_exit_durability, kind)


def test_async_interrupts():
    check(async_interrupts, "memory")


def nested_subgraph_checkpointer_modes(L, kind, mode):
    """Three levels; the middle graph's checkpointer is None (inherit), True or False;
    the inner graph is called twice in one task (its second namespace gets ``|1``)."""
    saver = support.saver(L.name, kind)
    inner = L.Pregel(
        nodes={"leaf": L.NodeBuilder().subscribe_only("x").do(lambda v: [v]).write_to("acc")},
        channels={
            "x": L.ch.LastValue(int),
            "acc": L.ch.BinaryOperatorAggregate(list, operator.add),
        },
        input_channels="x",
        output_channels="acc",
    )

    def twice(v):
        return inner.invoke(v) + inner.invoke(v + 100)

    middle = L.Pregel(
        nodes={"mid": L.NodeBuilder().subscribe_only("m").do(twice).write_to("acc")},
        channels={
            "m": L.ch.LastValue(int),
            "acc": L.ch.BinaryOperatorAggregate(list, operator.add),
        },
        input_channels="m",
        output_channels="acc",
        checkpointer={"inherit": None, "own": True, "off": False}[mode],
    )
    app = L.Pregel(
        nodes={"top": L.NodeBuilder().subscribe_only("a").do(middle).write_to("b")},
        channels={"a": L.ch.LastValue(int), "b": L.ch.LastValue(list)},
        input_channels="a",
        output_channels="b",
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "n"}}
    out = [app.invoke(1, cfg), app.invoke(2, cfg)]
    chunks = list(app.stream(3, cfg, stream_mode="updates", subgraphs=True))
    out.append(chunks)
    for ns in sorted({ns[-1] if len(ns) == 1 else "|".join(ns) for ns, _ in chunks if ns}):
        out.append((ns, history(saver, cfg, ns)))
    if mode == "own":
        out.append(history(saver, cfg, "top"))
    return out


@pytest.mark.parametrize("mode", ["inherit", "own", "off"])
@pytest.mark.parametrize("kind", SAVERS)
def test_nested_subgraphs_and_checkpointer_modes(kind, mode):
    check(nested_subgraph_checkpointer_modes, kind, mode)


def replay_and_fork(L, kind):
    """Time travel: re-run from an earlier checkpoint (a fork), and resume addressed at
    the latest checkpoint id."""
    saver = support.saver(L.name, kind)
    calls: list[str] = []

    def step(name):
        def fn(x):
            calls.append(name)
            return x + 1

        return fn

    app = L.Pregel(
        nodes={
            "one": L.NodeBuilder().subscribe_only("a").do(step("one")).write_to("b"),
            "two": L.NodeBuilder().subscribe_only("b").do(step("two")).write_to("c"),
            "ask": L.NodeBuilder()
            .subscribe_only("c")
            .do(lambda x: x + L.types.interrupt("n?"))
            .write_to("d"),
        },
        channels={k: L.ch.LastValue(int) for k in "abcd"},
        input_channels="a",
        output_channels=["b", "c", "d"],
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "tt"}}
    out = [app.invoke(1, cfg)]
    hist = list(saver.list(cfg))
    step0 = next(t for t in hist if t.metadata["step"] == 0).config
    out.append(app.invoke(None, step0))  # replay from after "one": "two" runs again
    latest = saver.get_tuple(cfg).config
    out.append(app.invoke(L.types.Command(resume=10), latest))
    out.append(calls)
    out.append(history(saver, cfg))
    return out


def interrupt_in_send_task(L, kind):
    saver = support.saver(L.name, kind)
    fan = L.NodeBuilder().subscribe_only("items").do(lambda items: items).build()
    fan.writers.append(
        L.ChannelWrite(
            [
                L.ChannelWriteTupleEntry(
                    lambda items: [("__pregel_tasks", L.types.Send("work", i)) for i in items]
                )
            ]
        )
    )
    work = (
        L.NodeBuilder()
        .do(lambda i: [f"{i}:{L.types.interrupt(f'q{i}')}" if i == 2 else f"{i}"])
        .write_to("out")
    )
    app = L.Pregel(
        nodes={"fan": fan, "work": work},
        channels={
            "items": L.ch.LastValue(list),
            "out": L.ch.BinaryOperatorAggregate(list, operator.add),
        },
        input_channels="items",
        output_channels="out",
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "send"}}
    out = [app.invoke([1, 2, 3], cfg)]
    out.append(app.invoke(L.types.Command(resume="yes"), cfg))
    out.append(history(saver, cfg))
    return out


def new_input_discards_unfinished_step(L, kind):
    saver = support.saver(L.name, kind)
    app = L.Pregel(
        nodes={
            "ask": L.NodeBuilder()
            .subscribe_only("a")
            .do(lambda x: [L.types.interrupt(f"about {x}")])
            .write_to("log"),
        },
        channels={
            "a": L.ch.LastValue(str),
            "log": L.ch.BinaryOperatorAggregate(list, operator.add),
        },
        input_channels="a",
        output_channels="log",
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "new"}}
    out = [app.invoke("first", cfg), app.invoke("second", cfg)]
    out.append(app.invoke(L.types.Command(resume="ok"), cfg))
    out.append(history(saver, cfg))
    return out


@pytest.mark.parametrize("kind", SAVERS)
def test_replay_and_fork(kind):
    check(replay_and_fork, kind)


@pytest.mark.parametrize("kind", SAVERS)
def test_interrupt_in_send_task(kind):
    check(interrupt_in_send_task, kind)


@pytest.mark.parametrize("kind", SAVERS)
def test_new_input_discards_unfinished_step(kind):
    check(new_input_discards_unfinished_step, kind)


def resume_superseded_checkpoint(L, kind):
    """A resume addressed at a checkpoint the thread has moved past re-runs its tasks."""
    saver = support.saver(L.name, kind)
    calls: list[str] = []

    def ask(x):
        calls.append("ask")
        return x + L.types.interrupt("n?")

    app = L.Pregel(
        nodes={
            "one": L.NodeBuilder().subscribe_only("a").do(lambda x: x + 1).write_to("b"),
            "ask": L.NodeBuilder().subscribe_only("b").do(ask).write_to("c"),
        },
        channels={k: L.ch.LastValue(int) for k in "abc"},
        input_channels="a",
        output_channels=["b", "c"],
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "sup"}}
    out = [app.invoke(1, cfg)]
    paused_at = saver.get_tuple(cfg).config
    out.append(app.invoke(L.types.Command(resume=10), cfg))
    out.append(app.invoke(L.types.Command(resume=20), paused_at))
    out.append(calls)
    out.append(history(saver, cfg))
    return out


@pytest.mark.parametrize("kind", SAVERS)
def test_resume_superseded_checkpoint(kind):
    check(resume_superseded_checkpoint, kind)


def replay_with_persistent_subgraph(L, kind):
    """Replaying the root from an old checkpoint: a ``checkpointer=True`` subgraph starts
    from the state it had before that point, not from its latest."""
    saver = support.saver(L.name, kind)
    counter = L.Pregel(
        nodes={"inc": L.NodeBuilder().subscribe_only("x").do(lambda v: [v]).write_to("seen")},
        channels={
            "x": L.ch.LastValue(int),
            "seen": L.ch.BinaryOperatorAggregate(list, operator.add),
        },
        input_channels="x",
        output_channels="seen",
        checkpointer=True,
    )
    app = L.Pregel(
        nodes={
            "first": L.NodeBuilder().subscribe_only("a").do(lambda v: v + 1).write_to("b"),
            "sub": L.NodeBuilder().subscribe_only("b").do(counter).write_to("c"),
        },
        channels={"a": L.ch.LastValue(int), "b": L.ch.LastValue(int), "c": L.ch.LastValue(list)},
        input_channels="a",
        output_channels="c",
        checkpointer=saver,
    )
    cfg = {"configurable": {"thread_id": "rp"}}
    out = [app.invoke(1, cfg), app.invoke(10, cfg), app.invoke(20, cfg)]
    root = {"configurable": {"thread_id": "rp", "checkpoint_ns": ""}}
    # the second run's checkpoint after "first": replaying it re-runs "sub"
    second_run_first = next(t.config for t in saver.list(root) if t.metadata["step"] == 3)
    out.append(app.invoke(None, second_run_first))
    out.append(history(saver, cfg))
    out.append(history(saver, cfg, "sub"))
    return out


@pytest.mark.parametrize("kind", SAVERS)
def test_replay_with_persistent_subgraph(kind):
    check(replay_with_persistent_subgraph, kind)
