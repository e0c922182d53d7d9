"""make_tiny_checkpoint: tools/make-tiny-checkpoint as the tests run it, so its command line lives in one place."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "make-tiny-checkpoint"


def make_tiny_checkpoint(out: pathlib.Path, preset: str, seed: int, *extra: str) -> pathlib.Path:
    """Writes the tiny checkpoint `preset` (a name or a config path) with weights drawn from `seed` into `out`;
    `extra` are more of the tool's options. A failing tool fails the test with its stderr."""
    result = subprocess.run([sys.executable, str(TOOL), "--config", str(preset), "--seed", str(seed), "--out",
                             str(out), *extra], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"make-tiny-checkpoint --config {preset} --seed {seed}: {result.stderr}"
    return out
