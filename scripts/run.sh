#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, write the synthetic corpus, train the demo recipe
# (GPU with CUDA graphs when there is one, otherwise the CPU reference backend).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
BIN=${BUILD_DIR:-build}/src/stepgraph
if [[ ! -f data/synth/corpus.idx ]]; then
  "$BIN" data synth --out data/synth/corpus
fi
"$BIN" validate
exec "$BIN" train llama/demo "$@"
