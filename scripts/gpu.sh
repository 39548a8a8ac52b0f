#!/usr/bin/env bash
# Everything GPU in one call, for the H200 machine: the GPU tests, the graph-mode exactness check,
# the benchmarks, the PyTorch comparison and the Hugging Face parity checks (training loss and greedy
# generation); prints a short table last.
#
#   bash scripts/gpu.sh [tests|bench|torch|parity|generate_parity|edge_configs|dp|dp_moe|sanitize|recompute|gemm_power|
#                        lm_head_chunk|generate_bench|all]...
#   RECOMPUTE_MODES=local,local+recompute_full RECOMPUTE_STEPS=10 bash scripts/gpu.sh recompute   # other --compare modes
#   BENCH_RECIPES="moe/small_moe hybrid/small_hybrid" bash scripts/gpu.sh bench   # family/recipe items; BENCH_MODES overrides the modes
#   TORCH_MODELS="small_moe hybrid ssd" bash scripts/gpu.sh torch   # only these PyTorch references: families
#   (llama moe hybrid ssd sdpa, the default all five) or recipe names; TORCH_MODES, TORCH_STEPS, TORCH_MODE_TIMEOUT,
#   TORCH_MOE_IMPLS, TORCH_HYBRID_IMPLS narrow them further
#   TORCH_DETERMINISTIC=1 TORCH_MODELS=llama bash scripts/gpu.sh torch   # PyTorch held to stepgraph's determinism
#
# Default: all = tests bench torch parity dp. sanitize, recompute, gemm_power, lm_head_chunk and generate_bench run
# only when named (minutes each).
# edge_configs: configurations at the edges of what validation accepts (widths and vocabularies that are not tile
#   multiples, 2- and 33-token sequences, graph warmup 0, capacity factor 0.01, top-k = experts, 3 Mamba heads,
#   kv_channels x heads != hidden, evaluation and dropout with recompute inside graphs, mixed MoE layers), 6 steps
#   each with graphs on: each must train or be refused with an "error:" line, never crash (edge_configs.txt).
# generate_parity: parity's greedy-generation check alone, at each of GENERATE_PARITY_PROMPTS prompts a batch
#   (default "4 8": decoding steps on the matrix-vector kernel's fp32 math, then on its tensor-core math).
# generate_bench: decoding speed, `stepgraph generate` (graphed and eager) against transformers' generate() (dynamic
#   cache, and static cache compiled) on Llama 1b, a Mixtral and a Nemotron-H of random weights, batches 1 and 8
#   (bench/generate_reference.py; GENERATE_ARGS adds arguments, e.g. "--models llama_1b --batches 1"; "--hf-modes
#   none --profile": stepgraph alone, with the kernel table of `generate --profile` per model and batch; "--decode-gemv
#   1,0,tensor_cores --batches 1,2,4,8": the graphed run under each STEPGRAPH_DECODE_GEMV value, in turns); first
#   bench/decode_attention_bench.cu, the attention kernel alone at those models' shapes (decode_attention_bench.txt),
#   and bench/decode_linear_bench.cu, the step's linears against cuBLASLt (decode_linear_bench.txt);
#   GENERATE_KERNEL_BENCHES=0 leaves those two out.
# lm_head_chunk: small's and 1b's LM head in one chunk against two (docs/performance.md, s24, s25).
# gemm_power (issue 13): bench/gemm_power_bench.cu on llama/1b's, small's and tiny's dense GEMMs; gemm_power.txt
#   (GEMM_POWER_ARGS replaces its arguments, e.g. "--recipe 1b --explore --ranks 5 --seconds 0.2 --rounds 3").
# sanitize: compute-sanitizer on llama/tiny (6 steps): memcheck in the none, local and
# transformer_engine modes, racecheck (one block, to fit the tool's host memory) and synccheck (eager,
# with and without cuDNN's SDPA backward kernel); a summary line each, logs in
# $OUT/sanitize_<run>.log, host memory every 5 s in $OUT/sanitize_mem_<run>.log (docs/reliability.md
# records the results). SANITIZE_ONLY="racecheck synccheck" picks runs by name.
# dp (issue 16): world size 1 vs 2 on the same global batch (losses within fp32 summation-order rounding, every
# graph mode bitwise equal to eager at world size 2, with and without the gradient reduction overlapped with the
# backward, the distributed optimizer, checkpoints saved at 2 ranks resumed at 1 and the other way, bf16 Adam moments
# and bf16 main gradients reduced in bf16), and during
# the steps: SIGTERM to one rank (then its resume), SIGKILL to one rank, a NaN. On one GPU the two ranks share
# it (scripts/two_ranks_one_gpu.sh), and world size 1 runs through the whole NCCL path (`stepgraph launch -n 1`)
# in every graph mode, bitwise equal to the plain run. On 2 GPUs (kind nvidia-h200-x2) `stepgraph launch -n 2`
# runs them, then bench -ng 2 against -ng 1 (scaling efficiency), which one GPU records as NOT RUN (it runs
# bench -ng 2's rank path there, untimed); docs/distributed.md.
# dp_moe (part of dp, or alone): MoE models (softmax, sigmoid and sqrtsoftplus routing) at world size 2 against 1
# (the losses, auxiliary losses and routed tokens; with and without the distributed optimizer) and their graph
# modes at world size 2 against eager, validation.test_mode's weight comparison at world size 2, and a hybrid Mamba
# model with the distributed optimizer at 2 against 1.
#
# Expects a build made for sm_90 in ${BUILD_DIR:-build} (scripts/build.sh here, or on the GPU machine:
# the binaries link only CUDA libraries dynamically). Logs and JSON go to ${RESULTS:-gpu-results}.
set -uo pipefail
cd "$(dirname "$0")/.."
known_parts=(tests bench torch parity generate_parity edge_configs dp dp_moe sanitize recompute gemm_power lm_head_chunk generate_bench all)
for p in "$@"; do
  if [[ $p == -h || $p == --help ]]; then
    sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 0
  fi
  if [[ " ${known_parts[*]} " != *" $p "* ]]; then
    echo "scripts/gpu.sh: unknown part '$p'; the parts are: ${known_parts[*]} (--help says what each runs)" >&2
    exit 2
  fi
done
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "scripts/gpu.sh: no NVIDIA GPU here (nvidia-smi is missing or lists none); run it on the H200 machine" >&2
  exit 1
fi
B=${BUILD_DIR:-build}
OUT=${RESULTS:-gpu-results}
mkdir -p "$OUT"
SG="$B/src/stepgraph"
parts=("$@")
[[ ${#parts[@]} -eq 0 ]] && parts=(all)
want() { for p in "${parts[@]}"; do [[ $p == all || $p == "$1" ]] && return 0; done; return 1; }
named() { for p in "${parts[@]}"; do [[ $p == "$1" ]] && return 0; done; return 1; }
summary=()
record() { summary+=("$(printf '%-34s %s' "$1" "$2")"); }

# PyTorch loads the cuDNN its wheel bundles and refuses to start when LD_LIBRARY_PATH names another one (the
# system cuDNN 9.14 that stepgraph links). PY runs Python without the LD_LIBRARY_PATH entries that hold a libcudnn;
# Python runs stepgraph through $SG_PY, which restores the caller's LD_LIBRARY_PATH.
py_ld_path=""
IFS=: read -ra ld_entries <<<"${LD_LIBRARY_PATH:-}"
for d in "${ld_entries[@]}"; do
  compgen -G "$d/libcudnn.so*" >/dev/null || py_ld_path+="${py_ld_path:+:}$d"
done
PY=(env LD_LIBRARY_PATH="$py_ld_path" python3)
sg_py_dir=$(mktemp -d)
trap 'rm -rf "$sg_py_dir"' EXIT
SG_PY=$sg_py_dir/stepgraph
printf '#!/usr/bin/env bash\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "${LD_LIBRARY_PATH:-}" "$(realpath -m "$SG")" \
  >"$SG_PY"
chmod +x "$SG_PY"

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
    # Timed as graph replays (how the step runs them), then as stream launches (the earlier sessions' method).
    for timing in graph events; do
      "$B/bench/grouped_gemm_bench" --timing $timing 2>&1 | tee "$OUT/bench_grouped_gemm_$timing.txt" | tail -21
      record "grouped GEMM bench, timing $timing" "rc=${PIPESTATUS[0]} (bench_grouped_gemm_$timing.txt)"
    done
  fi
  if [[ -x "$B/bench/weight_fingerprint_bench" ]]; then
    # validation.test_mode's device cost a step (docs/distributed.md): the fingerprints of the whole weights.
    "$B/bench/weight_fingerprint_bench" 2>&1 | tee "$OUT/bench_weight_fingerprint.txt" | tail -5
    record "weight fingerprint bench" "rc=${PIPESTATUS[0]} (bench_weight_fingerprint.txt)"
  fi
  if [[ -x "$B/bench/swiglu_backward_gemm_bench" ]]; then
    "$B/bench/swiglu_backward_gemm_bench" 2>&1 | tee "$OUT/bench_swiglu_backward_gemm.txt" | tail -4
    record "SwiGLU backward GEMM bench" "rc=${PIPESTATUS[0]} (bench_swiglu_backward_gemm.txt)"
  fi
  # BENCH_RECIPES: family/recipe items (default the three dense recipes and the MoE and hybrid small ones);
  # each family has its own mode list, the graph scopes its layers allow.
  for item in ${BENCH_RECIPES:-llama/tiny llama/small llama/1b moe/small_moe hybrid/small_hybrid}; do
    family=${item%%/*} r=${item#*/}
    case $family in
      llama) modes=none,local,transformer_engine:attn,transformer_engine:attn+mlp ;;
      moe) modes=none,local,transformer_engine:attn+moe_router+moe_preprocess,transformer_engine:attn+moe ;;
      hybrid)  # the MLP scope where the MLPs are dense, the MoE scopes where they are experts (rule 7)
        if grep -qE '^ *num_moe_experts: *[1-9]' "recipes/$family/$r.yaml" 2>/dev/null; then
          modes=none,local,transformer_engine:attn+mamba+moe_router+moe_preprocess,transformer_engine:attn+mamba+moe
        else
          modes=none,local,transformer_engine:attn+mamba,transformer_engine:attn+mamba+mlp
        fi ;;
      *) record "stepgraph bench $item" "unknown family: llama moe hybrid"; continue ;;
    esac
    "$SG" bench -m "$family" -mr "$r" -g h200 -c bf16 -ng 1 --plain --compare "${BENCH_MODES:-$modes}" \
      --json "$OUT/bench_$r.json" --trace "$OUT/trace_$r.json" >"$OUT/bench_$r.txt" 2>&1
    record "stepgraph bench $r" "rc=$?"
    sed -n '/^mode /,$p' "$OUT/bench_$r.txt"
    "${PY[@]}" bench/kernel_table.py "$OUT/trace_$r.json" --mode none --markdown >"$OUT/kernels_$r.md" 2>&1
    # Where the local step's kernel time goes, and its GEMM-only MFU next to its MFU (issue 13).
    "${PY[@]}" bench/kernel_table.py "$OUT/trace_$r.json" --mode local --bench "$OUT/bench_$r.json" 2>&1 \
      | sed -n '/^GEMM: /,$p' | tee "$OUT/mfu_$r.txt"
  done
