#!/usr/bin/env python3
"""The peer of bench/bench_topk.cu: torch.topk on the same shapes, on the same GPU, in the same run.

Usage: bench_topk_torch.py BENCH_LOG
Reads the bench_topk result lines (FKV_BENCH {"program":"bench_topk","kernel":"topk512_<type>_n<N>_b<rows>",
"value":<us>}) from BENCH_LOG, times torch.topk(x, 512, dim=-1) on a [rows, N] tensor of uniform random
scores of that type (median of 25 CUDA-event-timed calls after 3 warm-ups, as gpu_bench.cuh does), and prints
ours vs torch per shape: the ratio is torch time / our time (goal >= 5). torch is timed with sorted=False (its
cheapest mode: values in no particular order) and sorted=True (values sorted descending); our output is
sorted by entry index, which is what the engine needs. Exits 0 when torch or the GPU is missing (nothing to
compare), printing why.
"""
import json
import re
import statistics
import sys

K = 512
REPS, WARMUP = 25, 3


def our_results(log_path):
    results = {}
    pattern = re.compile(r"^FKV_BENCH (\{.*\})$")
    with open(log_path, encoding="utf-8", errors="replace") as log:
        for line in log:
            match = pattern.match(line.strip())
            if not match:
                continue
            record = json.loads(match.group(1))
            kernel = record.get("kernel", "")
            if record.get("program") == "bench_topk" and kernel.startswith("topk512_"):
                results[kernel] = record["value"]
    return results


def median_us(torch, fn):
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    try:
        import torch
    except ImportError:
        print("bench_topk_torch: torch is not installed; no peer comparison")
        return 0
    if not torch.cuda.is_available():
        print("bench_topk_torch: no CUDA device for torch; no peer comparison")
        return 0
    ours = our_results(sys.argv[1])
    if not ours:
        print("bench_topk_torch: no bench_topk results in", sys.argv[1])
        return 1
    print(f"bench_topk_torch on {torch.cuda.get_device_name()} (torch {torch.__version__})")
    print(f"  {'shape':30} {'ours us':>9} {'torch us':>9} {'sorted us':>9} {'ratio':>7}")
    ratios = []
    for kernel, our_us in ours.items():
        _, dtype_name, n_field, b_field = kernel.split("_")
        n, rows = int(n_field[1:]), int(b_field[1:])
        dtype = torch.float32 if dtype_name == "fp32" else torch.bfloat16
        x = (torch.rand(rows, n, device="cuda", dtype=torch.float32) * 2 - 1).to(dtype)
        unsorted_us = median_us(torch, lambda: torch.topk(x, K, dim=-1, sorted=False))
        sorted_us = median_us(torch, lambda: torch.topk(x, K, dim=-1, sorted=True))
        ratio = unsorted_us / our_us
        ratios.append(ratio)
        print(f"  {kernel:30} {our_us:9.1f} {unsorted_us:9.1f} {sorted_us:9.1f} {ratio:6.2f}x")
        print("FKV_BENCH " + json.dumps({"program": "bench_topk_torch", "kernel": kernel, "ours_us": our_us,
                                        "torch_us": round(unsorted_us, 2), "torch_sorted_us": round(sorted_us, 2),
                                        "ratio": round(ratio, 3)}))
    print(f"  ratio torch.topk(sorted=False) / ours: min {min(ratios):.2f}x, median {statistics.median(ratios):.2f}x,"
          f" max {max(ratios):.2f}x (goal >= 5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
