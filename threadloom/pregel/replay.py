"""Which checkpoint a subgraph loads while its parent replays (time travel).

During a replay, the first run of each subgraph (by stable namespace, task ids
stripped) starts from its latest checkpoint *before* the replay point, so a
persistent subgraph (``checkpointer=True``) sees the state it had then; later
runs of the same subgraph load normally. One instance is shared by every nested
run of one root run.

A root run handed a *subgraph's* checkpoint config (``checkpoint_ns`` of a child,
with its ``checkpoint_map``) replays the root from the parent checkpoint the child
ran under, and ``targets`` names, per stable namespace, the child checkpoint each
level should start from. The replayed child runs under a new task id, so its
history up to the target is copied into the new namespace (same values, steps and
sources; the copies carry no task results) and the child continues from there:
the target's pending tasks run again, earlier child nodes do not.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

from threadloom.checkpoint.base import CheckpointTuple, copy_checkpoint
from threadloom.checkpoint.ids import uuid6
from threadloom.constants import NS_END, NS_SEP, NULL_TASK_ID

__all__ = ["ReplayState", "replay_targets", "stable_ns"]


def stable_ns(ns: str) -> str:
    """``a:<id>|b:<id>`` -> ``a|b``: the same subgraph path across task ids."""
    return NS_SEP.join(part.split(NS_END, 1)[0] for part in ns.split(NS_SEP))


def replay_targets(
    ns: str, checkpoint_id: str | None, cmap: Mapping[str, str]
) -> dict[str, tuple[str, str]]:
    """Per stable namespace, the (namespace, checkpoint id) a replayed child starts from.

    ``ns``/``checkpoint_id`` is the checkpoint the user named; ``cmap`` its
    ``checkpoint_map`` (the ancestors' checkpoint ids, the root's under ``""``).
    """
    targets: dict[str, tuple[str, str]] = {}
    parts = ns.split(NS_SEP)
    for depth in range(1, len(parts) + 1):
        level = NS_SEP.join(parts[:depth])
        cid = checkpoint_id if level == ns and checkpoint_id else cmap.get(level)
        if cid:
            targets[stable_ns(level)] = (level, cid)
    return targets


def _cfg(thread_cfg: Mapping[str, Any], ns: str, cid: str | None) -> dict[str, Any]:
    conf = {"thread_id": thread_cfg["configurable"]["thread_id"], "checkpoint_ns": ns}
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def _copy_plan(chain: list[Any], config: Mapping[str, Any], unsaved: bool) -> Any:
    """``(put args, writes, tuple)`` that re-file ``chain`` (oldest first) under ``config``'s ns.

    The copies' ``parents`` are the new run's ancestors, as for checkpoints it writes.
    ``unsaved``: the tuple stands for a checkpoint that is never stored (no id in its
    config, no parent), as a child under durability "exit" stores only its last one.
    """
    ns = config["configurable"]["checkpoint_ns"]
    parents = config["configurable"].get("checkpoint_map") or {}
    puts: list[tuple[Any, ...]] = []
    parent_id: str | None = None
    for saved in chain:
        checkpoint = copy_checkpoint(saved.checkpoint)
        checkpoint["id"] = str(uuid6(clock_seq=max(saved.metadata.get("step", 0), 0)))
        metadata = {**saved.metadata, "parents": dict(parents)}
        versions = dict(checkpoint["channel_versions"])
        puts.append((_cfg(config, ns, parent_id), checkpoint, metadata, versions))
        parent_id = checkpoint["id"]
    last = chain[-1]
    null_writes = [(c, v) for t, c, v in (last.pending_writes or []) if t == NULL_TASK_ID]
    head = puts[-1]
    tup = CheckpointTuple(
        _cfg(config, ns, None if unsaved else parent_id),
        head[1],
        head[2],
        _cfg(config, ns, puts[-2][1]["id"]) if len(puts) > 1 and not unsaved else None,
        [(NULL_TASK_ID, c, v) for c, v in null_writes],
    )
    return puts, null_writes, tup


class ReplayState:
    """The replay point and the subgraph namespaces already loaded from before it."""

    __slots__ = ("checkpoint_id", "_visited", "targets", "adopted", "durability")
    # adopted: namespace -> "copy" (history copied from another namespace, continue it)
    # or "fork" (the target is in this namespace: branch off it, as a root replay does)

    def __init__(
        self,
        checkpoint_id: str,
        targets: Mapping[str, tuple[str, str]] | None = None,
        durability: str = "async",
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.durability = durability  # "exit": copies are not stored, the child saves at exit
        self._visited: set[str] = set()
        self.targets = dict(targets or {})
        self.adopted: dict[str, str] = {}

    def _first_visit(self, ns: str) -> bool:
        stable = ns.rsplit(NS_END, 1)[0] if NS_END in ns else ns
        if stable in self._visited:
            return False
        self._visited.add(stable)
        return True

    def _target(self, ns: str) -> tuple[str, str] | None:
        target = self.targets.pop(stable_ns(ns), None)
        if target is not None:
            self.adopted[ns] = "fork" if target[0] == ns else "copy"
        return target

    def _before(self) -> dict[str, Any]:
        return {"configurable": {"checkpoint_id": self.checkpoint_id}}

    def _adopt(self, ns: str, config: dict[str, Any], target: tuple[str, str]) -> Generator:
        """Plan for a child started from ``target``: yields configs to read, returns
        ``(found, puts, writes)``; ``puts``/``writes`` re-file its history under ``ns``."""
        self._first_visit(ns)
        found = yield _cfg(config, *target)
        if found is None or target[0] == ns:
            return found, [], []
        chain = [found]
        while chain[0].parent_config is not None:
            older = yield chain[0].parent_config
            if older is None:
                break
            chain.insert(0, older)
        unsaved = self.durability == "exit"
        puts, null_writes, tup = _copy_plan(chain, config, unsaved)
        if unsaved:
            return tup, [], []
        return tup, puts, [(tup.config, null_writes, NULL_TASK_ID)] if null_writes else []

    def get_checkpoint(self, ns: str, saver: Any, config: dict[str, Any]) -> Any:
        """The tuple a subgraph run at ``ns`` starts from."""
        target = self._target(ns)
        if target is not None:
            plan = self._adopt(ns, config, target)
            try:
                request = next(plan)
                while True:
                    request = plan.send(saver.get_tuple(request))
            except StopIteration as stop:
                found, puts, writes = stop.value
            for args in puts:
                saver.put(*args)
            for args in writes:
                saver.put_writes(*args)
            return found
        if self._first_visit(ns):
            return next(iter(saver.list(config, before=self._before(), limit=1)), None)
        return saver.get_tuple(config)

    async def aget_checkpoint(self, ns: str, saver: Any, config: dict[str, Any]) -> Any:
        """Async twin of :meth:`get_checkpoint`."""
        target = self._target(ns)
        if target is not None:
            plan = self._adopt(ns, config, target)
            try:
                request = next(plan)
                while True:
                    request = plan.send(await saver.aget_tuple(request))
            except StopIteration as stop:
                found, puts, writes = stop.value
            for args in puts:
                await saver.aput(*args)
            for args in writes:
                await saver.aput_writes(*args)
            return found
        if self._first_visit(ns):
            async for saved in saver.alist(config, before=self._before(), limit=1):
                return saved
            return None
        return await saver.aget_tuple(config)
