"""A channel's no-op flags (``empty_update_is_noop``, ``finish_is_noop``) are read
per channel, not per class: a user channel may set them on the instance, and a
run must clear/finish it as ``update_state`` does (review2, session 9: the
per-run plan cached them per class)."""

from __future__ import annotations

from typing import Any

from threadloom.channels import LastValue
from threadloom.channels.base import MISSING, BaseChannel
from threadloom.pregel.checkpoint import run_channels
from threadloom.pregel.writes import end_of_step_channels


class MaybeEphemeral(BaseChannel):
    """A LastValue that, with clear=True, forgets its value after a step without writes."""

    empty_update_is_noop = True  # the default kind keeps its value

    def __init__(self, typ: Any = None, clear: bool = False, key: str = "") -> None:
        super().__init__(typ, key)
        self.clear = clear
        self.value = MISSING
        self.empty_update_is_noop = not clear  # per instance

    def from_checkpoint(self, checkpoint):
        new = type(self)(self.typ, self.clear, self.key)
        new.value = checkpoint
        return new

    def get(self):
        if self.value is MISSING:
            raise self._empty()
        return self.value

    def update(self, values):
        if not values:
            if self.value is not MISSING:
                self.value = MISSING
                return True
            return False
        self.value = values[-1]
        return True


def test_instance_flag_honoured_like_end_of_step_channels():
    specs = {"x": MaybeEphemeral(clear=True), "y": LastValue()}
    ck = {"channel_values": {"x": 1}}
    rc = run_channels(specs, ck)
    old = end_of_step_channels(rc.channels)
    assert [n for n, *_ in old.clearable] == ["x"]  # what the run visited before 0ed8dec
    assert [n for n, *_ in rc.end.clearable] == ["x"]


def test_in_a_run():
    """x is written at step 0 and not at step 1: update([]) must clear it."""
    from threadloom.channels import EphemeralValue
    from threadloom.checkpoint.memory import InMemorySaver
    from threadloom.pregel import NodeBuilder, Pregel

    n1 = NodeBuilder().subscribe_only("inp").do(lambda v: v).write_to("x", "go")
    n2 = NodeBuilder().subscribe_to("go", read=False).read_from("x").do(lambda s: None)
    app = Pregel(
        nodes={"n1": n1, "n2": n2},
        channels={"inp": EphemeralValue(), "x": MaybeEphemeral(clear=True), "go": EphemeralValue()},
        input_channels="inp",
        output_channels=["x"],
        checkpointer=InMemorySaver(),
    )
    cfg = {"configurable": {"thread_id": "t"}}
    app.invoke(5, cfg)
    assert app.get_state(cfg).values == {}, app.get_state(cfg).values
