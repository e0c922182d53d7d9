"""Shared pytest fixtures: where the build is, and the flashkv_testing module built from the C++ code."""
import os
import pathlib
import sys

import pytest

# Tests use small arrays on a 2-core CI machine: BLAS worker threads only contend. Set before any test imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("FLASHKV_BUILD_DIR", ROOT / "build"))
sys.path.insert(0, str(BUILD / "python_testing"))
sys.path.insert(0, str(ROOT / "tests"))


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    return BUILD


@pytest.fixture(scope="session")
def cli(build_dir) -> pathlib.Path:
    """Path of the built `flashkv` program."""
    path = build_dir / "flashkv"
    assert path.exists(), f"{path} missing: build first (scripts/build)"
    return path


@pytest.fixture(scope="session")
def flashkv_info(cli):
    """flashkv_info(path) -> the parsed `flashkv info PATH --json` of the built program."""
    import json  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    def run(path) -> dict:
        result = subprocess.run([str(cli), "info", str(path), "--json"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    return run


@pytest.fixture(scope="session")
def capi(build_dir):
    """libflashkv.so (the C ABI) through ctypes; fkv_abi_version and fkv_last_error typed, other calls as needed."""
    import ctypes  # noqa: PLC0415

    path = build_dir / "libflashkv.so"
    assert path.exists(), f"{path} missing: build the flashkv target"
    lib = ctypes.CDLL(str(path))
    lib.fkv_abi_version.restype = ctypes.c_uint32
    lib.fkv_last_error.restype = ctypes.c_char_p
    return lib


@pytest.fixture(scope="session")
def fkt():
    """The flashkv_testing pybind11 module (C++ internals exposed for oracle tests)."""
    import flashkv_testing  # noqa: PLC0415 -- built by CMake; a missing module is a build failure

    return flashkv_testing


@pytest.fixture(scope="session")
def flashkv_package():
    """The installed `flashkv` Python package (pip install .), never the source tree's python/flashkv.

    Skipped when it is not installed, unless FLASHKV_REQUIRE_PACKAGE=1 (scripts/test installs it and sets this, so
    that a broken install fails instead of skipping)."""
    import importlib  # noqa: PLC0415

    try:
        package = importlib.import_module("flashkv")
    except ImportError as error:
        if os.environ.get("FLASHKV_REQUIRE_PACKAGE") == "1":
            raise
        pytest.skip(f"the flashkv package is not installed ({error}); `pip install .` installs it (scripts/test does)")
    location = pathlib.Path(package.__file__).resolve()
    assert ROOT / "python" not in location.parents, f"flashkv imported from the source tree ({location}), not installed"
    return package
