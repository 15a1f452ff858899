"""The public surface of threadloom.checkpoint.serde and its LangGraph-compat modules."""

from __future__ import annotations

import threadloom.checkpoint.serde as serde


def test_exports_are_pinned():
    assert sorted(serde.__all__) == sorted(
        [
            "REGISTRY",
            "AesGcmCipher",
            "CipherProtocol",
            "CorruptBlobError",
            "EncryptedSerializer",
            "JsonPlusSerializer",
            "MsgpackSerializer",
            "RevivedError",
            "SerializationError",
            "SerializerProtocol",
            "TypeEntry",
            "UnknownObject",
            "allowlist_from_annotations",
            "default_serializer",
            "register",
            "stable_key",
        ]
    )
    for name in serde.__all__:
        assert getattr(serde, name) is not None


def test_default_serializer_is_shared_and_satisfies_protocol():
    from threadloom.checkpoint.saver import BaseCheckpointSaver

    assert serde.default_serializer() is serde.default_serializer()
    assert isinstance(serde.default_serializer(), serde.SerializerProtocol)
    assert BaseCheckpointSaver().serde is serde.default_serializer()


def test_compat_modules():
    from threadloom.checkpoint.serde.encrypted import EncryptedSerializer
    from threadloom.checkpoint.serde.jsonplus import JsonPlusSerializer
    from threadloom.checkpoint.serde.types import ERROR, INTERRUPT, RESUME, SCHEDULED, TASKS

    assert (ERROR, INTERRUPT, RESUME, SCHEDULED, TASKS) == (
        "__error__",
        "__interrupt__",
        "__resume__",
        "__scheduled__",
        "__pregel_tasks",
    )
    assert issubclass(JsonPlusSerializer, serde.MsgpackSerializer)
    assert EncryptedSerializer is serde.EncryptedSerializer


def test_importing_serde_does_not_import_optional_libraries():
    import subprocess
    import sys

    code = (
        "import sys, threadloom.checkpoint.serde as s;"
        "s.default_serializer().dumps_typed({'a': (1, 2)});"
        "print(sorted(m for m in ('numpy', 'langchain_core', 'pydantic', 'pickle') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "numpy" not in out.stdout and "langchain_core" not in out.stdout


def test_saver_with_allowlist_trusts_the_classes_and_refuses_names() -> None:
    """LangGraph 1.2's ``BaseCheckpointSaver.with_allowlist``: classes are
    trusted for reading back; ``(module, name)`` pairs are refused (names are
    never resolved)."""
    import dataclasses

    from threadloom.checkpoint.memory import InMemorySaver

    @dataclasses.dataclass
    class Invoice:
        n: int

    saver = InMemorySaver()
    assert saver.with_allowlist([Invoice]) is saver
    assert Invoice in saver.serde.allowed
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    from threadloom.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    cp["channel_values"] = {"inv": Invoice(3)}
    cp["channel_versions"] = {"inv": 1}
    saver.put(config, cp, {"source": "input", "step": -1}, {"inv": 1})
    assert saver.get_tuple(config).checkpoint["channel_values"]["inv"] == Invoice(3)
    import pytest

    with pytest.raises(TypeError, match="names are never resolved"):
        saver.with_allowlist([("myapp.models", "Invoice")])
