#!/usr/bin/env bash
# The test command: set up, build everything, run the CPU tests (GPU tests carry the ctest label "gpu").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest -LE gpu --output-on-failure -j "${JOBS:-$(nproc)}"
