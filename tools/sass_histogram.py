#!/usr/bin/env python3
"""Counts the SASS instructions of the kernels whose (demangled) name matches a
regex, by opcode, from `cuobjdump -sass lib | c++filt` output (gpu_check.sh's
sass step writes it to $OUT/sass.txt). Static counts: what the compiler
emitted, not what ran; a loop body counts once. For the instructions a tile
actually executes, profile (tools/profile_kernel.sh, then sass_stalls.py).

    python3 tools/sass_histogram.py gpu_out/sass.txt 'backward_kernel<__nv_bfloat16, 64, 64' [--top 25]
"""

import argparse
import collections
import re


def kernels(lines):
    """Yields (name, [opcode, ...]) per function of the listing."""
    name, ops = None, []
    for line in lines:
        if "Function :" in line:
            if name is not None:
                yield name, ops
            name, ops = line.split("Function :", 1)[1].strip(), []
            continue
        # An instruction line: /*0a40*/  @!P0 LDG.E.128 R4, desc[...] ;
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if name is not None and m:
            ops.append(m.group(1).split(".")[0])
    if name is not None:
        yield name, ops


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass")
    ap.add_argument("pattern", help="regex over the demangled kernel name")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    with open(args.sass, errors="replace") as f:
        for name, ops in kernels(f):
            if not re.search(args.pattern, name):
                continue
            counts = collections.Counter(ops)
            print(f"{name}\n  {len(ops)} instructions")
            print("  " + ", ".join(f"{op} {n}" for op, n in counts.most_common(args.top)))


if __name__ == "__main__":
    main()
