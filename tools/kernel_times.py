#!/usr/bin/env python3
"""Where a call's time goes: each implementation's forward on one workload,
timed as bench/compare.py times it (median, L2 flushed between runs), beside
the mean duration of every kernel it launched under torch.profiler. What the
kernels do not account for is launch gaps and host waits.

    python3 tools/kernel_times.py headdim-d256-h2 [--bwd] [--block-size 128]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import compare  # noqa: E402

RUNS = 20


def kernel_means_us(fn) -> list[tuple[str, float]]:
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(RUNS):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        if e.device_type == torch.autograd.DeviceType.CUDA and "elementwise" not in e.key and "zero" not in e.key:
            total_us = getattr(e, "device_time_total", None) or e.cuda_time_total
            rows.append((e.key, total_us / RUNS))
    return rows


def main():
    name = sys.argv[1]
    direction = "bwd" if "--bwd" in sys.argv else "fwd"
    block_size = int(sys.argv[sys.argv.index("--block-size") + 1]) if "--block-size" in sys.argv else compare.BLOCK
    case = compare.make_case(compare.wl.workload(name), seed=0, block_size=block_size)
    for label, make in (("blockattn", compare.make_blockattn), ("FA2 varlen", compare.make_fa2)):
        fn = getattr(make(case), direction)
        total_us = 1000 * compare.bench_ms(fn)
        rows = kernel_means_us(fn)
        kernels_us = sum(us for _, us in rows)
        print(f"{label} {direction} on {name}: {total_us:.1f} us a call, kernels {kernels_us:.1f} us, "
              f"the rest {total_us - kernels_us:.1f} us")
        for key, us in rows:
            print(f"    {us:9.1f} us  {key[:110]}")


if __name__ == "__main__":
    main()
