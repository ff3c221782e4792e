#!/usr/bin/env python3
"""FlashAttention-2 varlen's forward (PyTorch's flash kernel, one cu_seqlens
entry per 64-token block, as bench/compare.py runs it) on one workload, a few
times: launches for a profiler to catch past the first.

    python3 tools/fa2_forward_once.py headdim-d256-h2

tools/dram_bytes.py --fa2 runs it under ncu beside bench_blockattn's forward.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import torch  # noqa: E402

import compare  # noqa: E402


def main():
    case = compare.make_case(compare.wl.workload(sys.argv[1]), seed=0)
    fa2 = compare.make_fa2(case)  # runs the forward once (its saved outputs)
    for _ in range(3):
        fa2.fwd()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
