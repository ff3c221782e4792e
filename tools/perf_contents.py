#!/usr/bin/env python3
"""Writes the "Contents" section of docs/perf.md: every "## " section, grouped
by the issue its heading names ("(issue 10 ...", "(issues 10 and 11 ...").

    python3 tools/perf_contents.py           # rewrite the section in place
    python3 tools/perf_contents.py --check   # exit 1 if it is out of date (ctest perf_contents)
"""

import argparse
import re
import sys
from pathlib import Path

PERF = Path(__file__).resolve().parents[1] / "docs" / "perf.md"
ISSUES = {
    "7": "architecture",
    "8": "rotary and the projection layer",
    "9": "dense forward",
    "10": "no losing workload: small problems, GQA/MQA, tails",
    "11": "head dims and block sizes",
    "12": "packaging and reliability",
}
TITLE = "## Contents"


def github_anchor(heading, seen):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"


def contents(sections):
    seen, groups = {TITLE[3:].lower(): 1}, {}
    for heading in sections:
        m = re.search(r"\(issues? ([0-9 ,and]+)", heading)
        link = f"[{heading}](#{github_anchor(heading, seen)})"
        for issue in (re.findall(r"\d+", m.group(1)) if m else []) or ["-"]:
            groups.setdefault(issue, []).append(link)
    out = [TITLE, "", "Every section, grouped by the issue it served (a section may serve two); the",
           "sections themselves run in time order, the newest last. `tools/perf_contents.py`",
           "writes this list.", "", "- Before the issues were numbered, and general:"]
    out += ["  - " + link for link in groups.pop("-", [])]
    for issue in sorted(groups, key=int):
        out.append(f"- Issue {issue} ({ISSUES.get(issue, 'see the issue')}):")
        out += ["  - " + link for link in groups[issue]]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    lines = PERF.read_text().split("\n")
    if TITLE in lines:  # drop the old list: from its title to the next section
        start = lines.index(TITLE)
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
        old, body = lines[start:end], lines[:start] + lines[end:]
    else:
        start = next(i for i, line in enumerate(lines) if line.startswith("## "))
        old, body = [], lines
    sections = [line[3:] for line in body if line.startswith("## ")]
    new = contents(sections) + [""]
    if args.check:
        if new != old:
            print("docs/perf.md: the Contents section is out of date; run tools/perf_contents.py")
            return 1
        print(f"docs/perf.md: Contents lists all {len(sections)} sections")
        return 0
    PERF.write_text("\n".join(body[:start] + new + body[start:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
