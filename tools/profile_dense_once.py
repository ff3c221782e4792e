"""One warm-up and one measured call of the dense forward at hdim64_seq4k
(causal, fp16), for a profiler to attach to:

    ncu -k regex:dense_forward_kernel -s 1 -c 1 --section ComputeWorkloadAnalysis \
        python3 tools/profile_dense_once.py

(docs/perf.md, "Dense forward", step 7, was read this way.)
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import blockattn  # noqa: E402

B, S, H, D = 4, 4096, 32, 64
q, k, v = (torch.randn(B, H, S, D, dtype=torch.float16, device="cuda") for _ in range(3))
for _ in range(2):
    blockattn.attention(q, k, v, causal=True)
torch.cuda.synchronize()
