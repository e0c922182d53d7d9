"""The flashkv.Error hierarchy: one class per error code of the C++ API (include/flashkv/error.hpp).

Every failure surfaces as a subclass of :class:`Error` whose message names the file, tensor, field, option or
token at fault. ``code`` is the stable lower-case code name, the same in C++ (``error_code_name``), the C ABI and
`flashkv run`. Some classes also derive from the built-in exception a Python caller would expect, so that
``except ValueError`` catches a bad argument and ``except FileNotFoundError`` a missing checkpoint.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every error flashkv raises."""

    code: str = ""


class InvalidArgumentError(Error, ValueError):
    """A value passed by the caller is out of range or inconsistent (a token id, an option, a rewind, ...)."""

    code = "invalid_argument"


class InvalidConfigError(Error):
    """config.json is malformed or breaks a rule of the model (the message names the field)."""

    code = "invalid_config"


class InvalidCheckpointError(Error):
    """A checkpoint file is malformed, truncated or disagrees with the config (the message names the tensor)."""

    code = "invalid_checkpoint"


class NotFoundError(Error, FileNotFoundError):
    """A file, tensor or key that must exist does not."""

    code = "not_found"


class IoError(Error, OSError):
    """The operating system refused a read, write, open or map."""

    code = "io"


class UnsupportedError(Error):
    """Valid input this build cannot handle (a dtype, a feature, a device)."""

    code = "unsupported"


class DeviceError(Error):
    """A CUDA call failed."""

    code = "device"


class OutOfMemoryError(Error, MemoryError):
    """An allocation failed."""

    code = "out_of_memory"


class CancelledError(Error):
    """A callback asked to stop (returned False). The session keeps what was completed and stays usable."""

    code = "cancelled"


class InternalError(Error):
    """A broken invariant inside flashkv: a bug, please report it."""

    code = "internal"


ERROR_CLASSES: tuple[type[Error], ...] = (
    InvalidArgumentError,
    InvalidConfigError,
    InvalidCheckpointError,
    NotFoundError,
    IoError,
    UnsupportedError,
    DeviceError,
    OutOfMemoryError,
    CancelledError,
    InternalError,
)
