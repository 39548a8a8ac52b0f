#!/usr/bin/env bash
# Configures and builds everything (CUDA code included) into ${BUILD_DIR:-build}.
# Uses ccache when it is installed (paths relative to the checkout, so worktrees share hits).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-20G}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@"
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" ${BUILD_TARGETS:-}
