"""Cross-language check of the workloads: python/blockattn/workload_defs.py
must define the workloads the C++ benchmark defines and reproduce the lengths
its generator prints (tests/print_workload_lengths.cpp).

    python3 tests/check_workload_lengths.py <print_workload_lengths binary>

Loads workload_defs.py by path, so neither torch nor the built library is needed.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    defs = load("blockattn_workload_defs", ROOT / "python" / "blockattn" / "workload_defs.py")
    python_side = {w["name"]: w for w in defs.workload_params() + defs.extra_params()}
    out = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout
    cpp_names = []
    for line in out.splitlines():
        name, batch, hq, hkv, d, max_len, fill, total, first, last = line.split()
        cpp_names.append(name)
        w = python_side.get(name)
        if w is None:
            print(f"{name}: defined in C++ but not in workload_defs.py")
            return 1
        want = (int(batch), int(hq), int(hkv), int(d), int(max_len), float(fill))
        got = (w["batch"], w["num_q_heads"], w["num_kv_heads"], w["head_dim"], w["max_len"], w["fill"])
        if got != want:
            print(f"{name}: python parameters {got} != C++ {want}")
            return 1
        lengths = defs.sequence_lengths_list(w["batch"], w["max_len"], w["fill"], seed=0)
        if (sum(lengths), lengths[0], lengths[-1]) != (int(total), int(first), int(last)):
            print(f"{name}: python lengths (total, first, last) = {(sum(lengths), lengths[0], lengths[-1])} "
                  f"!= C++ {(total, first, last)}")
            return 1
    if cpp_names != list(python_side):
        print(f"workload lists differ:\n  C++    {cpp_names}\n  python {list(python_side)}")
        return 1
    print(f"{len(cpp_names)} workloads: Python and C++ definitions and generators agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