fi

if named gemm_power; then
  # Issue 13: cuBLASLt's candidates for the dense recipes' GEMMs timed back to back (at the power cap at 1b and small),
  # and which one the step runs (kernels/gemm_preferences.h); a few minutes.
  # GEMM_POWER_ARGS replaces the arguments, e.g. "--recipe 1b --explore --ranks 5 --seconds 0.2 --rounds 3" (also
  # configurations the heuristic does not rank; about 4 minutes a recipe).
  args=${GEMM_POWER_ARGS:---recipe all --ranks 6 --seconds 0.25 --rounds 4}
  # shellcheck disable=SC2086  # word splitting of the arguments is wanted
  "$B/bench/gemm_power_bench" $args >"$OUT/gemm_power.txt" 2>&1
  rc=$?
  record "GEMM candidates at the power cap" "rc=$rc (gemm_power.txt)"
  grep "the step's" "$OUT/gemm_power.txt"
fi

if named lm_head_chunk; then
  # Issue 13, the twenty-fourth session's next step (docs/performance.md): the LM head in one chunk at llama/small and
  # llama/1b (STEPGRAPH_LM_HEAD_CHUNK_MIB=1024) against the default two. First the one-chunk head GEMMs' candidates
  # at the cap, then each recipe's local step with both budgets, alternating, LM_HEAD_ROUNDS rounds (default 2).
  "$B/bench/gemm_power_bench" --recipe all --linears lm_head --lm-head-rows 8192 --explore --ranks 4 --seconds 0.2 \
    --rounds 3 >"$OUT/gemm_power_lm_head_8192.txt" 2>&1
  record "LM-head GEMMs, 8192-row chunk" "rc=$? (gemm_power_lm_head_8192.txt)"
  for r in small 1b; do
    for round in $(seq "${LM_HEAD_ROUNDS:-2}"); do
      for mib in default 1024; do
        budget=(-u STEPGRAPH_LM_HEAD_CHUNK_MIB)
        [[ $mib == default ]] || budget=("STEPGRAPH_LM_HEAD_CHUNK_MIB=$mib")
        env "${budget[@]}" "$SG" bench -m llama -mr "$r" -g h200 -c bf16 -ng 1 --plain --compare local --steps 40 --floor-steps 0 \
          --json "$OUT/lm_head_${r}_${mib}_$round.json" >"$OUT/lm_head_${r}_${mib}_$round.txt" 2>&1
        record "bench $r, LM-head budget $mib, round $round" \
          "rc=$? $(grep -o 'median step [0-9.]* ms' "$OUT/lm_head_${r}_${mib}_$round.txt")"
      done
    done
  done
fi

if named recompute; then
  # Issue 15's acceptance: 1b at micro batch 8, each recompute option next to the same graph mode without it, in
  # one bench call: each recompute setting plans and allocates its own arena (the previous one freed), so the
  # peak-memory and step-time columns compare side by side; every mode must end at the same loss, bit for bit.
  rc_modes=local,transformer_engine:attn+mlp,local+recompute_selective,transformer_engine:attn+mlp+recompute_selective
  rc_modes+=,transformer_engine:attn+mlp+recompute_selective=core_attn/mlp,local+recompute_full
  "$SG" bench -m llama -mr 1b -g h200 -c bf16 -ng 1 --plain -mb 8 -gb 8 --steps "${RECOMPUTE_STEPS:-20}" \
    --compare "${RECOMPUTE_MODES:-$rc_modes}" --json "$OUT/recompute.json" >"$OUT/recompute.txt" 2>&1
  rc=$?
  grep -q "ended at different losses" "$OUT/recompute.txt" && rc="$rc, LOSSES DIFFER"
  record "recompute 1b mb8" "rc=$rc"
  sed -n '/^mode /,$p' "$OUT/recompute.txt"
fi

if named generate_bench; then
  if [[ "${GENERATE_KERNEL_BENCHES:-1}" == 1 && -x "$B/bench/decode_attention_bench" ]]; then  # the attention kernel alone first (graph replays)
    "$B/bench/decode_attention_bench" >"$OUT/decode_attention_bench.txt" 2>&1
    record "decode attention bench" "rc=$? (decode_attention_bench.txt)"
    cat "$OUT/decode_attention_bench.txt"
  fi
  if [[ "${GENERATE_KERNEL_BENCHES:-1}" == 1 && -x "$B/bench/decode_linear_bench" ]]; then  # the step's linears alone
    "$B/bench/decode_linear_bench" >"$OUT/decode_linear_bench.txt" 2>&1
    record "decode linear bench" "rc=$? (decode_linear_bench.txt)"
    cat "$OUT/decode_linear_bench.txt"
  fi
  PYTHONUNBUFFERED=1 timeout "${GENERATE_TIMEOUT:-1200}" "${PY[@]}" bench/generate_reference.py --stepgraph "$SG_PY" \
    --out "${GENERATE_DIR:-/tmp/sg_generate_bench}" --json "$OUT/generate_bench.json" ${GENERATE_ARGS:-} \
    >"$OUT/generate_bench.txt" 2>&1
  record "generate bench" "rc=$? (generate_bench.txt)"
  grep '^|' "$OUT/generate_bench.txt"
fi

if want torch; then
  # torch_ref NAME RECIPE DEFAULT_MODES [args...]: bench/torch_reference.py on one recipe -> $OUT/torch_NAME.{json,txt}.
  # TORCH_MODES overrides every recipe's modes; each mode runs in its own process, killed after TORCH_MODE_TIMEOUT s.
  # TORCH_DETERMINISTIC=1 holds PyTorch to stepgraph's guarantee (--deterministic: use_deterministic_algorithms and
  # CUBLAS_WORKSPACE_CONFIG) and writes $OUT/torch_NAME_det.{json,txt} instead.
  torch_ref() {
    local name=$1 recipe=$2 modes=$3
    shift 3
    if [[ ! -f $recipe ]]; then
      record "torch reference $name" "skipped: $recipe missing"
      return
    fi
    local det=()
    [[ ${TORCH_DETERMINISTIC:-0} == 1 ]] && det=(--deterministic) && name+=_det
    PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-900}" "${PY[@]}" bench/torch_reference.py --recipe "$recipe" \
      --steps "${TORCH_STEPS:-30}" --warmup 10 --modes "${TORCH_MODES:-$modes}" --mode-timeout "${TORCH_MODE_TIMEOUT:-300}" \
      "${det[@]}" "$@" --json "$OUT/torch_$name.json" >"$OUT/torch_$name.txt" 2>&1
    record "torch reference $name" "rc=$?"
    sed -n '/^PyTorch reference/,$p' "$OUT/torch_$name.txt"
  }
  # TORCH_MODELS picks what runs: families (llama = tiny small 1b; moe = small_moe a3b_proxy: experts as a loop and as
  # torch._grouped_mm; hybrid = small_hybrid: mamba_ssm's Triton Mamba2 and pure PyTorch; ssd = mamba_ssm's SSD scan
  # alone, as build/bench/ssd_scan_bench; sdpa = which attention PyTorch runs, default and deterministic, and what
  # it costs, bench/torch_sdpa_determinism_probe.py) or single recipe names. mamba_ssm's sources: bash
  # scripts/fetch_mamba_ssm.sh GIT_DIR beforehand, and carry third_party to the GPU machine.
  torch_items=()
  for item in ${TORCH_MODELS:-llama moe hybrid ssd sdpa}; do
    case $item in
      llama) torch_items+=(tiny small 1b) ;;
      moe) torch_items+=(small_moe a3b_proxy) ;;
      hybrid) torch_items+=(small_hybrid) ;;
      *) torch_items+=("$item") ;;
    esac
  done
  for item in "${torch_items[@]}"; do
    case $item in
      tiny|small|1b)
        torch_ref "$item" "recipes/llama/$item.yaml" eager,cuda_graph,graphed_callables,compile,compile_reduce_overhead ;;
      small_moe)
        torch_ref small_moe recipes/moe/small_moe.yaml eager,cuda_graph,compile,compile_reduce_overhead \
          --impls "${TORCH_MOE_IMPLS:-loop,grouped_mm}" ;;
      a3b_proxy)
        torch_ref a3b_proxy recipes/moe/a3b_proxy.yaml eager,cuda_graph,compile --impls "${TORCH_MOE_IMPLS:-loop,grouped_mm}" ;;
      small_hybrid)
        torch_ref small_hybrid recipes/hybrid/small_hybrid.yaml eager,cuda_graph,compile \
          --impls "${TORCH_HYBRID_IMPLS:-mamba_ssm,torch}" ;;
      tiny_hybrid_moe)  # Nemotron 3's style (not in the default list): the expert bias updated inside the captured step
        torch_ref tiny_hybrid_moe recipes/hybrid/tiny_hybrid_moe.yaml eager,cuda_graph,compile \
          --impls "${TORCH_HYBRID_IMPLS:-mamba_ssm,torch}" ;;
      ssd)
        PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-900}" "${PY[@]}" bench/mamba_ssd_reference.py \
          --json "$OUT/mamba_ssd_reference.json" >"$OUT/mamba_ssd_reference.txt" 2>&1
        record "mamba_ssm SSD scan reference" "rc=$? (mamba_ssd_reference.txt)"
        tail -4 "$OUT/mamba_ssd_reference.txt" ;;
      sdpa)
        PYTHONUNBUFFERED=1 timeout "${TORCH_TIMEOUT:-900}" "${PY[@]}" bench/torch_sdpa_determinism_probe.py \
          --shapes tiny,small,1b >"$OUT/torch_sdpa_determinism.txt" 2>&1
        record "PyTorch SDPA determinism probe" "rc=$? (torch_sdpa_determinism.txt)"
        grep "deterministic=" "$OUT/torch_sdpa_determinism.txt" ;;
      *) record "torch reference $item" "unknown TORCH_MODELS entry: llama moe hybrid ssd sdpa or a recipe name" ;;
    esac
  done
