#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers of the files and strings a user (or a crash) hands stepgraph (recipes,
# checkpoints, data, command-line overrides, the launcher's environment): libFuzzer harnesses
# (tests/fuzz/*_fuzz.cpp), one per parser, built with clang++ from the host sources they need (no CUDA device code)
#   -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1 -std=c++20
# into a build folder outside the checkout, then run one after the other (one fuzzing process at a time, under
# nice -n 10) from seed corpora that scripts/fuzz_seeds.py writes from tiny valid files. A harness counts an
# sg::Error as the parser's expected answer to bad bytes; a crash, a hang, an ASan/UBSan report, an allocation past
# -rss_limit_mb or any other exception escaping is a finding, kept as crash-*/timeout-*/oom-* in the build folder.
# docs/reliability.md ("Fuzzing the file and string parsers") says what the harnesses found and the tests that keep it fixed.
#
# usage: scripts/fuzz_cpu.sh [--help] [--build-only] [--replay] [HARNESS ...]
#   HARNESS        any of: safetensors indexed_dataset checkpoint_folder hf_config hf_tokenizer config_yaml
#                  run_records config_overrides launcher_env layer_patterns (default: all)
#   --build-only   build the harnesses and write the seed corpora, run nothing
#   --replay       run each harness once over its seeds and its kept findings (crash-*, timeout-*, oom-*), no
#                  fuzzing: a fix's check
# environment:
#   FUZZ_SECONDS   seconds of fuzzing per harness (default 60)
#   FUZZ_DIR       the build folder (default <checkout>/../<checkout name>-fuzz): objects, harness binaries,
#                  corpus/<harness>/ (seeds and what the fuzzer adds), findings/<harness>/, logs/<harness>.log
#   FUZZ_JOBS      compile jobs (default 2)
#   BUILD_DIR      the main build whose libraries (src/libsg_*.a) supply the uninstrumented model, kernel and CUDA
#                  code (default <checkout>/build; scripts/build.sh makes it)
#   CUDA_HOME      the CUDA toolkit (default /usr/local/cuda): its headers and libcudart_static, cublasLt, cudnn
#   CXX            the compiler (default /usr/bin/clang++)
#   SG_FUZZ_TMP    where the harnesses write their scratch files (default /dev/shm)
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD

all_harnesses=(safetensors indexed_dataset checkpoint_folder hf_config hf_tokenizer config_yaml run_records
               config_overrides launcher_env layer_patterns)
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

build_only=0
replay=0
harnesses=()
for arg in "$@"; do
  case $arg in
    -h | --help) usage; exit 0 ;;
    --build-only) build_only=1 ;;
    --replay) replay=1 ;;
    -*) echo "fuzz_cpu.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
    *)
      if [[ ! -f $src/tests/fuzz/${arg}_fuzz.cpp ]]; then
        echo "fuzz_cpu.sh: no harness $arg (tests/fuzz/${arg}_fuzz.cpp); harnesses: ${all_harnesses[*]}" >&2
        exit 2
      fi
      harnesses+=("$arg")
      ;;
  esac
