#!/usr/bin/env python3
"""Peer of bench_sparse_attention.cu: the same sparse-attention decode math in torch on the GPU, on tensors that
are already dequantized to BF16 (torch has no FP8/NVFP4 KV records): per query row gather its 128 window rows and
512 selected entries (from a 1M-entry pool), S = Q·Kᵀ·scale, softmax with the per-head sink column, P -> BF16,
O = P·V. Times median of 25 CUDA-event-timed runs after warm-up; prints a table, "FKV_BENCH {...}" lines and,
given the C++ bench's log (--ours), the speed ratio of our fastest variant over torch per batch.
"""
import argparse
import json
import math
import re
import sys

HEADS, DIM, WINDOW, TOPK, POOL = 64, 512, 128, 512, 1 << 20
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 132, 256)
PROGRAM = "bench_sparse_attention_torch"


def flop_per_query():
    return 2.0 * HEADS * DIM * (WINDOW + TOPK) * 2.0


def median_ms(torch, fn, reps=25, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def our_times(log_path):
    """batch -> the fastest variant's microseconds from the C++ bench's FKV_BENCH lines."""
    ours = {}
    pattern = re.compile(r"sparse_attention_\w+_b(\d+)_us$")
    try:
        with open(log_path, encoding="utf-8") as log:
            for line in log:
                if not line.startswith("FKV_BENCH "):
                    continue
                record = json.loads(line[len("FKV_BENCH "):])
                match = pattern.match(record.get("kernel", ""))
                if record.get("program") == "bench_sparse_attention" and match:
                    batch = int(match.group(1))
                    ours[batch] = min(ours.get(batch, float("inf")), record["value"])
    except OSError as error:
        print(f"(no C++ results to compare: {error})")
    return ours


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ours", help="log of bench_sparse_attention (FKV_BENCH lines) to compare with")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print(f"{PROGRAM}: torch is not installed")
        return 1
    if not torch.cuda.is_available():
        print(f"{PROGRAM}: no CUDA device")
        return 1
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    print(f"{PROGRAM} on {name}, torch {torch.__version__}")
    generator = torch.Generator(device=device).manual_seed(1)
    bf16 = torch.bfloat16
    window_pool = torch.randn(max(BATCHES) * WINDOW, DIM, device=device, generator=generator).to(bf16)
    entry_pool = torch.randn(POOL, DIM, device=device, generator=generator).to(bf16)
    q_all = torch.randn(max(BATCHES), HEADS, DIM, device=device, generator=generator).to(bf16)
    sink = torch.randn(HEADS, device=device, generator=generator)
    scale = 1.0 / math.sqrt(DIM)
    ours = our_times(args.ours) if args.ours else {}

    print(f"  {'decode':34s} {'value':>10s} {'unit':7s} {'ours/torch speed':>16s}")
    for batch in BATCHES:
        q = q_all[:batch]
        window_idx = torch.arange(batch * WINDOW, device=device).view(batch, WINDOW)
        select_idx = torch.randint(0, POOL, (batch, TOPK), device=device, generator=generator)

        def attention():
            keys = torch.cat([window_pool[window_idx], entry_pool[select_idx]], dim=1)  # [B, 640, 512]
            logits = torch.matmul(q, keys.transpose(1, 2)).float() * scale  # [B, 64, 640]
            logits = torch.cat([logits, sink.view(1, HEADS, 1).expand(batch, HEADS, 1)], dim=-1)
            p = torch.softmax(logits, dim=-1)[..., :-1].to(bf16)
            return torch.matmul(p, keys)  # [B, 64, 512]

        ms = median_ms(torch, attention)
        tflops = batch * flop_per_query() / (ms * 1e-3) / 1e12
        ours_us = ours.get(batch)
        ratio = (ms * 1e3) / ours_us if ours_us else float("nan")
        kernel = f"torch_sparse_attention_b{batch}"
        print(f"  {kernel + '_us':34s} {ms * 1e3:10.1f} {'us':7s}")
        print(f"  {kernel:34s} {tflops:10.1f} {'TFLOP/s':7s} {ratio:15.2f}x")
        for value, unit in ((ms * 1e3, "us"), (tflops, "TFLOP/s")):
            suffix = "_us" if unit == "us" else ""
            record = {"program": PROGRAM, "kernel": kernel + suffix, "value": round(value, 2), "unit": unit,
                      "fraction": round(ratio, 4) if ratio == ratio else None}
            print("FKV_BENCH " + json.dumps(record, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