fi

if want parity; then
  if [[ -f tests/model/hf_parity.py ]]; then
    "${PY[@]}" tests/model/hf_parity.py --stepgraph "$SG_PY" --out "${PARITY_DIR:-/tmp/stepgraph_hf_parity}" 2>&1 \
      | tee "$OUT/hf_parity.txt" | tail -8
    record "HF transformers parity" "rc=${PIPESTATUS[0]}"
    # Qwen3: the query and key norms (model.qk_layernorm); checkpoints load as Qwen3ForCausalLM.
    "${PY[@]}" tests/model/hf_parity.py --stepgraph "$SG_PY" --out "${PARITY_DIR:-/tmp/stepgraph_hf_parity}_qwen3" \
      --override model.qk_layernorm=true 2>&1 | tee "$OUT/hf_parity_qwen3.txt" | tail -8
    record "HF transformers parity (Qwen3)" "rc=${PIPESTATUS[0]}"
    # Qwen2: the bias on q, k and v (model.add_qkv_bias); checkpoints load as Qwen2ForCausalLM.
    "${PY[@]}" tests/model/hf_parity.py --stepgraph "$SG_PY" --out "${PARITY_DIR:-/tmp/stepgraph_hf_parity}_qwen2" \
      --override model.add_qkv_bias=true 2>&1 | tee "$OUT/hf_parity_qwen2.txt" | tail -8
    record "HF transformers parity (Qwen2)" "rc=${PIPESTATUS[0]}"
    # Llama's attention_bias and mlp_bias (model.add_bias_linear); checkpoints load as LlamaForCausalLM.
    "${PY[@]}" tests/model/hf_parity.py --stepgraph "$SG_PY" --out "${PARITY_DIR:-/tmp/stepgraph_hf_parity}_bias" \
      --override model.add_bias_linear=true 2>&1 | tee "$OUT/hf_parity_bias.txt" | tail -8
    record "HF transformers parity (Llama biases)" "rc=${PIPESTATUS[0]}"
    # Phi-3: RoPE on 48 of each head's 64 dimensions (model.rotary_percent); checkpoints load as Phi3ForCausalLM.
    "${PY[@]}" tests/model/hf_parity.py --stepgraph "$SG_PY" --out "${PARITY_DIR:-/tmp/stepgraph_hf_parity}_phi3" \
      --override model.rotary_percent=0.75 2>&1 | tee "$OUT/hf_parity_phi3.txt" | tail -8
    record "HF transformers parity (Phi-3 partial rotary)" "rc=${PIPESTATUS[0]}"
    # Phi-3.5's LongRoPE (model.longrope_*, 32 pairs) with the long list: seq_length 256 is past the original 128.
    longrope_short=$(python3 -c "print(','.join(f'{1 + 0.02 * i:g}' for i in range(32)))")
    longrope_long=$(python3 -c "print(','.join(f'{1 + 0.8 * i:g}' for i in range(32)))")
    "${PY[@]}" tests/model/hf_parity.py --stepgraph "$SG_PY" --out "${PARITY_DIR:-/tmp/stepgraph_hf_parity}_longrope" \
      --override "model.longrope_short_factor=$longrope_short" "model.longrope_long_factor=$longrope_long" \
      model.longrope_original_max_position_embeddings=128 model.longrope_attention_factor=1.19 2>&1 |
      tee "$OUT/hf_parity_longrope.txt" | tail -8
    record "HF transformers parity (Phi-3 LongRoPE)" "rc=${PIPESTATUS[0]}"
    "${PY[@]}" tests/model/hf_parity.py --stepgraph "$SG_PY" --recipe moe/tiny_moe \
      --out "${PARITY_DIR:-/tmp/stepgraph_hf_parity}_qwen3_moe" --override model.qk_layernorm=true \
      "model.moe_layer_freq=[1,1,0,1]" 2>&1 | tee "$OUT/hf_parity_qwen3_moe.txt" | tail -8
    record "HF transformers parity (Qwen3-MoE)" "rc=${PIPESTATUS[0]}"
    # Qwen2-MoE: a gated shared expert (moe_shared_expert_gate), QKV biases, a dense block, the top-k not renormalised.
    "${PY[@]}" tests/model/hf_parity.py --stepgraph "$SG_PY" --recipe moe/tiny_moe \
      --out "${PARITY_DIR:-/tmp/stepgraph_hf_parity}_qwen2_moe" \
      --override model.moe_shared_expert_intermediate_size=96 model.moe_shared_expert_gate=true \
      model.add_qkv_bias=true "model.moe_layer_freq=[1,0,1,1]" model.moe_router_pre_softmax=true 2>&1 |
      tee "$OUT/hf_parity_qwen2_moe.txt" | tail -8
    record "HF transformers parity (Qwen2-MoE)" "rc=${PIPESTATUS[0]}"
    # MoE (issue 11): checkpoints load as MixtralForCausalLM; LM loss, and Megatron's aux loss apart.
    "${PY[@]}" tests/model/hf_parity.py --stepgraph "$SG_PY" --out "${PARITY_MOE_DIR:-/tmp/stepgraph_hf_parity_moe}" \
      --recipe moe/tiny_moe --override model.moe_aux_loss_coeff=0.01 2>&1 | tee "$OUT/hf_parity_moe.txt" | tail -12
    record "HF transformers parity (MoE as Mixtral)" "rc=${PIPESTATUS[0]}"
    "${PY[@]}" tests/model/hf_parity.py --stepgraph "$SG_PY" --recipe hybrid/tiny_hybrid \
      --out "${PARITY_DIR:-/tmp/stepgraph_hf_parity}_hybrid" 2>&1 | tee "$OUT/hf_parity_hybrid.txt" | tail -8
    record "HF transformers parity (NemotronH)" "rc=${PIPESTATUS[0]}"
    # Nemotron 3's style: Mamba, MoE with squared-ReLU and shared experts, sigmoid routing with the expert bias.
    "${PY[@]}" tests/model/hf_parity.py --stepgraph "$SG_PY" --recipe hybrid/tiny_hybrid_moe \
      --out "${PARITY_DIR:-/tmp/stepgraph_hf_parity}_hybrid_moe" 2>&1 | tee "$OUT/hf_parity_hybrid_moe.txt" | tail -8
    record "HF transformers parity (NemotronH with MoE)" "rc=${PIPESTATUS[0]}"
  fi
fi
if want parity || named generate_parity; then
  if [[ -f tests/model/hf_generate_parity.py ]]; then
    # 4 prompts decode on the matrix-vector kernel's fp32 math, 8 on its tensor-core math (model/decode_gemv.h).
    # A fresh folder each run unless named (the script trains into it and refuses a corpus or checkpoints there).
    generate_parity_root=${GENERATE_PARITY_DIR:-$(mktemp -d /tmp/stepgraph_hf_generate_XXXXXX)}
    for prompts in ${GENERATE_PARITY_PROMPTS:-4 8}; do
      "${PY[@]}" tests/model/hf_generate_parity.py --stepgraph "$SG_PY" --prompts "$prompts" \
        --out "$generate_parity_root/prompts_$prompts" 2>&1 \
        | tee "$OUT/hf_generate_parity_$prompts.txt" | tail -30
      record "HF generate greedy parity, $prompts prompts" "rc=${PIPESTATUS[0]}"
    done
  fi
