#!/usr/bin/env bash
# Source trees for tools/bench_trees.sh, made here (no GPU needed): one per
# argument, NAME or NAME:PATCH, each a `git archive` of REV (default HEAD)
# into build_trees/NAME (ignored; the device tool carries it with
# carry ["build_trees"]), with docs/experiments/PATCH.patch applied;
# NAME:P1+P2 applies several, in order (patches measured alone, then together).
#
#   tools/make_trees.sh main ahead:sm90-slots-read-ahead gclaims:grouped-claimed-pairs
#
# A patch that does not apply stops the script, naming it; trees made before
# it stay.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,12p' "$0"; exit 2; }
rev=${REV:-HEAD}
for spec in "$@"; do
  name=${spec%%:*}
  patch_name=${spec#*:}
  [ "$patch_name" = "$spec" ] && patch_name=""
  tree=build_trees/$name
  rm -rf "$tree"
  mkdir -p "$tree"
  git archive "$rev" | tar -x -C "$tree"
  IFS=+ read -r -a patches <<<"$patch_name"
  for one in "${patches[@]}"; do
    if ! patch -s -d "$tree" -p1 --no-backup-if-mismatch <"docs/experiments/$one.patch"; then
      echo "make_trees: docs/experiments/$one.patch does not apply to $rev (tree $name)" >&2
      exit 1
    fi
  done
  echo "$tree: $rev${patch_name:+ + ${patch_name//+/.patch + }.patch}"
done
