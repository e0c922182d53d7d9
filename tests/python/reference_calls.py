"""run_calls: the numpy reference model (reference.model.Model or reference.model_v4.ModelV4) run over one sequence
in several forward calls, the per-layer dumps of the calls merged, as the consistency and golden tests compare it."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from reference.dumps import Dump, merge_dumps


def run_calls(model, ids, sizes, after_call: Optional[Callable[[object, int], None]] = None):
    """One forward per chunk of `sizes` (consecutive slices of `ids`) on one fresh state: the logits rows of every
    call concatenated, the merged dumps and the final state. `after_call(state, end)` runs after each call, `end`
    being the number of tokens consumed so far (for checks of the state between calls)."""
    state, logits, dumps, start = model.new_state(), [], [], 0
    for size in sizes:
        dump = Dump()
        logits.append(model.forward(state, ids[start : start + size], dump))
        dumps.append(dump.arrays)
        start += size
        if after_call is not None:
            after_call(state, start)
    return np.concatenate(logits), merge_dumps(dumps), state