fi

if named edge_configs; then
  # Every one trains on the CPU backend (checked when the list was made); on the GPU each must train or be refused
  # with an error line (exit 1), never end on a signal, a CUDA error or an assertion.
  edge_failed=0
  edge_run() {
    local log
    log=$(mktemp)
    timeout 300 "$SG" train "$@" train.train_iters=6 scheduler.lr_warmup_iters=1 logger.log_interval=3 --plain \
      --run-dir "$(mktemp -d)" >"$log" 2>&1
    local rc=$? verdict
    if [[ $rc -eq 0 ]]; then
      verdict=trained
    elif [[ $rc -eq 1 ]] && grep -q "^error: " "$log" && ! grep -qiE "cuda.*failed|illegal|assert" "$log"; then
      verdict="refused: $(grep -m1 -A1 '^error: ' "$log" | tail -1 | cut -c1-120)"
    else
      verdict="FAILED (rc=$rc): $(tail -2 "$log" | tr '\n' ' ' | cut -c1-160)"
      edge_failed=1
    fi
    printf '%-100s %s\n' "$*" "$verdict" | tee -a "$OUT/edge_configs.txt"
    rm -f "$log"
  }
  L=(--cuda_graph_impl local) TE=(--cuda_graph_impl transformer_engine)
  edge_run llama/tiny model.ffn_hidden_size=700 "${L[@]}"
  edge_run moe/tiny_moe model.moe_shared_expert_intermediate_size=100 "${TE[@]}" --cuda_graph_scope attn,moe
  edge_run llama/tiny model.vocab_size=8191 "${L[@]}"
  edge_run llama/tiny model.seq_length=33 dataset.seq_length=33 "${L[@]}"
  edge_run llama/tiny model.seq_length=2 dataset.seq_length=2 "${L[@]}"
  edge_run llama/tiny model.cuda_graph_warmup_steps=0 "${L[@]}"
  edge_run moe/tiny_moe model.cuda_graph_warmup_steps=0 "${TE[@]}" --cuda_graph_scope attn,moe
  edge_run moe/tiny_moe model.moe_expert_capacity_factor=0.01 model.moe_pad_expert_input_to_capacity=true "${TE[@]}"
  edge_run moe/tiny_moe model.moe_expert_capacity_factor=0.5 "${TE[@]}" --cuda_graph_scope attn,moe
  edge_run moe/tiny_moe model.moe_router_topk=8 "${TE[@]}" --cuda_graph_scope attn,moe
  edge_run moe/tiny_moe "model.moe_layer_freq=[1,0,1,0]" "${TE[@]}" --cuda_graph_scope attn,mlp,moe
  edge_run hybrid/tiny_hybrid model.mamba_num_heads=3 model.mamba_num_groups=3 model.seq_length=200 \
    dataset.seq_length=200 "${TE[@]}" --cuda_graph_scope attn,mamba
  edge_run hybrid/tiny_hybrid_moe "${TE[@]}"
  edge_run llama/tiny model.kv_channels=32 "${L[@]}"
  # Qwen3's query and key norms: heads of 24 (3 vectors of a row, not a power of 2), with MoE, in a hybrid pattern.
  edge_run llama/tiny model.qk_layernorm=true model.kv_channels=24 "${L[@]}"
  edge_run moe/tiny_moe model.qk_layernorm=true "${TE[@]}" --cuda_graph_scope attn,moe
  # A gated shared expert (moe_shared_expert_gate): an odd width, recomputed; in a hybrid with squared ReLU.
  edge_run moe/tiny_moe model.moe_shared_expert_intermediate_size=100 model.moe_shared_expert_gate=true \
    model.recompute_granularity=selective model.recompute_modules=shared_experts "${TE[@]}" --cuda_graph_scope attn,moe
  edge_run hybrid/tiny_hybrid_moe model.moe_shared_expert_gate=true "${TE[@]}"
  edge_run hybrid/tiny_hybrid model.qk_layernorm=true "${TE[@]}" --cuda_graph_scope attn,mamba
  # Qwen2's QKV bias: with heads of 24 and GQA, with the query and key norms, in a hybrid pattern.
  edge_run llama/tiny model.add_qkv_bias=true model.kv_channels=24 model.num_query_groups=2 "${L[@]}"
  edge_run llama/tiny model.add_qkv_bias=true model.qk_layernorm=true "${TE[@]}" --cuda_graph_scope attn,mlp
  edge_run hybrid/tiny_hybrid model.add_qkv_bias=true "${TE[@]}" --cuda_graph_scope attn,mamba
  # Every linear's bias: GQA heads of 24 with the fused SwiGLU backward's shapes, graphed MLPs, a hybrid pattern.
  edge_run llama/tiny model.add_bias_linear=true model.kv_channels=24 model.num_query_groups=2 "${L[@]}"
  edge_run llama/tiny model.add_bias_linear=true model.ffn_hidden_size=200 "${TE[@]}" --cuda_graph_scope attn,mlp
  edge_run hybrid/tiny_hybrid model.add_bias_linear=true "${TE[@]}" --cuda_graph_scope attn,mlp,mamba
  edge_run llama/tiny validation.eval_interval=2 validation.eval_iters=2 "${L[@]}"
  # Validation batches of 5 sequences in microbatches of 1: 10 rows in the step's 4-row shape, the last half padding.
  edge_run llama/tiny validation.eval_interval=3 validation.eval_iters=2 validation.eval_global_batch_size=5 \
    validation.eval_micro_batch_size=1 "${L[@]}" --cuda_graph_scope full_iteration
  # Megatron-LM's full validation on a synthetic corpus's 10% valid split, the last validation batch partial.
  edge_corpus=$(mktemp -d)/synth
  "$SG" data synth --out "$edge_corpus" --tokens 300000 >/dev/null
  edge_run llama/tiny dataset.mock=false "dataset.data_path=[$edge_corpus]" dataset.split=90,10,0 model.vocab_size=256 \
    validation.eval_interval=3 validation.full_validation=true validation.eval_global_batch_size=6 \
    validation.eval_micro_batch_size=2 "${L[@]}" --cuda_graph_scope full_iteration
  # Megatron-LM's multiple validation sets: two datasets evaluated one by one, each with its own loss.
  "$SG" data synth --out "${edge_corpus}_b" --tokens 100000 --seed 9 >/dev/null
  edge_run llama/tiny dataset.mock=false "dataset.data_path=[$edge_corpus]" \
    "dataset.valid_data_path=[$edge_corpus,${edge_corpus}_b]" model.vocab_size=256 validation.eval_interval=3 \
    validation.eval_iters=2 validation.multiple_validation_sets=true "validation.validation_set_names=[a,b]" "${L[@]}"
  # A weight decay that changes every step (computed on the device from the step counter) and Bridge's
  # mixed_precision recipe, under the whole-step graph.
  edge_run llama/tiny scheduler.start_weight_decay=0 scheduler.end_weight_decay=0.1 \
    scheduler.weight_decay_incr_style=cosine mixed_precision=bf16_mixed "${L[@]}" --cuda_graph_scope full_iteration
  # Megatron's warmup-stable-decay and inverse-square-root lr schedules (computed on the device from the step counter,
  # as the others), the warmup rising from lr_warmup_init, under the whole-step graph and the per-layer graphs.
  edge_run llama/tiny scheduler.lr_decay_style=WSD scheduler.lr_wsd_decay_style=minus_sqrt \
    scheduler.lr_wsd_decay_iters=3 scheduler.lr_decay_iters=6 scheduler.lr_warmup_init=1e-5 "${L[@]}" \
    --cuda_graph_scope full_iteration
  edge_run llama/tiny scheduler.lr_decay_style=inverse-square-root "${TE[@]}" --cuda_graph_scope attn,mlp
  # Megatron's newer spelling of the whole-step graph (validate reads it as local + full_iteration).
  edge_run llama/tiny model.cuda_graph_impl=full_iteration model.use_te_rng_tracker=true rng.te_rng_tracker=true
  edge_run llama/tiny model.hidden_dropout=0.1 model.attention_dropout=0.1 model.recompute_granularity=selective \
    model.recompute_modules=core_attn,mlp "${TE[@]}" --cuda_graph_scope attn,mlp
  record "edge configurations" "$([[ $edge_failed -eq 0 ]] && echo ok || echo FAILED) (edge_configs.txt)"
fi

