#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, write the synthetic corpus, train the demo recipe.
# On a GPU: llama/demo as shipped (bf16, whole-step CUDA graph). Without one: the CPU fp32 reference
# backend on a smaller demo model (2 layers, hidden 128, seq 128, 150 steps: about two minutes), so the
# loss still falls well below the corpus's unigram entropy. Extra arguments are passed to `train`.
# The demo starts over on every run (checkpoint.overwrite=true replaces runs/demo/checkpoints); a
# plain `stepgraph train llama/demo` refuses to overwrite them (docs/configuration.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
BIN=${BUILD_DIR:-build}/src/stepgraph
if [[ ! -f data/synth/corpus.idx ]]; then
  "$BIN" data synth --out data/synth/corpus
fi
"$BIN" validate
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  exec "$BIN" train llama/demo checkpoint.overwrite=true "$@"
fi
echo "run.sh: no GPU here: training a smaller demo model on the CPU reference backend"
exec "$BIN" train llama/demo checkpoint.overwrite=true model.num_layers=2 model.hidden_size=128 model.ffn_hidden_size=352 \
  model.seq_length=128 dataset.seq_length=128 train.micro_batch_size=8 train.global_batch_size=8 \
  train.train_iters=150 scheduler.lr_warmup_iters=10 logger.log_interval=10 "$@"
