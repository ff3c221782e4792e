# shellcheck shell=bash
# Sourced by tools/dense_ab.sh and tools/dense_trees.sh: one run of
# bench/dense_bench.py against the library of build folder $1, writing
# $2.json and $2.log (the tail of the log printed where the run fails).
# CONFIGS, MODES (default causal,full), DTYPES (default fp16) and
# BENCH_ROUNDS (its --rounds, default 1) as the callers document them.
dense_run() {
  PYTHONPATH=python BLOCKATTN_LIBRARY="$PWD/$1/libblockattn.so" timeout 300 \
    python3 bench/dense_bench.py ${CONFIGS:+--configs "$CONFIGS"} --modes "${MODES:-causal,full}" \
    --dtypes "${DTYPES:-fp16}" --rounds "${BENCH_ROUNDS:-1}" --no-flex --json "$2.json" >"$2.log" 2>&1 ||
    tail -5 "$2.log"
}
