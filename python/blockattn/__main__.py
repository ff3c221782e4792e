"""`python -m blockattn`: an environment report for bug reports and setup checks.

Prints the package and library versions, where the library was loaded from,
whether the compiled eager fast path (blockattn._fast) is in use,
torch and its CUDA, the current GPU, the library's kernel table, and which
implementation each operation would run on this GPU for every built dtype and
head dim, the dense forward's included (backend queries launch nothing).
"""

import os
import sys

import torch

import blockattn
from blockattn import _fast, _lib, ops, workloads


def _paths_on_device(device: torch.device) -> list[str]:
    lines = []
    offsets = workloads.offsets_from_lengths([100, 28], device)
    for dtype in ops.SUPPORTED_DTYPES:
        for d in ops.SUPPORTED_HEAD_DIMS:
            for hq, hkv in ((4, 4), (8, 2)):
                q = torch.zeros(128, hq, d, dtype=dtype, device=device)
                k = torch.zeros(128, hkv, d, dtype=dtype, device=device)
                try:
                    fwd = blockattn.forward_backend(q, k, k.clone(), offsets)
                    bwd = blockattn.backward_backend(q, k, k.clone(), offsets)
                except RuntimeError as exc:
                    fwd = bwd = f"error: {exc}"
                name = str(dtype).removeprefix("torch.")
                lines.append(f"  {name:9s} D={d:<4d} Hq/Hkv={hq}/{hkv}:  forward {fwd:9s} backward {bwd}")
    return lines


def main() -> int:
    print(f"blockattn {blockattn.__version__} (library {_lib.LIBRARY_VERSION}, C ABI {_lib.ABI_VERSION})")
    print(f"  library: {blockattn.library_path}")
    print(f"  BLOCKATTN_FORCE_PORTABLE={os.environ.get('BLOCKATTN_FORCE_PORTABLE', '(unset)')}")
    fast = f"compiled ({_fast.MODULE.__file__})" if _fast.MODULE is not None else f"ctypes only: {_fast.WHY_NOT}"
    print(f"  eager fast path: {fast}")
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, torch CUDA {torch.version.cuda}")
    configs = blockattn.supported_configs()
    print(f"kernel table ({len(configs)} kernels; block size {ops.BLOCK_SIZE} by default):")
    for c in configs:
        mode = "auto" if c["automatic"] else "manual"
        fusion = "rotary" if c["rotary"] else "plain"
        print(f"  {c['backend']:9s} {c['operation']:9s} {c['dtype']}  D={c['head_dim']:<4d} "
              f"block={c['block_size']:<4d} {fusion:6s} {mode}")
    print(f"dense forward kernels ({len(_lib.DENSE_CONFIGS)}; each causal and not):")
    for c in _lib.DENSE_CONFIGS:
        print(f"  {_lib.BACKEND_NAMES[c.backend]:9s} {_lib.DTYPE_NAMES[c.dtype]}  D={c.head_dim:<4d} "
              f"{'auto' if c.automatic else 'manual'}")
    if not torch.cuda.is_available():
        print("no CUDA device visible to torch: which path each call takes is not queried")
        return 0
    device = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(device)
    print(f"device {device}: {props.name}, compute capability {props.major}.{props.minor}, "
          f"{props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB")
    print("paths kAuto takes on this device:")
    for line in _paths_on_device(device):
        print(line)
    for d in blockattn.DENSE_HEAD_DIMS:
        q = torch.zeros(1, 2, 16, d, dtype=torch.float16, device=device)
        try:
            path = blockattn.dense_backend(q, q, q)
        except RuntimeError as exc:
            path = f"error: {exc}"
        print(f"  dense forward D={d:<4d} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
