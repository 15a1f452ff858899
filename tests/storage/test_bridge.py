"""run_sync: the one bridge from an async saver's sync methods to its loop."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator

import pytest

from threadloom.checkpoint.storage.bridge import run_sync
from threadloom.errors import StorageError


async def _answer() -> int:
    await asyncio.sleep(0)
    return 42


async def test_on_the_saver_loop_it_refuses_instead_of_deadlocking() -> None:
    loop = asyncio.get_running_loop()
    coro = _answer()
    with pytest.raises(StorageError, match="own event loop.*async methods") as info:
        run_sync(coro, loop, "AsyncXSaver")
    assert coro.cr_frame is None  # closed, never left pending
    # LangGraph's async savers raise asyncio.InvalidStateError here: ported handlers match
    assert isinstance(info.value, asyncio.InvalidStateError)


async def test_from_another_thread_it_runs_on_the_saver_loop() -> None:
    loop = asyncio.get_running_loop()
    box: list = []
    thread = threading.Thread(target=lambda: box.append(run_sync(_answer(), loop, "AsyncXSaver")))
    thread.start()
    while thread.is_alive():
        await asyncio.sleep(0.01)
    assert box == [42]


def test_without_a_running_loop() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(StorageError, match="another thread while its event loop runs"):
            run_sync(_answer(), loop, "AsyncXSaver")
        assert run_sync(_answer(), loop, "AsyncXSaver", standalone=True) == 42
        assert run_sync(_answer(), None, "AsyncXSaver", standalone=True) == 42
    finally:
        loop.close()


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """Python's own SIGINT handler, whatever the test process inherited: a run
    started in the background (``cmd &`` without job control) ignores SIGINT,
    Python then leaves it ignored, and no KeyboardInterrupt ever came (both
    Ctrl-C tests failed together there)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def test_ctrl_c_stops_the_work_on_the_loop_before_the_caller_sees_it(ctrl_c: None) -> None:
    """Review finding (session 7): Ctrl-C interrupted only the waiting; the work
    ran on, so a lease acquire could commit after the caller had given its lease
    back. Now the work is cancelled and has ended when KeyboardInterrupt arrives."""

    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    events: list[str] = []
    main = threading.main_thread().ident

    async def work() -> None:
        signal.pthread_kill(main, signal.SIGINT)  # Ctrl-C in the waiting caller
        try:
            await asyncio.sleep(0.5)
            events.append("finished")
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # its cleanup takes a moment
            events.append("cancelled")
            raise

    try:
        with pytest.raises(KeyboardInterrupt):
            run_sync(work(), loop, "AsyncXSaver")
        assert events == ["cancelled"]  # ended before the caller went on
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
        loop.close()


def test_ctrl_c_before_the_work_started_means_it_never_runs(ctrl_c: None) -> None:
    """The loop is busy when Ctrl-C arrives: the work is cancelled before its
    first step, so nothing of it runs after the caller has given up."""
    import time

    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    events: list[str] = []
    main = threading.main_thread().ident

    def busy() -> None:
        signal.pthread_kill(main, signal.SIGINT)
        time.sleep(0.2)  # the caller's handler runs while the loop cannot

    async def work() -> None:
        events.append("ran")

    try:
        # scheduled inside the raises block: on a loaded box the loop thread can
        # send the signal before run_sync is entered, and a KeyboardInterrupt
        # landing outside the block stopped the whole test session
        with pytest.raises(KeyboardInterrupt):
            loop.call_soon_threadsafe(busy)
            run_sync(work(), loop, "AsyncXSaver")
        assert events == []
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
        loop.close()


def test_the_work_s_error_reaches_the_caller() -> None:
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()

    async def fails() -> None:
        raise ValueError("bad checkpoint")

    try:
        with pytest.raises(ValueError, match="bad checkpoint"):
            run_sync(fails(), loop, "AsyncXSaver")
        assert run_sync(_answer(), loop, "AsyncXSaver") == 42
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5)
        loop.close()


def test_a_loop_that_stops_before_running_the_call_gives_an_error_not_a_hang() -> None:
    """Review finding (session 8): the saver's loop stopped after the is_running()
    check but before it ran the hand-over (shutting down): the caller blocked forever."""
    import time

    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    ran: list[str] = []

    async def work() -> None:
        ran.append("ran")

    def stopping() -> None:  # the loop runs this, then stops
        time.sleep(0.3)
        loop.stop()

    loop.call_soon_threadsafe(stopping)
    time.sleep(0.05)  # inside stopping(): is_running() is True
    try:
        with pytest.raises(StorageError, match="stopped before it ran the call"):
            run_sync(work(), loop, "AsyncXSaver")
        assert ran == []
    finally:
        runner.join(5)
        loop.close()


def test_in_thread_waits_for_its_worker_even_when_shutdown_cancels_every_task() -> None:
    """Review finding (session 8): asyncio.run's shutdown cancels every task; the
    worker's future was one, so the cancelled caller went on while fn still ran."""
    import time

    from threadloom.checkpoint.storage.bridge import in_thread

    finished = threading.Event()
    seen: list[bool] = []

    def slow() -> None:
        time.sleep(0.3)
        finished.set()

    async def caller() -> None:
        try:
            await in_thread(slow)
        finally:
            seen.append(finished.is_set())

    async def main() -> None:
        asyncio.get_running_loop().create_task(caller())
        await asyncio.sleep(0.05)  # main returns: asyncio.run cancels the rest

    asyncio.run(main())
    assert seen == [True]
