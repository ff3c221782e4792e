#!/usr/bin/env python3
"""Checks the include rules of docs/architecture.md: every quoted #include in
src/, include/, support/ and bench/ names a header of a folder its own folder
may depend on. Run by ctest (include_rules), so CI enforces the layering.

    tools/check_includes.py [repo root]

Exit status 1 with one line per violation, 0 when every include is allowed.
"""

import re
import sys
from pathlib import Path

# folder -> folders (or single headers) its files may include, besides the
# public headers (blockattn/...) and their own folder. Lower layers first.
ALLOWED = {
    "src/schedule": set(),
    "src/core": {"schedule", "blockattn_kernel_table.inc", "blockattn_dense_kernel_table.inc"},
    "src/common": {"core", "schedule"},
    "src/tile": {"common", "core", "schedule"},
    "src/sm80": {"tile", "common", "core", "schedule", "blockattn_kernel_table.inc", "blockattn_dense_kernel_table.inc"},
    "src/sm90": {"tile", "common", "core", "schedule", "blockattn_kernel_table.inc", "blockattn_dense_kernel_table.inc"},
    "src/backends": {"core", "schedule", "sm80/backend.h", "sm90/backend.h"},
    "src/api": {"backends", "core", "schedule"},
    "src/reference": {"schedule"},
    "src/layer": {"core"},  # above the public API: blockattn/*.h plus status messages
    "include/blockattn": set(),
    "support": set(),
    "bench": {"support", "reference", "schedule"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SOURCE_SUFFIXES = {".h", ".cuh", ".cpp", ".cu"}


def owner(path: Path, root: Path) -> str | None:
    rel = path.relative_to(root).as_posix()
    matches = [folder for folder in ALLOWED if rel.startswith(folder + "/")]
    return max(matches, key=len) if matches else None


def allowed(folder: str, target: str) -> bool:
    if target.startswith("blockattn/"):
        return True  # the public API
    own = folder.split("/", 1)[1] if folder.startswith("src/") else folder
    if target.startswith(own + "/"):
        return True
    for dep in ALLOWED[folder]:
        if target == dep or target.startswith(dep + "/"):
            return True
    return False


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    violations, checked = [], 0
    for path in sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES):
        if any(part in {"build", ".git"} or part.startswith("build") for part in path.relative_to(root).parts):
            continue
        folder = owner(path, root)
        if folder is None:
            continue
        for target in INCLUDE.findall(path.read_text(errors="replace")):
            checked += 1
            if not allowed(folder, target):
                violations.append(f"{path.relative_to(root)}: includes \"{target}\", which {folder}/ may not")
    for v in violations:
        print(v)
    if not checked:
        print("no includes found: wrong root?")
        return 1
    print(f"{checked} includes checked, {len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
