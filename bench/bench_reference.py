#!/usr/bin/env python3
"""bench_reference — the work of bench_cpu_engine, timed in the numpy reference model (tests/reference).

  bench/bench_reference.py CHECKPOINT_DIR [--runs N] [--prefill 96,512] [--decode 64] [--decode-prompt 32]
                           [--numerics clean,faithful]

Same prompt rule (token i = (1 + 7919 i) mod vocab), same prefill (one exact forward of T tokens on an empty
state) and decode (greedy steps of one token after a short prefill, argmax included), median of --runs runs after
one untimed warm-up forward. The reference computes the logits of every row of a forward; that is its normal
cost and is counted. Output: a table, then one "FKV_BENCH {...}" JSON line per result (bench/run-cpu-bench reads
them beside bench_cpu_engine's).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from reference.model import Model  # noqa: E402
from reference.weights import load_checkpoint  # noqa: E402

PROGRAM = "bench_reference"


def bench_tokens(count: int, vocab: int) -> list[int]:
    return [(1 + 7919 * i) % vocab for i in range(count)]


def cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def emit(result: dict) -> None:
    rate = result["tok_s"]
    print(f"  {result['numerics']:<9} {result['phase']:<8} {result['detail']:<11} {result['tokens']:>7} "
          f"{result['median_s'] * 1e3:>11.3f} ms {rate:10.1f} tok/s")
    print("FKV_BENCH " + json.dumps({"program": PROGRAM, **result}), flush=True)


def median_seconds(runs: int, body) -> float:
    return statistics.median(body() for _ in range(runs))


def time_prefill(model: Model, mode: str, length: int, runs: int) -> dict:
    prompt = bench_tokens(length, model.config.vocab_size)

    def once() -> float:
        state = model.new_state()
        start = time.perf_counter()
        model.forward(state, prompt)
        return time.perf_counter() - start

    median = median_seconds(runs, once)
    return {"numerics": mode, "phase": "prefill", "detail": "exact", "tokens": length, "median_s": median,
            "tok_s": length / median}


def time_decode(model: Model, mode: str, steps: int, prompt_length: int, runs: int) -> dict:
    prompt = bench_tokens(prompt_length, model.config.vocab_size)

    def once() -> float:
        state = model.new_state()
        logits = model.forward(state, prompt)[-1]
        start = time.perf_counter()
        for _ in range(steps):
            logits = model.forward(state, [int(np.argmax(logits))])[-1]
        return time.perf_counter() - start

    median = median_seconds(runs, once)
    return {"numerics": mode, "phase": "decode", "detail": f"after {prompt_length}", "tokens": steps,
            "median_s": median, "tok_s": steps / median}


def int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--prefill", type=int_list, default=[96, 512])
    parser.add_argument("--decode", type=int, default=64)
    parser.add_argument("--decode-prompt", type=int, default=32)
    parser.add_argument("--numerics", default="clean,faithful")
    args = parser.parse_args(argv)
    modes = [m for m in args.numerics.split(",") if m]
    if args.runs < 1 or any(m not in ("clean", "faithful") for m in modes):
        parser.error("--runs must be >= 1 and --numerics a list of clean, faithful")

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"{PROGRAM} on {cpu_model()} (numpy {np.__version__}, BLAS threads {threads}), {date}, "
          f"checkpoint {args.checkpoint}, median of {args.runs} runs")
    print("FKV_BENCH " + json.dumps({"program": PROGRAM, "cpu": cpu_model(), "numpy": np.__version__,
                                     "blas_threads": threads, "runs": args.runs, "checkpoint": args.checkpoint,
                                     "date": date}))
    config, weights = load_checkpoint(args.checkpoint)
    for mode in modes:
        model = Model(config, weights, mode)
        model.forward(model.new_state(), bench_tokens(16, config.vocab_size))  # warm-up
        for length in args.prefill:
            emit(time_prefill(model, mode, length, args.runs))
        if args.decode > 0:
            emit(time_decode(model, mode, args.decode, args.decode_prompt, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
