"""Generator of seeded DeepSeek-V4.1 test checkpoints in the released tensor names and storage formats.

Entry point: tools/make-tiny-checkpoint. Python users: `generate(config_path, out_dir, GenerateOptions(seed=...))`
and `draw_weights(config, seed)` (the float master values the checkpoint quantizes).
"""

from .errors import TinyCheckpointError
from .generator import GenerateOptions, draw_weights, generate
from .model_config import load_config

__all__ = ["GenerateOptions", "TinyCheckpointError", "draw_weights", "generate", "load_config"]
