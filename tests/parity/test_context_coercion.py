"""Parity: ``context={...}`` becomes an instance of ``context_schema`` (dataclass, pydantic).

A TypedDict schema keeps the dict, an instance passes unchanged; a dict that does
not fit the schema is a ConfigError in threadloom (LangGraph: a bare TypeError).
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Annotated

import pydantic
import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h
from threadloom.errors import ConfigError


@dataclasses.dataclass
class DataCtx:
    user: str
    lang: str = "en"


class ModelCtx(pydantic.BaseModel):
    user: str
    lang: str = "en"


class DictCtx(TypedDict):
    user: str


class S(TypedDict):
    x: Annotated[list, operator.add]


def _app(lib, saver, schema):
    def node(state, runtime):
        ctx = runtime.context
        seen = (
            ctx["user"] if isinstance(ctx, dict) else f"{type(ctx).__name__}:{ctx.user}:{ctx.lang}"
        )
        return {"x": [seen]}

    g = lib.StateGraph(S, context_schema=schema)
    g.add_node("a", node)
    g.add_edge(lib.START, "a")
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize(
    "schema", [DataCtx, ModelCtx, DictCtx], ids=["dataclass", "pydantic", "td"]
)
def test_dict_context_is_coerced(schema) -> None:
    def sc(lib, saver, durability):
        app = _app(lib, saver, schema)
        cfg = {"configurable": {"thread_id": "t"}}
        out = [("dict", app.invoke({"x": []}, cfg, context={"user": "d"}))]
        if schema is not DictCtx:
            out.append(("instance", app.invoke({"x": []}, cfg, context=schema(user="i"))))
        return out

    h.run_parity(sc)


async def test_dict_context_is_coerced_async() -> None:
    async def sc(lib, saver, durability):
        app = _app(lib, saver, DataCtx)
        cfg = {"configurable": {"thread_id": "t"}}
        return [("dict", await app.ainvoke({"x": []}, cfg, context={"user": "d", "lang": "fr"}))]

    await h.arun_parity(sc)


@pytest.mark.parametrize("schema", [DataCtx, ModelCtx])
def test_bad_context_dict_is_a_config_error(schema) -> None:
    lib = h._lib("threadloom")
    app = _app(lib, None, schema)
    with pytest.raises(ConfigError, match=schema.__name__):
        app.invoke({"x": []}, context={"nobody": "d"})
