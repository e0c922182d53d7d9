"""flashkv: DeepSeek-V4.1-Flash (and DeepSeek-V4-Flash) inference from Python.

    import flashkv
    model = flashkv.Model("/path/to/checkpoint", numerics="faithful")
    session = model.session()
    for token in session.generate([5, 17, 300], max_tokens=8, temperature=0):
        print(token)

The classes are the C++ API's (docs/api.md) through pybind11; docs/python.md is the guide: options, the
logits lifetime rule, threading (the GIL is released while the model computes), errors.
"""

from __future__ import annotations

from . import _flashkv
from ._flashkv import (
    ChatEvent,
    ChatParser,
    Detokenizer,
    GenerateResult,
    KVHandle,
    KvSourceFootprint,
    LayerPlan,
    LayerRole,
    LoadOptions,
    MemoryReport,
    Model,
    ModelConfig,
    ModelMemory,
    ParameterCounts,
    QuantizationConfig,
    RopeScaling,
    Session,
    TokenStream,
    __version__,
    decode,
)
from .errors import (
    CancelledError,
    DeviceError,
    Error,
    InternalError,
    InvalidArgumentError,
    InvalidCheckpointError,
    InvalidConfigError,
    IoError,
    NotFoundError,
    OutOfMemoryError,
    UnsupportedError,
)
from .errors import ERROR_CLASSES as _ERROR_CLASSES

_flashkv._register_errors({cls.code: cls for cls in _ERROR_CLASSES})

from .chat import session_chat as _session_chat  # noqa: E402 -- needs the compiled module loaded above

Session.chat = _session_chat

__all__ = [
    "CancelledError",
    "ChatEvent",
    "ChatParser",
    "Detokenizer",
    "DeviceError",
    "Error",
    "GenerateResult",
    "InternalError",
    "InvalidArgumentError",
    "InvalidCheckpointError",
    "InvalidConfigError",
    "IoError",
    "KVHandle",
    "KvSourceFootprint",
    "LayerPlan",
    "LayerRole",
    "LoadOptions",
    "MemoryReport",
    "Model",
    "ModelConfig",
    "ModelMemory",
    "NotFoundError",
    "OutOfMemoryError",
    "ParameterCounts",
    "QuantizationConfig",
    "RopeScaling",
    "Session",
    "TokenStream",
    "UnsupportedError",
    "__version__",
    "decode",
]
