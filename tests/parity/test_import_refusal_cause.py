"""import_langgraph's refusal of a class LangGraph cannot rebuild says why: the
class does not import here (make it importable), or it imports but changed since
the data was written (restore a compatible class for the import)."""

from __future__ import annotations

import importlib
import operator
import sys
from typing import Annotated, Any

import pytest
from typing_extensions import TypedDict

from tests.parity import helpers as h
from threadloom.checkpoint.memory import InMemorySaver
from threadloom.checkpoint.migrate import import_langgraph
from threadloom.errors import SerializationError

V1 = """
import dataclasses, enum
@dataclasses.dataclass
class Order:
    sku: str
    old: str = "x"
class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"
"""


class State(TypedDict):
    log: Annotated[list, operator.add]


def _source(value: Any) -> Any:
    """A LangGraph thread whose state holds ``value``."""
    from langgraph.checkpoint.memory import InMemorySaver as LGMemory

    lg = h._lib("langgraph")
    b = lg.StateGraph(State)
    b.add_node("a", lambda s: {"log": ["a"]})
    b.add_edge(lg.START, "a")
    source = LGMemory()
    b.compile(checkpointer=source).invoke({"log": [value]}, {"configurable": {"thread_id": "t"}})
    return source


def _deploy(tmp_path: Any, monkeypatch: Any, module: str, text: str) -> Any:
    """The next version of ``module``, imported in place of the old one."""
    (tmp_path / f"{module}.py").write_text(text)
    monkeypatch.delitem(sys.modules, module)
    return importlib.import_module(module)


@pytest.fixture
def v1(tmp_path: Any, monkeypatch: Any) -> Any:
    def load(module: str) -> Any:
        (tmp_path / f"{module}.py").write_text(V1)
        monkeypatch.syspath_prepend(str(tmp_path))
        return importlib.import_module(module)

    return load


@pytest.mark.parametrize(
    ("v2", "what", "why"),
    [
        (
            "import dataclasses\n@dataclasses.dataclass\nclass Order:\n    sku: str\n",
            "Order",
            "old",
        ),
        ("import enum\nclass Color(enum.Enum):\n    RED = 'red'\n", "Color", "'blue'"),
    ],
)
def test_a_class_that_changed_is_named_as_changed(tmp_path, monkeypatch, v1, v2, what, why):
    module = f"chg_{what.lower()}_s14"
    mod = v1(module)
    value = mod.Order("s1", "keep") if what == "Order" else mod.Color.BLUE
    source = _source(value)
    _deploy(tmp_path, monkeypatch, module, v2)
    target = InMemorySaver()
    with pytest.raises(SerializationError) as info:
        import_langgraph(source, target)
    text = str(info.value)
    assert f"cannot rebuild {module}.{what} from what it stored" in text and why in text
    assert "imports here but has changed since the data was written" in text
    advice = "compatible with the stored data" if what == "Order" else "must stay a member"
    assert advice in text and "docs/serde.md" in text
    assert "make it importable" not in text
    assert target.get_tuple({"configurable": {"thread_id": "t"}}) is None


def test_a_class_that_is_gone_is_named_as_not_importable(tmp_path, monkeypatch, v1):
    module = "gone_order_s14"
    mod = v1(module)
    source = _source(mod.Order("s1"))
    _deploy(tmp_path, monkeypatch, module, "class Renamed:\n    pass\n")
    with pytest.raises(SerializationError) as info:
        import_langgraph(source, InMemorySaver())
    text = str(info.value)
    assert f"cannot rebuild {module}.Order in this process" in text
    assert "does not import here; make it importable here" in text
    assert "has changed" not in text


def test_a_removed_enum_value_is_not_advised_to_import_then_deploy(tmp_path, monkeypatch, v1):
    """threadloom's Enum codec calls the class with the stored value, as LangGraph does:
    importing with the old class and then deploying would leave every imported
    checkpoint holding the removed value unreadable, so the advice says to keep the
    value a member or migrate the data first."""
    module = "chg_enum_advice_s14"
    mod = v1(module)
    source = _source(mod.Color.BLUE)
    _deploy(
        tmp_path, monkeypatch, module, "import enum\nclass Color(enum.Enum):\n    RED = 'red'\n"
    )
    with pytest.raises(SerializationError) as info:
        import_langgraph(source, InMemorySaver())
    text = str(info.value)
    assert "must stay a member's value" in text and "migrated first" in text
    assert "without calling the class" not in text and "then deploy" not in text


def test_a_removed_field_advice_names_extras(tmp_path, monkeypatch, v1):
    module = "chg_field_advice_s14"
    mod = v1(module)
    source = _source(mod.Order("s1", "keep"))
    v2 = "import dataclasses\n@dataclasses.dataclass\nclass Order:\n    sku: str\n"
    _deploy(tmp_path, monkeypatch, module, v2)
    with pytest.raises(SerializationError) as info:
        import_langgraph(source, InMemorySaver())
    text = str(info.value)
    assert "then deploy the change" in text and "removed fields are dropped" in text
    assert 'extra="allow" reads a removed field back as an extra' in text
