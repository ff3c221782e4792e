# shellcheck shell=bash
# Sourced by tools/bench_trees.sh and tools/prebuild_trees.sh: the CMake
# options of a tree's build, from DIMS and BLOCKS (CMake ;-lists, default
# "64;128" and "64") and EXTRA_CMAKE, in one place, so that a tree prebuilt
# here is the build bench_trees.sh would have made there.
# shellcheck disable=SC2034,SC2206  # used by the sourcing script; EXTRA_CMAKE is split into several options on purpose
tree_options=(-G Ninja -DCMAKE_BUILD_TYPE=Release "-DBLOCKATTN_HEAD_DIMS=${DIMS:-64;128}"
  "-DBLOCKATTN_BLOCK_SIZES=${BLOCKS:-64}" ${EXTRA_CMAKE:-})
