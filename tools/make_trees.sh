#!/usr/bin/env bash
# Source trees for tools/bench_trees.sh, made here (no GPU needed): one per
# argument, NAME or NAME:PATCH, each a `git archive` of REV (default HEAD)
# into build_trees/NAME (ignored; the device tool carries it with
# carry ["build_trees"]), with docs/experiments/PATCH.patch applied.
#
#   tools/make_trees.sh main ahead:sm90-slots-read-ahead gclaims:grouped-claimed-pairs
#
# A patch that does not apply stops the script, naming it; trees made before
# it stay.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,11p' "$0"; exit 2; }
rev=${REV:-HEAD}
for spec in "$@"; do
  name=${spec%%:*}
  patch_name=${spec#*:}
  [ "$patch_name" = "$spec" ] && patch_name=""
  tree=build_trees/$name
  rm -rf "$tree"
  mkdir -p "$tree"
  git archive "$rev" | tar -x -C "$tree"
  if [ -n "$patch_name" ]; then
    if ! patch -s -d "$tree" -p1 --no-backup-if-mismatch <"docs/experiments/$patch_name.patch"; then
      echo "make_trees: docs/experiments/$patch_name.patch does not apply to $rev" >&2
      exit 1
    fi
  fi
  echo "$tree: $rev${patch_name:+ + $patch_name.patch}"
done