done
((${#harnesses[@]})) || harnesses=("${all_harnesses[@]}")

out=${FUZZ_DIR:-$src/../$(basename "$src")-fuzz}
mkdir -p "$out"
out=$(cd "$out" && pwd)
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-2}
cxx=${CXX:-/usr/bin/clang++}
command -v "$cxx" >/dev/null || { echo "fuzz_cpu.sh: no $cxx (apt-get install clang)" >&2; exit 2; }

# The include paths CMake gives these sources (src/CMakeLists.txt, cmake/Dependencies.cmake): src/, the CUDA
# toolkit's headers (the model's headers name cuda_runtime.h types), the PyPI headers of .deps/; nlohmann json,
# yaml-cpp and zlib come from /usr/include.
cuda=${CUDA_HOME:-/usr/local/cuda}
includes=(-I"$src/src" -I"$src/tests" -isystem "$cuda/include" -isystem "$src/.deps/pip/include")
sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
cflags=(-g -O1 -std=c++20 -w "${includes[@]}" "${sanitize[@]}")

# The host sources of the parsers and what they call, archived (the linker takes the objects a harness needs),
# instrumented for coverage. What they reach beyond (the model's layers, whose declarations validate() and the
# config's derived keys read, with the kernels and CUDA code they name) comes uninstrumented from the main build's
# libraries: ${BUILD_DIR:-<checkout>/build}/src/libsg_*.a (scripts/build.sh builds them; no GPU is needed to link).
sources() {
  ls "$src"/src/{core,checkpoint,data,config}/*.cpp
  ls "$src"/src/train/{run_report,svg_chart,run_folder,metrics}.cpp
  ls "$src"/src/dist/{hostlist,world_env}.cpp "$src"/src/model/layer_kind.cpp "$src"/src/bench/bridge_flags.cpp
}
main_build=${BUILD_DIR:-$src/build}
main_libs=(model graph dist kernels cuda reference core)

build() {
  local objdir=$out/obj
  mkdir -p "$objdir" "$out/bin"
  # The recipes CMake embeds (cmake/EmbedRecipes.cmake); the harnesses need none: an empty list.
  local embedded=$out/embedded_recipes.cpp
  if [[ ! -f $embedded ]]; then
    printf '%s\n' '#include "config/config.h"' 'namespace sg::config {' \
      'const std::vector<EmbeddedRecipe>& embedded_recipes() { static const std::vector<EmbeddedRecipe> r; return r; }' \
      '}' >"$embedded"
  fi
  local objects=() pending=()
  while read -r f; do
    local o=$objdir/$(echo "${f#"$src"/}" | tr / _).o
    objects+=("$o")
    [[ -f $o && $o -nt $f ]] || pending+=("$f:$o")
  done < <(sources; echo "$embedded")
  # -fsanitize=fuzzer-no-link: coverage for the fuzzer in the library code, libFuzzer's main only in the harness.
  if ((${#pending[@]})); then
    echo "fuzz_cpu.sh: compiling ${#pending[@]} sources into $objdir"
    printf '%s\n' "${pending[@]}" | nice -n 10 xargs -P "$jobs" -I{} bash -c \
      'f=${1%%:*}; o=${1#*:}; '"$cxx"' '"${cflags[*]}"' -fsanitize=fuzzer-no-link -c "$f" -o "$o" || { echo "failed: $f" >&2; exit 255; }' _ {}
  fi
  for lib in "${main_libs[@]}"; do
    [[ -f $main_build/src/libsg_$lib.a ]] || {
      echo "fuzz_cpu.sh: no $main_build/src/libsg_$lib.a: build stepgraph first (scripts/build.sh), or set BUILD_DIR" >&2
      exit 2
    }
  done
  local libs=()
  for lib in "${main_libs[@]}"; do libs+=("$main_build/src/libsg_$lib.a"); done
  rm -f "$out/libsg_fuzz.a"
  ar qc "$out/libsg_fuzz.a" "${objects[@]}"
  for h in "${harnesses[@]}"; do
    local bin=$out/bin/${h}_fuzz
    echo "fuzz_cpu.sh: linking $bin"
    nice -n 10 "$cxx" "${cflags[@]}" -fsanitize=fuzzer "$src/tests/fuzz/${h}_fuzz.cpp" \
      -Wl,--start-group "$out/libsg_fuzz.a" "${libs[@]}" -Wl,--end-group \
      /usr/lib/x86_64-linux-gnu/libyaml-cpp.a /usr/lib/x86_64-linux-gnu/libz.a \
      -L"$cuda/lib64" -lcudart_static -lcublasLt -lcudnn -ldl -lrt -lpthread -o "$bin"
  done
}

build
python3 "$src/scripts/fuzz_seeds.py" --out "$out/seeds" --checkout "$src"
((build_only)) && exit 0

# Inputs past these sizes add nothing the parsers do not already see (and run slower).
max_len() {
  case $1 in
    indexed_dataset | safetensors) echo 8192 ;;
    *) echo 16384 ;;
  esac
}

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
mkdir -p "$out/logs"
summary=()
status=0
for h in "${harnesses[@]}"; do
  corpus=$out/corpus/$h
  findings=$out/findings/$h
  log=$out/logs/$h.log
  mkdir -p "$corpus" "$findings"
  opts=(-rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -max_len="$(max_len "$h")" -print_final_stats=1
        -artifact_prefix="$findings/")
  if ((replay)); then
    mapfile -t kept < <(find "$findings" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \))
    echo "fuzz_cpu.sh: $h: replaying its seeds and ${#kept[@]} kept findings"
    if nice -n 10 "$out/bin/${h}_fuzz" "${opts[@]}" -runs=0 "$out/seeds/$h" >"$log" 2>&1 &&
      { ((${#kept[@]} == 0)) || nice -n 10 "$out/bin/${h}_fuzz" "${opts[@]}" "${kept[@]}" >>"$log" 2>&1; }; then
      summary+=("$h: replay passed")
    else
      summary+=("$h: replay FAILED (see $log)")
      status=1
    fi
    continue
  fi
  echo "fuzz_cpu.sh: $h: fuzzing for $seconds s (log: $log)"
  before=$(find "$findings" -maxdepth 1 -type f | wc -l)
  rc=0
  nice -n 10 "$out/bin/${h}_fuzz" "${opts[@]}" -max_total_time="$seconds" "$corpus" "$out/seeds/$h" >"$log" 2>&1 || rc=$?
  after=$(find "$findings" -maxdepth 1 -type f | wc -l)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  summary+=("$h: ${runs:-?} runs, ${cov:-cov: ?}, corpus $(find "$corpus" -type f | wc -l) inputs, $((after - before)) new finding(s) (exit $rc)")
  if ((after > before || rc != 0)); then
    status=1
    grep -m3 -E 'ERROR: |runtime error|non-sg exception|non-std exception|emit_yaml wrote' "$log" | sed 's/^/    /' || true
  fi
done
echo
echo "fuzz_cpu.sh: summary ($out)"
printf '  %s\n' "${summary[@]}"
exit $status
