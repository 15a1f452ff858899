"""[5] Getting checkpoints and writes to the saver, in order, per durability mode.

- ``sync``: every save runs inline, before the loop moves on.
- ``async``: saves go to a FIFO drained by one pool thread (or one asyncio
  task), so they reach the saver in order while the next step runs; at exit
  ``flush()`` saves what that thread has not taken yet itself, still one batch
  at a time and in order (a Ctrl-C there saves the rest before it goes on). The queue
  is bounded: producers wait when ``max_pending`` saves are outstanding, so a
  slow saver cannot grow memory without limit.
- ``exit``: the loop submits nothing until it exits.

Writes are buffered, not sent one call each: ``put`` sends the buffered writes
with the checkpoint as one ``saver.put_step`` (one transaction on threadloom's
savers, so a ``sync`` step costs one commit instead of two), and
``save_writes()`` sends them alone. The driver calls ``save_writes()`` whenever
the buffer must not wait for a checkpoint: before a step's tasks start, while
some are still running (before it blocks or yields a chunk), and ``flush()``
does at exit, so nothing buffered outlives a wait, an error, an interrupt or
the run. Savers without ``put_step`` (LangGraph's) get ``put_writes``/``put``.

The first error a background save raises is re-raised by ``flush()``.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections import deque
from collections.abc import Generator
from typing import Any

from threadloom.errors import SerializationError

__all__ = ["AsyncPersister", "SyncPersister", "accepts_task_path", "uses_put_step"]

MAX_PENDING = 16


_TASK_PATH: dict[Any, bool] = {}  # plain function of a saver method -> its answer


def accepts_task_path(saver: Any, method: str = "put_writes") -> bool:
    """Whether the saver's ``put_writes`` takes a 4th ``task_path`` argument.

    Asked once per run; ``inspect.signature`` costs as much as several saves, so the
    answer is kept per underlying function (a bound method's ``__func__``).
    """
    bound = getattr(saver, method)
    func = getattr(bound, "__func__", None)
    if func is not None and func in _TASK_PATH:
        return _TASK_PATH[func]
    try:
        params = inspect.signature(bound).parameters
    except (TypeError, ValueError):
        return False
    answer = "task_path" in params or len(params) >= 4
    if func is not None:
        _TASK_PATH[func] = answer
    return answer


_PUT_STEP: dict[tuple[type, bool], bool] = {}  # saver class, async -> answer


def uses_put_step(saver: Any, is_async: bool = False) -> bool:
    """Whether the persister may call the saver's ``put_step`` instead of
    ``put_writes``/``put``.

    Only when the class that defines ``put_step`` is not below a class overriding
    ``put``/``put_writes`` in the MRO: a subclass (or a ``__getattr__`` wrapper)
    that customises ``put`` would otherwise be bypassed (a class overriding all
    three, like the per-thread TTL mixin, is fine). Cached per class.
    """
    cls = type(saver)
    key = (cls, is_async)
    answer = _PUT_STEP.get(key)
    if answer is None:
        names = (
            ("aput_step", "aput", "aput_writes") if is_async else ("put_step", "put", "put_writes")
        )
        mro = cls.__mro__
        owners = [next((k for k in mro if n in k.__dict__), None) for n in names]
        step = owners[0]
        answer = step is not None and all(
            o is None or mro.index(o) >= mro.index(step) for o in owners[1:]
        )
        _PUT_STEP[key] = answer
    return answer


_BELOW: dict[tuple[type, str], bool] = {}  # saver class, method -> answer


def _below(saver: Any, many: str) -> bool:
    """Whether ``put_steps`` exists and is defined no higher than ``put_step`` (a
    subclass customising only ``put_step`` must not be bypassed by it). Cached per
    class (asked once per run)."""
    cls = type(saver)
    answer = _BELOW.get((cls, many))
    if answer is None:
        mro = cls.__mro__
        one = many[:-1]
        owner = next((k for k in mro if many in k.__dict__), None)
        step = next((k for k in mro if one in k.__dict__), None)
        answer = owner is not None and step is not None and mro.index(owner) <= mro.index(step)
        _BELOW[(cls, many)] = answer
    return answer


_RELEASE = {"release": True}
_PLAIN: dict[str, bool] = {}


def _as_steps(ops: Any) -> list[tuple[list[Any], Any]]:
    """``(writes, checkpoint)`` ops as steps: writes-only ops join the op after them."""
    steps: list[tuple[list[Any], Any]] = []
    writes: list[Any] = []
    for op_writes, checkpoint in ops:
        writes.extend(op_writes)
        if checkpoint is not None:
            steps.append((writes, checkpoint))
            writes = []
    if writes:
        steps.append((writes, None))
    return steps


_CLOSE_WAIT = 10.0  # seconds a close from another thread waits for a run's queued saves


def is_stop(exc: BaseException | None) -> bool:
    """A run ended by its caller (a cancel, a timeout around it, Ctrl-C), not by itself."""
    return isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt))


def note_unsaved(stop: BaseException, error: Exception) -> None:
    """A stopped run whose last saves failed: the stop goes on (a caller waiting
    for its cancel or timeout must see that, as with LangGraph), saying what was
    not saved."""
    add_note = getattr(stop, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(f"while the run stopped, saving its steps failed: {error!r}")


def _pieces(writes: list[Any], checkpoint: Any) -> list[tuple[list[Any], Any]]:
    """A step's save cut into one save per task's writes, then the checkpoint's."""
    pieces: list[tuple[list[Any], Any]] = [([w], None) for w in writes]
    if checkpoint is not None:
        pieces.append(([], checkpoint))
    return pieces


def apart(
    steps: list[tuple[list[Any], Any]], tried: bool
) -> Generator[tuple[list[Any], Any], SerializationError | None, None]:
    """Saving a batch of steps one save at a time after the batch (one
    transaction) failed to serialize a value: the steps and tasks before and
    beside the bad value are stored, as LangGraph (one call per task's writes
    and per checkpoint) stores them, instead of the whole batch rolling back
    with it. A step whose checkpoint cannot be stored ends the walk: the steps
    after it would name a parent that is not there. The first failure is raised
    once the rest is saved. ``tried``: the first step already failed whole.

    Written once for both persisters: it yields each save ``(writes,
    checkpoint)`` and is sent back the ``SerializationError`` it raised, or None."""
    first: SerializationError | None = None
    stopped = False
    for i, (writes, checkpoint) in enumerate(steps):
        if stopped:
            break
        if not (tried and i == 0):
            exc = yield (writes, checkpoint)
            if exc is None:
                continue
            if len(_pieces(writes, checkpoint)) < 2:
                first, stopped = first or exc, stopped or checkpoint is not None
                continue
        for piece in _pieces(writes, checkpoint):
            exc = yield piece
            if exc is not None:
                first, stopped = first or exc, stopped or piece[1] is not None
    if first is not None:
        raise first


class _Buffer:
    """What both persisters share: the writes buffer and how one op is called."""

    saver: Any
    _task_path: bool
    _step: bool

    def _setup(self, saver: Any, durability: str, is_async: bool) -> None:
        self.saver = saver
        self.inline = durability != "async"
        self._step = uses_put_step(saver, is_async)
        self._steps = self._step and _below(saver, "aput_steps" if is_async else "put_steps")
        self.one_transaction = self._step  # writes + checkpoint commit together
        # a leased run's last checkpoint may release the lease in its transaction
        self._releases = self._step and getattr(saver, "releases_with_step", False) is True
        self._last: Any = None  # that checkpoint's put arguments, once submitted
        self._holds = False  # may keep a put (the input checkpoint) for the next one
        self._held: tuple[list[Any], Any] | None = None
        self._task_path = accepts_task_path(saver, "aput_writes" if is_async else "put_writes")
        self._writes: list[tuple[Any, Any, str, str]] = []
        self._queue: deque[tuple[list[Any], Any]] = deque()
        self._error: BaseException | None = None
        lease = getattr(saver, "lease", None)  # a leased run (FencedSaver)
        if lease is not None and hasattr(lease, "queued"):
            if lease.queued is None:  # (a subgraph's persister shares its root's lease)
                lease.queued = weakref.WeakSet()
            lease.queued.add(self)  # its saver's close saves our queue first

    def put(
        self,
        config: Any,
        checkpoint: Any,
        metadata: Any,
        new_versions: Any,
        last: bool = False,
        hold: bool = False,
    ) -> None:
        """The checkpoint, with every write buffered before it. ``last``: the run
        surely ends after it; a fenced saver then releases the lease in the same
        transaction (``FencedSaver.releases_with_step``). ``hold``: the run's input
        checkpoint, which a sync persister sends with the next save in one
        ``put_steps`` (see ``holding``)."""
        writes, self._writes = self._writes, []
        cp = (config, checkpoint, metadata, new_versions)
        if last and self._releases:
            self._last = cp
        if hold and self._holds:
            self._held = (writes, cp)
            return
        self._submit((writes, cp))

    def send_held(self) -> None:
        """Save a held input checkpoint now, alone: the step about to run has user
        code (a raw Pregel graph's nodes read the input directly), which must not
        run while the input is stored nowhere."""
        held, self._held = self._held, None
        if held is not None:
            self._call(*held)

    @property
    def holding(self) -> bool:
        """A held input checkpoint is not saved yet: the first step boundary cannot
        rely on its fence having read the lease."""
        return self._held is not None

    def _release(self, checkpoint: Any) -> dict[str, bool]:
        """The keyword that makes saving ``checkpoint`` also release the lease
        (``release=True``), else none: only a saver that declares
        ``releases_with_step`` ever gets it."""
        return _RELEASE if checkpoint is not None and checkpoint is self._last else _PLAIN

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str) -> None:
        """Buffered until the next ``put`` or ``save_writes()``."""
        self._writes.append((config, writes, task_id, task_path))

    def save_writes(self) -> None:
        """Send the buffered writes now (no checkpoint follows yet)."""
        if self._writes:
            writes, self._writes = self._writes, []
            self._submit((writes, None))

    def _submit(self, op: tuple[list[Any], Any]) -> None:
        raise NotImplementedError

    def _take(self) -> tuple[int, list[tuple[list[Any], Any]]]:
        """Everything queued, as steps: writes-only ops join the op after them."""
        return len(self._queue), _as_steps(self._queue)


# the two persisters, in modules of their own (they import the shared parts above)
from threadloom.pregel.persist_async import AsyncPersister  # noqa: E402
from threadloom.pregel.persist_sync import SyncPersister  # noqa: E402
