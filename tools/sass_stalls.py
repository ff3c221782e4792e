#!/usr/bin/env python3
"""Reads the per-instruction SASS export of an ncu profile (tools/profile_kernel.sh,
NAME.sass.csv) and prints where the kernel's warps spent their sampled time:

  * totals by stall reason and by opcode;
  * the instructions with the most samples, with their two main reasons;
  * the stretches between synchronization points (BAR.SYNC, WARPGROUP.DEPBAR),
    with their samples and their instruction mix: a tile's phases, in order;
  * instructions executed per tile and warp, by opcode, where --per N gives the
    executions of a once-per-tile instruction (e.g. 4 x the tiles for a
    consumer warpgroup's four warps).

    python3 tools/sass_stalls.py gpu_out/bwd.sass.csv [--top 30] [--per 46528]
"""

import argparse
import collections
import csv

SYNC_POINTS = ("BAR.SYNC", "WARPGROUP.DEPBAR", "EXIT")


def number(text):
    try:
        return float(text)
    except ValueError:
        return 0.0


def opcode(source):
    words = source.split()
    if not words:
        return ""
    op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return op.split(".")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--per", type=float, default=0, help="executions of a once-per-tile instruction")
    args = ap.parse_args()

    rows = list(csv.reader(open(args.csv)))
    header_at = next(i for i, r in enumerate(rows) if "Source" in r and "Address" in r)
    header = rows[header_at]
    data = [r for r in rows[header_at + 1 :] if len(r) >= len(header) - 1]
    col = {name: i for i, name in enumerate(header)}
    samples, source, executed = (col[n] for n in ("Warp Stall Sampling (All Samples)", "Source", "Instructions Executed"))
    reasons = [n for n in header if n.startswith("stall_") and "Not Issued" not in n]

    total = sum(number(r[samples]) for r in data)
    by_reason, by_op = collections.Counter(), collections.Counter()
    for r in data:
        by_op[opcode(r[source])] += number(r[samples])
        for n in reasons:
            by_reason[n[6:]] += number(r[col[n]])
    print(f"{total:.0f} samples")
    print("by reason: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by_reason.most_common(10)))
    print("by opcode: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by_op.most_common(12)))

    print(f"\ntop {args.top} instructions (index, samples, executions, instruction, main reasons)")
    top = sorted(range(len(data)), key=lambda i: -number(data[i][samples]))[: args.top]
    for i in sorted(top):
        r = data[i]
        main_reasons = sorted(((number(r[col[n]]), n[6:]) for n in reasons), reverse=True)[:2]
        why = ", ".join(f"{n} {v:.0f}" for v, n in main_reasons if v)
        print(f"{i:6d} {number(r[samples]):7.0f} {r[executed]:>10s}  {r[source].strip()[:64]:64s} {why}")

    print("\nstretches between sync points (first-last index, samples, ends with, instruction mix)")
    start, acc = 0, 0.0
    for i, r in enumerate(data):
        acc += number(r[samples])
        if any(s in r[source] for s in SYNC_POINTS) or i == len(data) - 1:
            mix = collections.Counter(opcode(data[j][source]) for j in range(start, i + 1))
            if acc >= total * 0.005:
                ops = ", ".join(f"{k} {v}" for k, v in mix.most_common(5))
                print(f"{start:6d}-{i:<6d} {acc:7.0f} ({100 * acc / total:4.1f}%)  {r[source].strip()[:36]:36s} {ops}")
            start, acc = i + 1, 0.0

    if args.per:
        per_op = collections.Counter()
        for r in data:
            per_op[opcode(r[source])] += number(r[executed]) / args.per
        print(f"\ninstructions per tile and warp: {sum(per_op.values()):.0f}")
        print(", ".join(f"{k} {v:.0f}" for k, v in per_op.most_common(16)))


if __name__ == "__main__":
    main()
