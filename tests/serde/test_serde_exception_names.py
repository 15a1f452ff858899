"""A registered exception is stored under its registry name, so ``name=`` revives it
(also after the class moved) and a failed step's error reads back as its class."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import ormsgpack
import pytest

from threadloom.checkpoint.serde import MsgpackSerializer, RevivedError, register
from threadloom.checkpoint.serde.registry import Registry, TypeEntry
from threadloom.checkpoint.serde.structs import codec_for

EXT_OBJECT = 33


class PaymentError(Exception):
    def __init__(self, msg: str, code: int | None = None) -> None:
        super().__init__(msg)
        self.code = code


register(PaymentError, name="tests.billing.PaymentError")


def exception_row(type_name: str) -> tuple[str, bytes]:
    body = ormsgpack.packb(
        ["exception", {"type": type_name, "message": "declined", "args": ["declined"]}]
    )
    return "msgpack", ormsgpack.packb(ormsgpack.Ext(EXT_OBJECT, body))


def test_named_exception_round_trips_as_its_class():
    serde = MsgpackSerializer()
    back = serde.loads_typed(serde.dumps_typed(PaymentError("card declined", code=402)))
    assert type(back) is PaymentError
    assert back.args == ("card declined",) and back.code == 402


def test_named_exception_is_stored_under_its_name():
    tag, data = MsgpackSerializer().dumps_typed(PaymentError("x"))
    raw = MsgpackSerializer(registry=Registry()).loads_typed((tag, data))
    assert isinstance(raw, RevivedError)
    assert raw.type_name == "tests.billing.PaymentError"


def test_rows_written_under_the_module_path_still_revive():
    old = exception_row(f"{__name__}.PaymentError")  # the layout before names were stored
    back = MsgpackSerializer().loads_typed(old)
    assert type(back) is PaymentError and back.args == ("declined",)


def test_name_survives_moving_the_class():
    row = MsgpackSerializer().dumps_typed(PaymentError("moved", code=7))

    class Moved(Exception):  # another module/qualified name, same registry name
        pass

    reader = Registry()
    encode, decode = codec_for(Moved)
    reader.add(TypeEntry("tests.billing.PaymentError", Moved, encode, decode))
    back = MsgpackSerializer(registry=reader).loads_typed(row)
    assert type(back) is Moved and back.args == ("moved",) and back.code == 7


def test_unknown_exception_still_revived_generically():
    back = MsgpackSerializer().loads_typed(exception_row("nowhere.Gone"))
    assert isinstance(back, RevivedError) and back.type_name == "nowhere.Gone"


class S(TypedDict):
    log: Annotated[list, operator.add]


def test_failed_step_error_reads_back_as_the_registered_class(tmp_path):
    from threadloom.checkpoint.sqlite import SqliteSaver
    from threadloom.graph import END, START, StateGraph

    def a(state: S) -> dict:
        return {"log": ["a"]}

    def b(state: S) -> dict:
        raise PaymentError("card declined", code=402)

    builder = StateGraph(S)
    builder.add_node("a", a)
    builder.add_node("b", b)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    cfg = {"configurable": {"thread_id": "t1"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "s.db")) as saver:
        app = builder.compile(checkpointer=saver)
        with pytest.raises(PaymentError):
            app.invoke({"log": []}, cfg)
        error = app.get_state(cfg).tasks[0].error
    assert type(error) is PaymentError and error.code == 402
