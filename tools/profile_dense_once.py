"""One warm-up and one measured call of the dense forward (fp16) for a
profiler to attach to; by default hdim64_seq4k causal:

    ncu -k regex:dense_forward_kernel -s 1 -c 1 --section ComputeWorkloadAnalysis \
        python3 tools/profile_dense_once.py [B S H D causal|full]

(docs/perf.md, "Dense forward", step 7, was read this way.)
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import blockattn  # noqa: E402

B, S, H, D = (int(x) for x in sys.argv[1:5]) if len(sys.argv) > 4 else (4, 4096, 32, 64)
causal = sys.argv[5] != "full" if len(sys.argv) > 5 else True
q, k, v = (torch.randn(B, H, S, D, dtype=torch.float16, device="cuda") for _ in range(3))
for _ in range(2):
    blockattn.attention(q, k, v, causal=causal)
torch.cuda.synchronize()