if named sanitize; then
  CS=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
  # sanitize NAME TOOL [tool flags...] -- [train overrides...]: one run; the tool's SUMMARY line and
  # stepgraph's own last words (its final "trained"/"error:"/"stepgraph:" line) go into the summary.
  sanitize() {
    local name=$1 tool=$2
    shift 2
    local tool_flags=()
    while [[ $# -gt 0 && $1 != -- ]]; do tool_flags+=("$1"); shift; done
    [[ ${1:-} == -- ]] && shift
    # SANITIZE_ONLY="racecheck synccheck": just those runs.
    [[ -z ${SANITIZE_ONLY:-} || " $SANITIZE_ONLY " == *" $name "* ]] || return 0
    local log="$OUT/sanitize_$name.log" start
    start=$(date +%s)
    # The host memory of the machine and the largest processes every 5 s: a run killed from outside
    # (status 9 with no message of its own) is most likely the memory limit; this log says.
    (while true; do
      echo "$(date +%T) used_mib=$(free -m | awk '/Mem/{print $3}') $(ps -eo rss=,comm= --sort=-rss | head -2 | tr '\n' ' ')"
      sleep 5
    done) >"$OUT/sanitize_mem_$name.log" 2>&1 &
    local sampler=$!
    timeout "${SANITIZE_TIMEOUT:-1800}" "$CS" --tool "$tool" "${tool_flags[@]}" --error-exitcode 99 --print-limit 200 \
      "$SG" train llama/tiny train.train_iters=6 logger.log_interval=1 --plain \
      --run-dir "$OUT/sanitize_run_$name" "$@" >"$log" 2>&1
    local rc=$?
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    local tool_line own_line
    tool_line=$(grep -E "(ERROR|RACECHECK|SYNCCHECK) SUMMARY" "$log" | tail -1 | sed 's/^=* *//')
    own_line=$(grep -E "^(trained |error: |stepgraph: )" "$log" | tail -1)
    # Launches the tool could not instrument are counted as errors but checked nothing: say how many.
    local untracked
    untracked=$(grep -c "Internal Sanitizer Error" "$log")
    record "sanitize $name" "rc=$rc $(( $(date +%s) - start )) s | ${tool_line:-no tool summary} ($untracked launches not tracked) | ${own_line:-no stepgraph message}"
  }
  sanitize memcheck_none memcheck -- model.cuda_graph_impl=none
  sanitize memcheck_local memcheck -- model.cuda_graph_impl=local model.cuda_graph_scope=full_iteration
  sanitize memcheck_te memcheck -- model.cuda_graph_impl=transformer_engine model.cuda_graph_scope=attn,mlp
  # racecheck keeps its records in the process's host memory, growing ~1.6-2 GB/s whatever the model's
  # size until the kernel's OOM killer ends the run (SIGKILL near 128 GB, after ~80 s; docs/reliability.md).
  # One block of tiny's shape at micro batch 1 (every kernel of the step, ~13 s a step under the tool) for
  # 3 steps fits.
  sanitize racecheck racecheck -- model.cuda_graph_impl=none model.num_layers=1 train.micro_batch_size=1 \
    train.global_batch_size=2 model.seq_length=128 dataset.seq_length=128 train.train_iters=3 \
    scheduler.lr_warmup_iters=1
  # synccheck: cuDNN's SDPA backward kernel is reported (divergent threads at a barrier, third-party) and
  # then fails under the tool, so the run that checks every other kernel for all steps excludes it; the
  # second run shows the cuDNN report. The barrier table: the default overflows inside a cuBLASLt kernel
  # (the launch then fails); 65536 leaves the tool without device memory to track ~660 launches ("Internal
  # Sanitizer Error ... didn't track the launch"); 4096 tracks every launch (docs/reliability.md).
  local_barriers=(--num-cuda-barriers "${SANITIZE_CUDA_BARRIERS:-4096}")
  sanitize synccheck synccheck "${local_barriers[@]}" --kernel-name-exclude kns=sdpa_sm90_flash_bprop -- \
    model.cuda_graph_impl=none
  sanitize synccheck_cudnn synccheck "${local_barriers[@]}" -- model.cuda_graph_impl=none
fi

if want dp || want dp_moe; then
  # What both data-parallel parts use: the ranks at world size 2, the graph-mode overrides, run_dp.
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
  D="$OUT/dp"
  mkdir -p "$D"
  if (( ngpu < 2 )); then
    # World size 2 without a second GPU: two torchrun-style ranks on this one, NCCL over loopback
    # (scripts/two_ranks_one_gpu.sh says why that checks world size 2's results but not its speed).
    ws2=(bash scripts/two_ranks_one_gpu.sh "$SG")
    ws2_where="two ranks on one GPU"
  else
    ws2=("$SG" launch -n 2 --)
    ws2_where="two GPUs"
  fi
  graphs=(model.use_te_rng_tracker=true rng.te_rng_tracker=true)
  local_graph=("${graphs[@]}" model.cuda_graph_impl=local rerun_state_machine.check_for_nan_in_loss=false)
  run_dp() {  # name, then the command
    local name=$1; shift
    local start=$(date +%s)
    timeout "${DP_RUN_TIMEOUT:-600}" "$@" >"$D/$name.log" 2>&1
    local rc=$?
    record "dp $name" "rc=$rc ($(( $(date +%s) - start )) s)"
    (( rc == 0 )) || tail -20 "$D/$name.log"
  }
fi

if want dp; then
  rm -rf "$D/ckpt"
  # Same global batch everywhere: 8 sequences = 2 microbatches of 4 at world size 1, 1 per rank at 2.
  # Dropout on, so the per-rank RNG offsets are checked too.
  tiny=(llama/tiny train.global_batch_size=8 train.train_iters=30 scheduler.lr_decay_iters=30 dataset.mock=true logger.log_interval=10
        model.hidden_dropout=0.1 model.attention_dropout=0.1 --plain)
  te_graph=("${graphs[@]}" model.cuda_graph_impl=transformer_engine model.cuda_graph_scope=attn,mlp)
  overlap=(ddp.overlap_grad_reduce=true ddp.bucket_size=100000)
  run_dp ws1 "$SG" train "${tiny[@]}" --run-dir "$D/ws1"
  if (( ngpu < 2 )); then
    # One GPU: the whole NCCL path at world size 1 (stepgraph launch -n 1: rendezvous, communicator,
    # collectives inside the graph, teardown) must train bitwise like the plain single-process run.
    echo "dp: this machine has $ngpu GPU(s): world size 1 over NCCL, then world size 2 as two ranks on this GPU"
    run_dp ws1_nccl "$SG" launch -n 1 -- train "${tiny[@]}" --run-dir "$D/ws1_nccl"
    run_dp ws1_nccl_local "$SG" launch -n 1 -- train "${tiny[@]}" "${local_graph[@]}" --run-dir "$D/ws1_nccl_local"
    run_dp ws1_nccl_te "$SG" launch -n 1 -- train "${tiny[@]}" "${te_graph[@]}" --run-dir "$D/ws1_nccl_te"
    run_dp ws1_nccl_distopt_local "$SG" launch -n 1 -- train "${tiny[@]}" optimizer.use_distributed_optimizer=true \
      "${local_graph[@]}" --run-dir "$D/ws1_nccl_distopt_local"
    # The gradient reduction overlapped with the backward, in small buckets (tiny's layers are far below
    # Megatron's 40M): forked inside the local graph, between the region replays with transformer_engine.
    run_dp ws1_nccl_overlap_local "$SG" launch -n 1 -- train "${tiny[@]}" "${overlap[@]}" "${local_graph[@]}" \
      --run-dir "$D/ws1_nccl_overlap_local"
    run_dp ws1_nccl_overlap_te "$SG" launch -n 1 -- train "${tiny[@]}" "${overlap[@]}" "${te_graph[@]}" \
      --run-dir "$D/ws1_nccl_overlap_te"
    run_dp ws1_nccl_overlap_distopt_local "$SG" launch -n 1 -- train "${tiny[@]}" "${overlap[@]}" \
      optimizer.use_distributed_optimizer=true "${local_graph[@]}" --run-dir "$D/ws1_nccl_overlap_distopt_local"
    # Each launched run must have joined the rendezvous and created the NCCL communicator (its log says so).
    nccl_runs=0
    for run in ws1_nccl ws1_nccl_local ws1_nccl_te ws1_nccl_distopt_local ws1_nccl_overlap_local ws1_nccl_overlap_te \
      ws1_nccl_overlap_distopt_local; do
      grep -q "rank 0 of 1 (local rank 0, torchrun)" "$D/$run.log" && grep -q "NCCL [0-9]" "$D/$run.log" &&
        nccl_runs=$(( nccl_runs + 1 ))
    done
    record "dp ws1 runs through NCCL" "$nccl_runs/7 (rendezvous + communicator in the log)"
    "${PY[@]}" bench/data_parallel_report.py losses "$D/ws1/metrics.jsonl" "$D/ws1_nccl/metrics.jsonl" \
      "$D/ws1_nccl_local/metrics.jsonl" "$D/ws1_nccl_te/metrics.jsonl" "$D/ws1_nccl_distopt_local/metrics.jsonl" \
      "$D/ws1_nccl_overlap_local/metrics.jsonl" "$D/ws1_nccl_overlap_te/metrics.jsonl" \
      "$D/ws1_nccl_overlap_distopt_local/metrics.jsonl" | tee "$D/losses_ws1_nccl.txt"
    record "dp ws1 over NCCL vs plain" "$(grep -c 'bitwise equal' "$D/losses_ws1_nccl.txt")/7 bitwise"
  fi
  run_dp ws2 "${ws2[@]}" train "${tiny[@]}" --run-dir "$D/ws2"
  run_dp ws2_local "${ws2[@]}" train "${tiny[@]}" "${local_graph[@]}" --run-dir "$D/ws2_local"
  run_dp ws2_te "${ws2[@]}" train "${tiny[@]}" "${te_graph[@]}" --run-dir "$D/ws2_te"
  run_dp ws2_overlap_local "${ws2[@]}" train "${tiny[@]}" "${overlap[@]}" "${local_graph[@]}" \
    --run-dir "$D/ws2_overlap_local"
  run_dp ws2_overlap_te "${ws2[@]}" train "${tiny[@]}" "${overlap[@]}" "${te_graph[@]}" \
    --run-dir "$D/ws2_overlap_te"
  run_dp ws2_distopt "${ws2[@]}" train "${tiny[@]}" optimizer.use_distributed_optimizer=true \
    --run-dir "$D/ws2_distopt"
  run_dp ws2_distopt_local "${ws2[@]}" train "${tiny[@]}" optimizer.use_distributed_optimizer=true \
    "${local_graph[@]}" --run-dir "$D/ws2_distopt_local"
  # Saved by 2 ranks (sharded optimizer, gathered into one folder) at step 15, resumed by 1 rank.
  run_dp save_ws2 "${ws2[@]}" train "${tiny[@]}" optimizer.use_distributed_optimizer=true \
    train.train_iters=15 checkpoint.save="$D/ckpt" --run-dir "$D/save_ws2"
  run_dp resume_ws1 "$SG" train "${tiny[@]}" checkpoint.load="$D/ckpt" --run-dir "$D/resume_ws1"
  # And the other way: saved by 1 rank at step 15, resumed by 2 (the optimizer state sharded on load).
  rm -rf "$D/ckpt_ws1"
  run_dp save_ws1 "$SG" train "${tiny[@]}" train.train_iters=15 checkpoint.save="$D/ckpt_ws1" --run-dir "$D/save_ws1"
  run_dp resume_ws2 "${ws2[@]}" train "${tiny[@]}" optimizer.use_distributed_optimizer=true \
    checkpoint.load="$D/ckpt_ws1" --run-dir "$D/resume_ws2"
  # bf16 Adam moments (the precision-aware optimizer): 2 ranks' sharded bf16 moments gathered into a checkpoint at
  # step 15, resumed by 1 rank, against 1 rank with bf16 moments throughout.
  bf16_moments=(optimizer.use_precision_aware_optimizer=true optimizer.exp_avg_dtype=bf16 optimizer.exp_avg_sq_dtype=bf16)
  rm -rf "$D/ckpt_bf16_moments"
  run_dp ws1_bf16_moments "$SG" train "${tiny[@]}" "${bf16_moments[@]}" --run-dir "$D/ws1_bf16_moments"
  run_dp save_ws2_bf16_moments "${ws2[@]}" train "${tiny[@]}" optimizer.use_distributed_optimizer=true \
    "${bf16_moments[@]}" train.train_iters=15 checkpoint.save="$D/ckpt_bf16_moments" --run-dir "$D/save_ws2_bf16_moments"
  run_dp resume_ws1_bf16_moments "$SG" train "${tiny[@]}" "${bf16_moments[@]}" checkpoint.load="$D/ckpt_bf16_moments" \
    --run-dir "$D/resume_ws1_bf16_moments"
  echo "-- bf16 moments: saved by world size 2 (distributed optimizer), resumed by 1, against world size 1:"
  "${PY[@]}" bench/data_parallel_report.py losses "$D/ws1_bf16_moments/metrics.jsonl" \
    "$D/save_ws2_bf16_moments/metrics.jsonl" "$D/resume_ws1_bf16_moments/metrics.jsonl" | tee "$D/losses_bf16_moments.txt"
  record "dp bf16 moments ws2 save, ws1 resume" "rc=${PIPESTATUS[0]} (losses_bf16_moments.txt)"
  # bf16 main gradients (ddp.grad_reduce_in_fp32=false), reduced in bf16: world size 2 against 1 (within the
  # tolerance), the local graph at world size 2 against eager, and a distributed-optimizer checkpoint (its fp32 state
  # gathered through the bf16 gradient buffer in two halves) saved at step 15 and resumed, both at world size 2,
  # against the uninterrupted run (both bitwise).
  bf16_grads=(ddp.grad_reduce_in_fp32=false)
  rm -rf "$D/ckpt_bf16_grads"
  run_dp ws1_bf16_grads "$SG" train "${tiny[@]}" "${bf16_grads[@]}" --run-dir "$D/ws1_bf16_grads"
  run_dp ws2_bf16_grads "${ws2[@]}" train "${tiny[@]}" "${bf16_grads[@]}" --run-dir "$D/ws2_bf16_grads"
  run_dp ws2_bf16_grads_local "${ws2[@]}" train "${tiny[@]}" "${bf16_grads[@]}" "${local_graph[@]}" \
    --run-dir "$D/ws2_bf16_grads_local"
  run_dp ws2_distopt_bf16_grads "${ws2[@]}" train "${tiny[@]}" optimizer.use_distributed_optimizer=true \
    "${bf16_grads[@]}" --run-dir "$D/ws2_distopt_bf16_grads"
  run_dp save_ws2_bf16_grads "${ws2[@]}" train "${tiny[@]}" optimizer.use_distributed_optimizer=true \
    "${bf16_grads[@]}" train.train_iters=15 checkpoint.save="$D/ckpt_bf16_grads" --run-dir "$D/save_ws2_bf16_grads"
  run_dp resume_ws2_bf16_grads "${ws2[@]}" train "${tiny[@]}" optimizer.use_distributed_optimizer=true \
    "${bf16_grads[@]}" checkpoint.load="$D/ckpt_bf16_grads" --run-dir "$D/resume_ws2_bf16_grads"
  echo "-- bf16 main gradients: world size 2 against 1; the local graph against eager; a save and resume against the"
  echo "   uninterrupted distributed-optimizer run:"
  {
    "${PY[@]}" bench/data_parallel_report.py losses "$D/ws1_bf16_grads/metrics.jsonl" "$D/ws2_bf16_grads/metrics.jsonl"
    "${PY[@]}" bench/data_parallel_report.py losses "$D/ws2_bf16_grads/metrics.jsonl" \
      "$D/ws2_bf16_grads_local/metrics.jsonl"
    "${PY[@]}" bench/data_parallel_report.py losses "$D/ws2_distopt_bf16_grads/metrics.jsonl" \
      "$D/save_ws2_bf16_grads/metrics.jsonl" "$D/resume_ws2_bf16_grads/metrics.jsonl"
  } | tee "$D/losses_bf16_grads.txt"
  record "dp bf16 main gradients" "$(grep -c 'bitwise equal' "$D/losses_bf16_grads.txt")/3 bitwise (losses_bf16_grads.txt)"
  echo "-- world size 2 ($ws2_where; and the distributed optimizer, and a resume at world size 1) against world size 1:"
  "${PY[@]}" bench/data_parallel_report.py losses "$D/ws1/metrics.jsonl" "$D/ws2/metrics.jsonl" \
    "$D/ws2_distopt/metrics.jsonl" "$D/resume_ws1/metrics.jsonl" "$D/resume_ws2/metrics.jsonl" \
    | tee "$D/losses_ws1_vs_ws2.txt"
  record "dp ws2 vs ws1 losses ($ws2_where)" "rc=${PIPESTATUS[0]} (losses_ws1_vs_ws2.txt)"
  echo "-- every graph mode at world size 2 ($ws2_where) against eager (bitwise expected):"
  "${PY[@]}" bench/data_parallel_report.py losses "$D/ws2/metrics.jsonl" "$D/ws2_local/metrics.jsonl" \
    "$D/ws2_te/metrics.jsonl" "$D/ws2_overlap_local/metrics.jsonl" "$D/ws2_overlap_te/metrics.jsonl" \
    | tee "$D/losses_graphs_ws2.txt"
  "${PY[@]}" bench/data_parallel_report.py losses "$D/ws2_distopt/metrics.jsonl" \
    "$D/ws2_distopt_local/metrics.jsonl" | tee -a "$D/losses_graphs_ws2.txt"
  record "dp graphs (and overlap) vs eager at ws2" "$(grep -c 'bitwise equal' "$D/losses_graphs_ws2.txt")/5 bitwise"
  # One rank stopped or killed while the step's collectives run (tiny for as long as it takes, local graph).
  # rank_pid RUN_DIR RANK: that rank's stepgraph process (the one whose environment says RANK=<RANK>).
  rank_pid() {
    local p
    for p in $(pgrep -f -- "--run-dir $1"); do
      tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2" && { echo "$p"; return 0; }
    done
    return 1
  }
  # wait_steps RUN_DIR N: until rank 0 has recorded N steps (at most 120 s).
  wait_steps() {
    local i
    for i in $(seq 1200); do
      (( $(cat "$1/metrics.jsonl" 2>/dev/null | wc -l) >= $2 )) && return 0
      sleep 0.1
    done
    return 1
  }
  # A NaN at world size 2 (lr 1e30, a checkpoint after every step, the loss check on, whole-step graph): the rank
  # that sees it first stops with status 3 naming the step, the other ends with 70 naming it, and what was saved
  # is finite: a resume loads it (loading verifies every value; the weights lr 1e30 made are finite but huge, so
  # the resumed step is NaN again: status 3).
  rm -rf "$D/ckpt_nan"
  run_dp nan_ws2 "${ws2[@]}" train "${tiny[@]}" "${local_graph[@]}" rerun_state_machine.check_for_nan_in_loss=true \
    optimizer.lr=1e30 scheduler.lr_warmup_iters=0 train.train_iters=8 checkpoint.save="$D/ckpt_nan" \
    checkpoint.save_interval=1 --run-dir "$D/nan_ws2"
  nan_saved=$(cat "$D/ckpt_nan/latest_checkpointed_iteration.txt" 2>/dev/null)
  nan_loaded=no
  if [[ $nan_saved =~ ^[0-9]+$ ]]; then
    run_dp nan_ws2_resume "$SG" train "${tiny[@]}" train.train_iters=$(( nan_saved + 1 )) \
      checkpoint.load="$D/ckpt_nan" --run-dir "$D/nan_ws2_resume"
    grep -q "resumed from .*iter_0*${nan_saved} " "$D/nan_ws2_resume.log" && nan_loaded=yes
  fi
  record "dp NaN at ws2 ($ws2_where)" "$(grep -o "error: step [0-9]*: [a-z ]*NaN or infinite ([a-z_.]*)" "$D/nan_ws2.log" | head -1); last saved: step ${nan_saved:-none}, loads: $nan_loaded"
  long=("${tiny[@]}" "${local_graph[@]}" train.train_iters=100000)
  # SIGTERM to rank 1 only: both ranks stop after the same step, rank 0 saves it, both exit 143.
  rm -rf "$D/ckpt_signal"
  timeout 180 "${ws2[@]}" train "${long[@]}" checkpoint.save="$D/ckpt_signal" --run-dir "$D/signal_ws2" \
    >"$D/signal_ws2.log" 2>&1 &
  runner=$!
  if wait_steps "$D/signal_ws2" 20 && pid=$(rank_pid "$D/signal_ws2" 1); then kill -TERM "$pid"; fi
  wait "$runner"
  rc=$?
  # The signal by name since 7848294 (core/signal_name.h); "signal 15" before.
  stop_line=$(grep -oE "rank 1 received (SIGTERM|signal 15): stopping after step [0-9]+" "$D/signal_ws2.log" | head -1)
  rank0_status=$(grep -oE "stopped by (SIGTERM|signal 15) after step [0-9]+" "$D/signal_ws2/report.html" 2>/dev/null |
    head -1)
  stop_step=$(cat "$D/ckpt_signal/latest_checkpointed_iteration.txt" 2>/dev/null)
  record "dp SIGTERM to rank 1 ($ws2_where)" "rc=$rc (143 expected); rank 0: '${stop_line:-no stop line}', report '${rank0_status:-no stop}'; saved: step ${stop_step:-none}"
  # Resumed at world size 2 for 6 more steps: the stopped run and its resume together train bitwise like one run.
  if [[ $stop_step =~ ^[0-9]+$ ]]; then
    end=$(( stop_step + 6 ))
    run_dp resume_signal_ws2 "${ws2[@]}" train "${tiny[@]}" "${local_graph[@]}" train.train_iters=$end \
      checkpoint.load="$D/ckpt_signal" --run-dir "$D/resume_signal_ws2"
    run_dp straight_ws2 "${ws2[@]}" train "${tiny[@]}" "${local_graph[@]}" train.train_iters=$end \
      --run-dir "$D/straight_ws2"
    "${PY[@]}" bench/data_parallel_report.py losses "$D/straight_ws2/metrics.jsonl" "$D/signal_ws2/metrics.jsonl" \
      "$D/resume_signal_ws2/metrics.jsonl" | tee "$D/losses_signal_ws2.txt"
    record "dp stopped + resumed vs one run (ws2)" "$(grep -c 'bitwise equal' "$D/losses_signal_ws2.txt")/2 bitwise"
  fi
  # SIGKILL to rank 1: rank 0 must end within seconds (status 70), not wait in a collective.
  timeout 180 "${ws2[@]}" train "${long[@]}" --run-dir "$D/kill_ws2" >"$D/kill_ws2.log" 2>&1 &
  runner=$!
  killed_at=
  if wait_steps "$D/kill_ws2" 20 && pid=$(rank_pid "$D/kill_ws2" 1); then
    kill -KILL "$pid"
    killed_at=$(date +%s.%N)
  fi
  wait "$runner"
  rc=$?
  ended_in=$([[ -n $killed_at ]] && python3 -c "print(f'{$(date +%s.%N) - $killed_at:.1f}')" || echo "-")
  record "dp SIGKILL to rank 1 ($ws2_where)" "rc=$rc ($([[ $ws2_where == "two GPUs" ]] && echo "137: launch reports the killed rank" || echo "70: rank 0's")), ended ${ended_in} s after the kill"
  # A failure of rank 1's own while collectives of its steps are in flight (its batch dump cannot be written at step
  # 20: a folder stands where the file goes; a loader error or bad_alloc alike): rank 1 prints it and exits 1 at once
  # without releasing the GPU, whose stream may wait in an all-reduce of rank 0, which has ended (70, naming rank 1's
  # error). Before, rank 1 then waited in the release (cudaStreamSynchronize) until the timeout (124).
  rm -rf "$D/fail_ws2_dump"
  mkdir -p "$D/fail_ws2_dump/rank1/batch_0000020.safetensors"
  failed_from=$(date +%s.%N)
  timeout 180 "${ws2[@]}" train "${long[@]}" --dump-batches "$D/fail_ws2_dump" --run-dir "$D/fail_ws2" \
    >"$D/fail_ws2.log" 2>&1
  rc=$?
  took=$(python3 -c "print(f'{$(date +%s.%N) - $failed_from:.1f}')")
  rank0_line=$(grep -o "ending because rank 1 failed: cannot create [^ ]*" "$D/fail_ws2.log" | head -1)
  record "dp rank-local error on rank 1 ($ws2_where)" "rc=$rc ($([[ $ws2_where == "two GPUs" ]] && echo "1: launch reports rank 1's" || echo "70: rank 0's"); 124: a rank hung), run took ${took} s; rank 0: '${rank0_line:-no such line}'"
  if (( ngpu < 2 )); then
    record "dp bench -ng 2 (scaling)" "NOT RUN: needs 2 GPUs (kind nvidia-h200-x2), this machine has $ngpu"
    # bench -ng 2's rank path on the one GPU (started by the script, each rank a bench rank): it runs, the modes
    # end at the same loss (the bench checks it) and report their graph memory; its times mean nothing here.
    "${ws2[@]}" bench -m llama -mr tiny -g h200 -c bf16 -ng 2 -gb 8 --plain --steps 10 \
      --compare none,local,transformer_engine:attn+mlp --json "$D/bench_tiny_ng2_one_gpu.json" \
      >"$D/bench_tiny_ng2_one_gpu.txt" 2>&1
    rc=$?
    grep -q "ended at different losses" "$D/bench_tiny_ng2_one_gpu.txt" && rc="$rc, LOSSES DIFFER"
    record "dp bench -ng 2 ($ws2_where, not timed)" "rc=$rc (bench_tiny_ng2_one_gpu.txt)"
    sed -n '/^mode /,$p' "$D/bench_tiny_ng2_one_gpu.txt"
    # SIGTERM to bench rank 1 alone while its steps run: it says so and ends (143) without releasing its step, whose
    # stream may wait in a collective; rank 0 ends within seconds naming it (70), rather than waiting in a collective.
    "${ws2[@]}" bench -m llama -mr tiny -g h200 -c bf16 -ng 2 -gb 8 --plain --steps 200000 --compare none \
      --json "$D/bench_sigterm_ng2.json" >"$D/bench_sigterm_ng2.txt" 2>&1 &
    runner=$!
    termed_at=
    for i in $(seq 600); do
      grep -q "^arena " "$D/bench_sigterm_ng2.txt" 2>/dev/null && break
      sleep 0.1
    done
    sleep 5
    for p in $(pgrep -f -- "--json $D/bench_sigterm_ng2.json"); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=1"; then
        kill -TERM "$p" && termed_at=$(date +%s.%N)
        break
      fi
    done
    ( sleep 120; pkill -KILL -f -- "--json $D/bench_sigterm_ng2.json" ) &
    watchdog=$!
    wait "$runner"
    rc=$?
    kill "$watchdog" 2>/dev/null
    ended_in=$([[ -n $termed_at ]] && python3 -c "print(f'{$(date +%s.%N) - $termed_at:.1f}')" || echo "-")
    rank1_line=$(grep -o "\[rank 1\] stepgraph bench stopped by [^;]*" "$D/bench_sigterm_ng2.txt" | head -1)
    record "dp bench SIGTERM to rank 1 ($ws2_where)" "rc=$rc (70: rank 0's; 137: a hang the watchdog killed), ended ${ended_in} s after the signal; '${rank1_line:-no such line}'"
  else
    # Scaling: the same micro batch per GPU, twice the global batch at -ng 2.
    # ng2_run RECIPE MICRO_BATCH SUFFIX [overrides]: bench -ng 2 (twice the global batch) and its scaling over -ng 1.
    ng2_run() {
      local r=$1 mbs=$2 suffix=$3
      shift 3
      "$SG" bench -m llama -mr "$r" -g h200 -c bf16 -ng 2 -gb $(( 2 * mbs )) --plain \
        --compare none,local,transformer_engine:attn+mlp --json "$D/bench_${r}_ng2${suffix}.json" "$@" \
        >"$D/bench_${r}_ng2${suffix}.txt" 2>&1
      local rc=$?
      record "dp bench $r -ng 2${suffix:+ ($suffix)}" "rc=$rc (-ng 1: rc=$rc1)"
      if (( rc1 == 0 && rc == 0 )); then
        echo "-- scaling $r${suffix:+ ($suffix)}:"
        "${PY[@]}" bench/data_parallel_report.py scaling "$D/bench_${r}_ng1.json" "$D/bench_${r}_ng2${suffix}.json" \
          | tee "$D/scaling_${r}${suffix}.txt"
      fi
    }
    for spec in small:8 1b:4; do
      r=${spec%%:*}; mbs=${spec##*:}
      "$SG" bench -m llama -mr "$r" -g h200 -c bf16 -ng 1 --plain --compare none,local,transformer_engine:attn+mlp \
        --json "$D/bench_${r}_ng1.json" >"$D/bench_${r}_ng1.txt" 2>&1
      rc1=$?
      ng2_run "$r" "$mbs" ""
      # The same with the gradient reduction overlapped with the backward (Megatron's buckets).
      ng2_run "$r" "$mbs" _overlap ddp.overlap_grad_reduce=true
    done
  fi
fi

if want dp || want dp_moe; then
  # MoE at world size 2 against 1 on the same global batch: moe/tiny_moe (softmax routing, aux loss and z-loss), and
  # sigmoid and sqrtsoftplus routing with the expert bias and the per-sequence aux loss, all dropless. The losses
  # within fp32 summation-order rounding, the auxiliary losses within 1e-2 relative and the tokens routed per logged
  # step equal (bench/data_parallel_report.py); at world size 2 the whole-step graph and transformer_engine attn,moe
  # bitwise equal to eager. Token counts logged every step.
  moe=(moe/tiny_moe train.global_batch_size=8 train.train_iters=30 scheduler.lr_decay_iters=30 dataset.mock=true
       logger.log_interval=1 model.hidden_dropout=0.1 model.attention_dropout=0.1 model.moe_z_loss_coeff=1e-3 --plain)
  moe_te=("${graphs[@]}" model.cuda_graph_impl=transformer_engine model.cuda_graph_scope=attn,moe)
  moe_bias=(model.moe_router_score_function=sigmoid model.moe_router_enable_expert_bias=true
            model.moe_router_bias_update_rate=1e-2 model.moe_router_load_balancing_type=seq_aux_loss)
  # DeepSeek-V4's score function, routed as sigmoid is (with the expert bias): its own score and backward kernels.
  moe_sqrtsoftplus=(model.moe_router_score_function=sqrtsoftplus "${moe_bias[@]:1}")
  for variant in moe moe_bias moe_sqrtsoftplus; do
    extra=()
    [[ $variant == moe_bias ]] && extra=("${moe_bias[@]}")
    [[ $variant == moe_sqrtsoftplus ]] && extra=("${moe_sqrtsoftplus[@]}")
    run_dp "${variant}_ws1" "$SG" train "${moe[@]}" "${extra[@]}" --run-dir "$D/${variant}_ws1"
    run_dp "${variant}_ws2" "${ws2[@]}" train "${moe[@]}" "${extra[@]}" --run-dir "$D/${variant}_ws2"
    run_dp "${variant}_ws2_local" "${ws2[@]}" train "${moe[@]}" "${extra[@]}" "${local_graph[@]}" \
      --run-dir "$D/${variant}_ws2_local"
    run_dp "${variant}_ws2_te" "${ws2[@]}" train "${moe[@]}" "${extra[@]}" "${moe_te[@]}" --run-dir "$D/${variant}_ws2_te"
    ws2_runs=("$D/${variant}_ws2/metrics.jsonl")
    graph_runs=("$D/${variant}_ws2_local/metrics.jsonl" "$D/${variant}_ws2_te/metrics.jsonl")
    # The distributed optimizer too (with moe_bias the expert bias, an fp32 weight the forward reads, comes from
    # every rank's replica of it: kernels/fp32_replica.h).
    run_dp "${variant}_ws2_distopt" "${ws2[@]}" train "${moe[@]}" "${extra[@]}" \
      optimizer.use_distributed_optimizer=true --run-dir "$D/${variant}_ws2_distopt"
    ws2_runs+=("$D/${variant}_ws2_distopt/metrics.jsonl")
    if [[ $variant == moe ]]; then
      # validation.test_mode: the ranks compare their weights' fingerprints after every step, outside the graph (the
      # same losses as without it), and find them equal.
      run_dp moe_ws2_test_mode "${ws2[@]}" train "${moe[@]}" "${local_graph[@]}" validation.test_mode=true \
        --run-dir "$D/moe_ws2_test_mode"
      graph_runs+=("$D/moe_ws2_test_mode/metrics.jsonl")
      grep -q "after every step the 2 ranks compare fingerprints" "$D/moe_ws2_test_mode.log" \
        || echo "dp_moe: no test_mode note in moe_ws2_test_mode.log"
    fi
    echo "-- $variant: world size 2 ($ws2_where) against world size 1; then its graph modes against its eager run:"
    "${PY[@]}" bench/data_parallel_report.py losses "$D/${variant}_ws1/metrics.jsonl" "${ws2_runs[@]}" \
      | tee "$D/losses_${variant}.txt"
    "${PY[@]}" bench/data_parallel_report.py losses "$D/${variant}_ws2/metrics.jsonl" "${graph_runs[@]}" \
      | tee "$D/losses_${variant}_graphs.txt"
    record "dp $variant ws2 vs ws1 ($ws2_where)" "$(cat "$D/losses_${variant}.txt" "$D/losses_${variant}_graphs.txt" | grep -c 'as the reference')/$(( ${#ws2_runs[@]} + ${#graph_runs[@]} )) MoE metrics as the reference, $(grep -c 'bitwise equal' "$D/losses_${variant}_graphs.txt")/${#graph_runs[@]} graph modes bitwise (losses_${variant}*.txt)"
  done
  # Hybrid Mamba with the distributed optimizer at world size 2 against world size 1: Mamba's dt_bias, A_log and D
  # are fp32 weights the forward reads, from every rank's replica (kernels/fp32_replica.h). The losses within fp32
  # summation-order rounding; the whole-step graph and transformer_engine attn,mamba bitwise equal to eager.
  hybrid=(hybrid/tiny_hybrid train.global_batch_size=8 train.train_iters=30 scheduler.lr_decay_iters=30
          dataset.mock=true logger.log_interval=1 model.hidden_dropout=0.1 model.attention_dropout=0.1 --plain)
  distopt=(optimizer.use_distributed_optimizer=true)
  run_dp hybrid_ws1 "$SG" train "${hybrid[@]}" --run-dir "$D/hybrid_ws1"
  run_dp hybrid_ws2_distopt "${ws2[@]}" train "${hybrid[@]}" "${distopt[@]}" --run-dir "$D/hybrid_ws2_distopt"
  run_dp hybrid_ws2_distopt_local "${ws2[@]}" train "${hybrid[@]}" "${distopt[@]}" "${local_graph[@]}" \
    --run-dir "$D/hybrid_ws2_distopt_local"
  run_dp hybrid_ws2_distopt_te "${ws2[@]}" train "${hybrid[@]}" "${distopt[@]}" "${graphs[@]}" \
    model.cuda_graph_impl=transformer_engine model.cuda_graph_scope=attn,mamba --run-dir "$D/hybrid_ws2_distopt_te"
  # validation.test_mode: the ranks compare fingerprints of their bf16 weights and of their replicas after every step.
  run_dp hybrid_ws2_distopt_test_mode "${ws2[@]}" train "${hybrid[@]}" "${distopt[@]}" "${local_graph[@]}" \
    validation.test_mode=true --run-dir "$D/hybrid_ws2_distopt_test_mode"
  grep -q "after every step the 2 ranks compare fingerprints" "$D/hybrid_ws2_distopt_test_mode.log" \
    || echo "dp_moe: no test_mode note in hybrid_ws2_distopt_test_mode.log"
  # Saved by 2 ranks at step 15 (the fp32 state gathered from the shards) and resumed by 2 (each rank's replica of
  # the Mamba weights written from the checkpoint): steps 1-15 and 16-30 as the uninterrupted run, bitwise.
  rm -rf "$D/ckpt_hybrid"
  run_dp hybrid_save_ws2_distopt "${ws2[@]}" train "${hybrid[@]}" "${distopt[@]}" train.train_iters=15 \
    checkpoint.save="$D/ckpt_hybrid" --run-dir "$D/hybrid_save_ws2_distopt"
  run_dp hybrid_resume_ws2_distopt "${ws2[@]}" train "${hybrid[@]}" "${distopt[@]}" \
    checkpoint.load="$D/ckpt_hybrid" --run-dir "$D/hybrid_resume_ws2_distopt"
  echo "-- hybrid: distributed optimizer at world size 2 ($ws2_where) against world size 1; then its graph modes, and"
  echo "   a save at step 15 and its resume at world size 2, against its uninterrupted run:"
  "${PY[@]}" bench/data_parallel_report.py losses "$D/hybrid_ws1/metrics.jsonl" "$D/hybrid_ws2_distopt/metrics.jsonl" \
    | tee "$D/losses_hybrid.txt"
  rc=${PIPESTATUS[0]}
  "${PY[@]}" bench/data_parallel_report.py losses "$D/hybrid_ws2_distopt/metrics.jsonl" \
    "$D/hybrid_ws2_distopt_local/metrics.jsonl" "$D/hybrid_ws2_distopt_te/metrics.jsonl" \
    "$D/hybrid_ws2_distopt_test_mode/metrics.jsonl" "$D/hybrid_save_ws2_distopt/metrics.jsonl" \
    "$D/hybrid_resume_ws2_distopt/metrics.jsonl" | tee "$D/losses_hybrid_graphs.txt"
  record "dp hybrid distopt ws2 vs ws1 ($ws2_where)" "rc=$rc, $(grep -c 'bitwise equal' "$D/losses_hybrid_graphs.txt")/5 graph modes, test_mode, save and resume bitwise (losses_hybrid*.txt)"
fi

echo
echo "==== summary ($(date -u +%FT%TZ)) ===="
printf '%s\n' "${summary[@]}"
