"""Saving a run's checkpoints and writes: what a save holds and when it is made.

:class:`Saving` is the part of :class:`~threadloom.pregel.loop.Loop` that turns the
loop's state into saver calls (through the persister, ``persist.py``): a step's
checkpoint (``put_checkpoint``), the config its writes are filed under, whether a
save is the run's last (so a leased run releases in that transaction), and the
saves durability "exit" makes at the end. The step state machine stays in
``loop.py``; this keeps the two apart.
"""

from __future__ import annotations

from typing import Any

from threadloom.checkpoint.base import create_checkpoint
from threadloom.checkpoint.ids import uuid6_str
from threadloom.constants import NS_END, NS_SEP, TASKS
from threadloom.errors import GraphInterrupt
from threadloom.pregel.checkpoint import checkpoint_values, get_new_channel_versions
from threadloom.pregel.ids import task_path_str

__all__ = ["Saving"]

_NO_NS = object()


class Saving:
    """Checkpoint and write saves of a :class:`~threadloom.pregel.loop.Loop` (a mixin:
    it reads and sets the loop's attributes)."""

    o: Any
    ns: str
    graph: Any
    step: int
    is_nested: bool
    channels: dict[str, Any]
    stored: list[tuple[str, Any, bool]]
    tasks: dict[str, Any]
    status: str
    checkpoint: dict[str, Any]
    checkpoint_config: dict[str, Any]
    prev_checkpoint_config: dict[str, Any] | None
    checkpoint_id_saved: str
    checkpoint_metadata: dict[str, Any]
    previous_versions: dict[str, Any]
    updated_channels: set[str] | None
    pending_writes: list[Any]
    written_task_ids: set[str]
    untracked: set[str]
    _wcfg: tuple[str, Any, dict[str, Any]] | None

    def _ends_here(self) -> bool:
        """Whether the next tick surely plans no task (no Send pending, no node triggered
        by a channel this step updated): the root run's last save may then release the
        lease in its transaction. False when unsure (interrupt_after, a nested graph)."""
        if self.is_nested or self.o.interrupt_after:
            return False
        updated, t2n = self.updated_channels, self.graph.trigger_to_nodes
        if not updated or not t2n:
            return False
        sends = self.channels.get(TASKS)
        if sends is not None and sends.is_available():
            return False
        for chan in updated:
            if t2n.get(chan):
                return False
        return True

    def put_checkpoint(
        self,
        metadata: dict[str, Any],
        exiting: bool = False,
        last: bool = False,
        hold: bool = False,
    ) -> None:
        """Make the checkpoint that follows this step (``exiting``: keep its id, the
        run is ending) and save it unless durability "exit" saves only at the end.
        ``last``/``hold``: see ``persist._Buffer.put``."""
        if exiting and self.checkpoint["id"] == self.checkpoint_id_saved:
            return
        o = self.o
        if not exiting:
            metadata["step"] = self.step
            metadata["parents"] = dict(o.run.checkpoint_map)
            self.checkpoint_metadata = metadata
        do_checkpoint = o.persister is not None and (exiting or o.durability != "exit")
        updated = sorted(self.updated_channels) if self.updated_channels is not None else None
        if do_checkpoint or exiting:
            ck = self.checkpoint
            self.checkpoint = create_checkpoint(
                ck,
                None,
                self.step,
                id=ck["id"] if exiting else None,
                updated_channels=updated,
                values=checkpoint_values(self.stored, ck["channel_versions"])
                if do_checkpoint
                else None,
            )
        else:  # nothing is stored: only the id moves on (task ids hash it)
            self.checkpoint = {
                **self.checkpoint,
                "id": uuid6_str(clock_seq=self.step),
                "updated_channels": updated,
            }
        if do_checkpoint:
            self._hand_over(last, hold)
        if not exiting:
            self.step += 1

    def _hand_over(self, last: bool, hold: bool) -> None:
        """Give the persister a snapshot of the new checkpoint, filed under the config
        of the one before it; the loop's config then names the new one."""
        o = self.o
        cfg = self.checkpoint_config
        conf = cfg["configurable"]
        self.prev_checkpoint_config = cfg if conf.get("checkpoint_id") else None
        if conf.get("checkpoint_ns", _NO_NS) != self.ns:  # else: set by the last put
            cfg = {**cfg, "configurable": {**conf, "checkpoint_ns": self.ns}}
        # The loop changes its checkpoint's versions in place and replaces (never
        # changes) per-node versions_seen dicts and the values dict: copying the
        # two top-level version dicts is enough for a snapshot nothing touches.
        ck = self.checkpoint
        versions = dict(ck["channel_versions"])  # read-only from here on: shared
        snapshot = {
            **ck,
            "channel_versions": versions,
            "versions_seen": {**ck["versions_seen"]},
        }
        new_versions = get_new_channel_versions(self.previous_versions, versions)
        self.previous_versions = versions
        o.persister.put(cfg, snapshot, self.checkpoint_metadata, new_versions, last, hold)
        self.checkpoint_id_saved = self.checkpoint["id"]
        self.checkpoint_config = {
            **cfg,
            "configurable": {**cfg["configurable"], "checkpoint_id": self.checkpoint["id"]},
        }

    def exit_saves(self, exc: BaseException | None) -> None:
        """Durability "exit": the run's only saves, the last checkpoint and its writes
        (a nested run saves only when it failed, drained, or is not inside a task;
        LangGraph drops a drained subgraph's steps, which the resume then reruns)."""
        o = self.o
        if o.durability != "exit" or o.persister is None:
            return
        if (
            self.is_nested
            and exc is None
            and self.status != "draining"  # a drained subgraph resumes from its own save
            and any(NS_END in p for p in self.ns.split(NS_SEP))
        ):
            return
        if o.persister.one_transaction:  # writes first: one put_step carries both
            self._put_pending_writes()
            # the root's last save may release the lease (a "rollback" stop writes on)
            last = not self.is_nested and (exc is None or isinstance(exc, GraphInterrupt))
            self.put_checkpoint(self.checkpoint_metadata, exiting=True, last=last)
        else:
            self.put_checkpoint(self.checkpoint_metadata, exiting=True)
            self._put_pending_writes()

    def _put_pending_writes(self) -> None:
        if not self.pending_writes:
            return
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for tid, c, v in self.pending_writes:
            if tid in self.written_task_ids and c not in self.untracked:
                by_task.setdefault(tid, []).append((c, v))
        cfg = self._writes_config()
        for tid, writes in by_task.items():
            task = self.tasks.get(tid)
            self.o.persister.put_writes(cfg, writes, tid, task_path_str(task.path) if task else "")

    def _writes_config(self) -> dict[str, Any]:
        """The config writes are filed under: the current checkpoint's. Built once
        per checkpoint (a step's tasks all share it; savers only read it)."""
        cid = self.checkpoint["id"]
        cached = self._wcfg
        if cached is not None and cached[0] == cid and cached[1] is self.checkpoint_config:
            return cached[2]
        cfg = self.checkpoint_config
        conf = cfg["configurable"]
        if conf.get("checkpoint_id") == cid and conf.get("checkpoint_ns", _NO_NS) == self.ns:
            self._wcfg = (cid, cfg, cfg)  # the loop's config (as _hand_over left it) says it all
            return cfg
        out = {
            **cfg,
            "configurable": {**cfg["configurable"], "checkpoint_ns": self.ns, "checkpoint_id": cid},
        }
        self._wcfg = (cid, cfg, out)
        return out
