"""Serializers: values <-> ``(type_tag, bytes)``, strict and safe by default.

See docs/serde.md. Nothing here uses pickle or imports a module named by stored
data; only registered or allowlisted classes are revived.
"""

from threadloom.checkpoint.serde.annotations import allowlist_from_annotations
from threadloom.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from threadloom.checkpoint.serde.cipher import AesGcmCipher
from threadloom.checkpoint.serde.encrypted import EncryptedSerializer
from threadloom.checkpoint.serde.exceptions import RevivedError
from threadloom.checkpoint.serde.jsonplus import JsonPlusSerializer
from threadloom.checkpoint.serde.keys import stable_key
from threadloom.checkpoint.serde.registry import REGISTRY, TypeEntry, register
from threadloom.checkpoint.serde.resolver import UnknownObject
from threadloom.checkpoint.serde.serializer import MsgpackSerializer, default_serializer
from threadloom.errors import CorruptBlobError, SerializationError

__all__ = [
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
