"""Codecs for optional libraries (numpy, langchain-core), registered on first use.

threadloom depends on neither: their codecs are registered the first time one of
their classes is serialized or one of their stored names is read. The modules
imported here are fixed in code, never taken from stored data.
"""

from __future__ import annotations

import importlib
from typing import Any

from threadloom.checkpoint.serde.registry import Registry, TypeEntry, entry_for

__all__ = ["register_lazy", "register_numpy", "register_langchain", "decode_langgraph_array"]

_NUMPY_SCALARS = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "longdouble", "complex64", "complex128",
    "clongdouble", "datetime64", "timedelta64", "str_", "bytes_",
)  # fmt: skip


def _try_import(module: str) -> Any | None:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def _check_dtype(np: Any, dtype: Any) -> Any:
    """Refuse dtypes whose bytes are not the data: objects (pointers) and records."""
    if dtype.kind in "OV" or dtype.names is not None or dtype.hasobject:
        raise TypeError(
            f"numpy dtype {dtype!s} cannot be stored safely (object and structured arrays are "
            "refused: their raw bytes are pointers or layout-dependent); convert to plain arrays"
        )
    return dtype


def register_numpy(registry: Registry) -> None:
    np = _try_import("numpy")
    if np is None:
        return

    def encode(a: Any) -> list[Any]:
        _check_dtype(np, a.dtype)
        return [a.dtype.str, list(a.shape), a.tobytes(order="C")]

    def decode(s: list[Any]) -> Any:
        dtype = _check_dtype(np, np.dtype(s[0]))
        return np.frombuffer(s[2], dtype=dtype).reshape(s[1]).copy()

    registry.add(TypeEntry("numpy.ndarray", np.ndarray, encode, decode))

    def scalar_encode(v: Any) -> list[Any]:
        return [v.dtype.str, v.tobytes()]

    def scalar_decode(s: list[Any]) -> Any:
        return np.frombuffer(s[1], dtype=_check_dtype(np, np.dtype(s[0])))[0]

    for name in _NUMPY_SCALARS:
        cls = getattr(np, name)
        registry.add(TypeEntry(f"numpy.scalar.{name}", cls, scalar_encode, scalar_decode))


def decode_langgraph_array(payload: list[Any]) -> Any:
    """A numpy array as LangGraph stores it: ``[dtype, shape, order, buffer]``."""
    import numpy as np

    dtype_str, shape, order, buf = payload
    dtype = _check_dtype(np, np.dtype(dtype_str))
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order=order).copy()


def register_langchain(registry: Registry) -> None:
    messages = _try_import("langchain_core.messages")
    if messages is None:
        return
    for name in messages.__all__:
        cls = getattr(messages, name, None)
        if isinstance(cls, type) and issubclass(cls, messages.BaseMessage):
            registry.add(entry_for(cls))
    documents = _try_import("langchain_core.documents")
    if documents is not None:
        registry.add(entry_for(documents.Document))


def register_lazy(registry: Registry) -> None:
    registry.add_lazy("numpy", register_numpy)
    registry.add_lazy("langchain_core", register_langchain)
