# Sourced by the build scripts: puts nvcc on PATH if needed and configures
# $BUILD_DIR (default build/, Release, Ninja when available), with any
# extra CMake arguments in $CMAKE_ARGS (e.g. -DBLOCKATTN_MANUAL_KERNELS=ON).
BUILD_DIR=${BUILD_DIR:-build}
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# shellcheck disable=SC2086  # CMAKE_ARGS is a list of words
cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
