# Sourced by the build scripts: puts nvcc on PATH if needed and configures
# $BUILD_DIR (default build/, Release, Ninja when available).
BUILD_DIR=${BUILD_DIR:-build}
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
