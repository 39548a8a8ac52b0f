#!/usr/bin/env bash
# Everything GPU in one call, for the H200 machine: the GPU tests, the graph-mode exactness check,
# the benchmarks and the PyTorch comparison; prints a short table last.
#
#   bash scripts/gpu.sh [tests|bench|torch|parity|all]...      (default: all)
#
# Expects a build made for sm_90 in ${BUILD_DIR:-build} (scripts/build.sh here, or on the GPU machine:
# the binaries link only CUDA libraries dynamically). Logs and JSON go to ${RESULTS:-gpu-results}.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
OUT=${RESULTS:-gpu-results}
mkdir -p "$OUT"
SG="$B/src/stepgraph"
parts=("$@")
[[ ${#parts[@]} -eq 0 ]] && parts=(all)
want() { for p in "${parts[@]}"; do [[ $p == all || $p == "$1" ]] && return 0; done; return 1; }
summary=()
record() { summary+=("$(printf '%-34s %s' "$1" "$2")"); }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"

if want tests; then
  start=$(date +%s)
  "$B/tests/stepgraph_gpu_tests" --gtest_output=json:"$OUT/gpu_tests.json" ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} \
    >"$OUT/gpu_tests.log" 2>&1
  rc=$?
  grep -E "^\[  (FAILED|PASSED) |^\[==========\]" "$OUT/gpu_tests.log" | tail -4
  grep -E "^\[  FAILED  \]" "$OUT/gpu_tests.log" | sort -u | head -40
  record "GPU tests" "rc=$rc ($(grep -c '^\[       OK \]' "$OUT/gpu_tests.log") ok, $(grep -c '^\[  FAILED  \].*ms)' "$OUT/gpu_tests.log") failed, $(( $(date +%s) - start )) s)"
fi

if want bench; then
  if [[ -x "$B/bench/graph_runtime_bench" ]]; then
    "$B/bench/graph_runtime_bench" --steps 200 --warmup 10 2>&1 | tee "$OUT/bench_graph_runtime.txt" | tail -12
    record "toy step bench" "see bench_graph_runtime.txt"
  fi
  if [[ -x "$B/bench/grouped_gemm_bench" ]]; then
    "$B/bench/grouped_gemm_bench" 2>&1 | tee "$OUT/bench_grouped_gemm.txt" | tail -16
    record "grouped GEMM bench" "rc=${PIPESTATUS[0]} (bench_grouped_gemm.txt)"
  fi
  for r in tiny small 1b; do
    "$SG" bench -m llama -mr "$r" -g h200 -c bf16 -ng 1 --plain \
      --compare none,local,transformer_engine:attn,transformer_engine:attn+mlp \
      --json "$OUT/bench_$r.json" --trace "$OUT/trace_$r.json" >"$OUT/bench_$r.txt" 2>&1
    record "stepgraph bench $r" "rc=$?"
    sed -n '/^mode /,$p' "$OUT/bench_$r.txt"
  done
  python3 bench/kernel_table.py "$OUT/trace_1b.json" --mode none --markdown >"$OUT/kernels_1b.md" 2>&1
  record "kernel table 1b" "rc=$? (kernels_1b.md)"
fi

if want torch; then
  for r in tiny small 1b; do
    PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-420}" python3 bench/torch_reference.py --recipe "recipes/llama/$r.yaml" --steps "${TORCH_STEPS:-30}" --warmup 10 ${TORCH_MODES:+--modes $TORCH_MODES} \
      --json "$OUT/torch_$r.json" >"$OUT/torch_$r.txt" 2>&1
    record "torch reference $r" "rc=$?"
    tail -10 "$OUT/torch_$r.txt"
  done
fi

if want parity; then
  if [[ -f tests/model/hf_parity.py ]]; then
    python3 tests/model/hf_parity.py --stepgraph "$SG" --out "${PARITY_DIR:-/tmp/stepgraph_hf_parity}" 2>&1 | tee "$OUT/hf_parity.txt" | tail -8
    record "HF transformers parity" "rc=${PIPESTATUS[0]}"
  fi
fi

echo
echo "==== summary ($(date -u +%FT%TZ)) ===="
printf '%s\n' "${summary[@]}"
