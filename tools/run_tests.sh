#!/usr/bin/env bash
# Builds everything (CUDA included) and runs the test suite. Tests that need a
# GPU skip, with the reason printed, on machines without one; the Python suite
# runs where PyTorch with CUDA is importable.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/configure.sh
cmake --build "$BUILD_DIR" -j "$(nproc)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2
# ctest lists skipped tests but not why; say it once.
"$BUILD_DIR"/tests/test_gpu --gtest_filter='ScheduleKernel.*' | grep -m1 "GPU test skipped" || true

if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  PYTHONPATH=python BLOCKATTN_LIBRARY="$PWD/$BUILD_DIR/libblockattn.so" python3 -m pytest -q tests/python
else
  echo "Python tests skipped: PyTorch with CUDA is not importable here"
fi
