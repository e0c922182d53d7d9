"""The one comparison helper every milestone uses against the reference: relative error, top-1 agreement, KL,
tie-aware top-k set equality, and a layer-by-layer dump comparison that names the first mechanism that disagrees.

Library:  compare_logits(reference, candidate) -> LogitsComparison;  compare_dumps(reference, candidate, ...).
Program:  python -m tests.reference.compare REFERENCE.npz CANDIDATE.npz [--rtol R] [--json]
          (golden files written by `python -m tests.reference.run --golden FILE`, or any .npz with the same keys).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass

import numpy as np

from .topk import topk_equivalent


def relative_error(reference: np.ndarray, candidate: np.ndarray) -> float:
    """max |candidate − reference| / max |reference| (0 when both are 0); the scale-free error used throughout."""
    reference = np.asarray(reference, dtype=np.float64)
    candidate = np.asarray(candidate, dtype=np.float64)
    if reference.shape != candidate.shape:
        raise ValueError(f"shapes differ: reference {reference.shape}, candidate {candidate.shape}")
    finite = np.isfinite(reference) & np.isfinite(candidate)
    if np.any(np.isfinite(reference) != np.isfinite(candidate)) or np.any(reference[~finite] != candidate[~finite]):
        return float("inf")
    scale = np.max(np.abs(reference[finite])) if finite.any() else 0.0
    diff = np.max(np.abs(candidate[finite] - reference[finite])) if finite.any() else 0.0
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return float(diff / scale)


def top1_agreement(reference_logits: np.ndarray, candidate_logits: np.ndarray) -> float:
    """Fraction of rows whose candidate argmax is a maximum of the reference row (so a tie at the top is an
    agreement whichever of the tied tokens the candidate picked)."""
    reference_logits = np.atleast_2d(reference_logits)
    picks = np.argmax(np.atleast_2d(candidate_logits), axis=-1)
    chosen = np.take_along_axis(reference_logits, picks[:, None], axis=-1)[:, 0]
    return float(np.mean(chosen == reference_logits.max(axis=-1)))


def log_softmax(logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def kl_divergence(reference_logits: np.ndarray, candidate_logits: np.ndarray) -> np.ndarray:
    """Per row KL(p_reference ‖ p_candidate) in nats."""
    log_p = log_softmax(np.atleast_2d(reference_logits))
    log_q = log_softmax(np.atleast_2d(candidate_logits))
    return np.sum(np.exp(log_p) * (log_p - log_q), axis=-1)


def topk_sets_equal(scores: np.ndarray, reference_selection: np.ndarray, candidate_selection: np.ndarray, k: int,
                    tolerance: float = 0.0) -> np.ndarray:
    """Per row: both selections are valid top-k sets of the reference `scores` -- they may differ only among the
    entries tied (within `tolerance`) with the k-th score. Selections hold entry indices, −1 = none."""
    return topk_equivalent(np.atleast_2d(scores), np.atleast_2d(reference_selection),
                           np.atleast_2d(candidate_selection), k, tolerance)


@dataclass(frozen=True)
class LogitsComparison:
    """Summary of candidate logits against reference logits [rows, vocab]."""

    rows: int
    relative_error: float
    top1_agreement: float
    kl_mean: float
    kl_max: float

    def passes(self, rtol: float, min_top1: float = 1.0, max_kl: float = float("inf")) -> bool:
        return self.relative_error <= rtol and self.top1_agreement >= min_top1 and self.kl_max <= max_kl


def compare_logits(reference: np.ndarray, candidate: np.ndarray) -> LogitsComparison:
    reference, candidate = np.atleast_2d(reference), np.atleast_2d(candidate)
    kl = kl_divergence(reference, candidate)
    return LogitsComparison(reference.shape[0], relative_error(reference, candidate),
                            top1_agreement(reference, candidate), float(kl.mean()), float(kl.max()))


@dataclass(frozen=True)
class DumpMismatch:
    """One dump array that disagrees: its key, the error measure and its value."""

    key: str
    measure: str
    value: float


def compare_dumps(reference: dict, candidate: dict, rtol: float, index_topk: int | None = None,
                  score_tolerance: float = 0.0) -> list[DumpMismatch]:
    """Compares the arrays both dumps hold, in layer order; top-k selections tie-aware against the reference's
    index scores of the same layer (needs `index_topk`), pool masks and integer arrays exactly, floats by
    relative_error ≤ rtol. The first mismatch locates the layer and mechanism."""
    mismatches = []
    for key in sorted(set(reference) & set(candidate), key=_dump_order):
        ref, cand = np.asarray(reference[key]), np.asarray(candidate[key])
        if ref.shape != cand.shape:
            mismatches.append(DumpMismatch(key, "shape", float("nan")))
        elif key.endswith(".topk") and index_topk is not None:
            scores_key = _scores_key(key, reference)
            if scores_key is None:
                continue
            ok = topk_sets_equal(reference[scores_key], ref, cand, index_topk, score_tolerance)
            if not ok.all():
                mismatches.append(DumpMismatch(key, "rows with different top-k sets", float(np.sum(~ok))))
        elif ref.dtype == bool or np.issubdtype(ref.dtype, np.integer):
            if not np.array_equal(ref, cand):
                mismatches.append(DumpMismatch(key, "differing elements", float(np.sum(ref != cand))))
        else:
            error = relative_error(ref, cand)
            if not error <= rtol:
                mismatches.append(DumpMismatch(key, "relative error", error))
    return mismatches


def _scores_key(topk_key: str, dump: dict) -> str | None:
    """A Reuse layer's selection is scored by its top-k source: the nearest index_scores at or below it."""
    layer = int(topk_key.split(".")[0].removeprefix("layer"))
    for source in range(layer, -1, -1):
        if f"layer{source}.index_scores" in dump:
            return f"layer{source}.index_scores"
    return None


def _dump_order(key: str):
    head = key.split(".")[0]
    return (int(head.removeprefix("layer")), key) if head.startswith("layer") else (-1, key)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reference.compare",
                                     description="Compare a candidate golden/dump .npz against the reference's.")
    parser.add_argument("reference")
    parser.add_argument("candidate")
    parser.add_argument("--rtol", type=float, default=1e-5, help="relative-error bound for float arrays")
    parser.add_argument("--index-topk", type=int, default=None, help="k for tie-aware top-k comparison")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    reference, candidate = dict(np.load(args.reference)), dict(np.load(args.candidate))
    report = {}
    for key in ("prefill_logits", "decode_logits"):
        if key in reference and key in candidate:
            report[key] = asdict(compare_logits(reference[key], candidate[key]))
    for key in ("tokens",):
        if key in reference and key in candidate:
            report["tokens_equal"] = bool(np.array_equal(reference[key], candidate[key]))
    index_topk = args.index_topk or (int(reference["index_topk"]) if "index_topk" in reference else None)
    mismatches = compare_dumps({k: v for k, v in reference.items() if k.startswith("layer")},
                               {k: v for k, v in candidate.items() if k.startswith("layer")}, args.rtol, index_topk)
    report["dump_mismatches"] = [asdict(m) for m in mismatches]
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key}: {value}")
    logits_ok = all(report[k]["relative_error"] <= args.rtol for k in ("prefill_logits", "decode_logits")
                    if k in report)
    return 0 if logits_ok and not mismatches and report.get("tokens_equal", True) else 1


if __name__ == "__main__":
    sys.exit(main())
