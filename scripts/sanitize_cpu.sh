#!/usr/bin/env bash
# The CPU tests (ctest -LE gpu) under a host sanitizer: the C++ host code built with
#   address: -fsanitize=address,undefined (leaks checked, any undefined behaviour fatal)
#   thread:  -fsanitize=thread
# into its own build folder, outside the checkout: ${BUILD_DIR:-<checkout>/../<checkout name>-san-<sanitizer>}.
# CUDA device code is built as usual and not sanitized (GPU: scripts/gpu.sh sanitize, compute-sanitizer).
# Suppressions, each named and explained: scripts/sanitizers/*.supp.
# usage: scripts/sanitize_cpu.sh [address|thread] [extra ctest arguments, e.g. -R dist/]
# JOBS (default nproc) sets the build's and ctest's parallelism; SKIP_BUILD=1 only runs ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
sanitizer=${1:-address}
shift || true
case $sanitizer in
  address) flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" ;;
  thread) flags="-fsanitize=thread -fno-omit-frame-pointer" ;;
  *)
    echo "usage: $0 [address|thread] [ctest arguments]" >&2
    exit 2
    ;;
esac
build=${BUILD_DIR:-$src/../$(basename "$src")-san-$sanitizer}
jobs=${JOBS:-$(nproc)}

launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$src" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-20G}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

if [[ -z ${SKIP_BUILD:-} ]]; then
  start=$SECONDS
  if [[ ! -f $build/build.ninja ]]; then
    cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
      -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags"
  fi
  # What ctest -LE gpu runs: the CPU tests, the CLI and the benches (their flags); not the GPU tests.
  targets=$(ninja -C "$build" -t targets all | sed -n 's/: phony$//p' |
    grep -E '^(test_[a-z0-9_]+|[a-z0-9_]+_bench|stepgraph)$' | grep -v '^cmake_')
  # shellcheck disable=SC2086
  nice ninja -C "$build" -j "$jobs" $targets
  echo "sanitize_cpu.sh: built in $((SECONDS - start)) s"
fi

supp=$src/scripts/sanitizers
# Every report goes to a file of its own (<logs>/report.<pid>), also those of the stepgraph processes the tests
# start and read the output of, or expect to fail: a test that passes cannot hide one.
logs=$build/sanitizer-reports
rm -rf "$logs"
mkdir -p "$logs"
common="halt_on_error=1:print_stacktrace=1:log_path=$logs/report"
export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:$common"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="$common"
# atexit_sleep_ms=0: TSan otherwise waits 1 s in every exit of a process with threads (to catch races at exit),
# which the stop tests' timings (a second signal exits at once, the watchdog after its 1.5 s grace) cannot absorb.
export TSAN_OPTIONS="suppressions=$supp/tsan.supp:second_deadlock_stack=1:atexit_sleep_ms=0:$common"
start=$SECONDS
cd "$build"
status=0
ctest -LE gpu --output-on-failure -j "$jobs" "$@" || status=$?
echo "sanitize_cpu.sh: ctest ran in $((SECONDS - start)) s"
# A file with a warning only (tests/simt_emulator.h's swapcontext, which ASan "may not fully support") is no report.
reports=$(grep -lE 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:|WARNING: ThreadSanitizer:' -r "$logs" | sort || true)
if [[ -n $reports ]]; then
  for r in $reports; do
    echo "=== $r"
    head -n 60 "$r"
  done
  echo "sanitize_cpu.sh: $(echo "$reports" | wc -l) sanitizer report(s) in $logs" >&2
  status=1
else
  echo "sanitize_cpu.sh: no sanitizer report"
fi
exit $status
