#!/usr/bin/env bash
# Builds on the GPU machine (16 cores: ~2 min) from headers and static libraries packed here by
# `scripts/gpu_build.sh pack` (that machine has no Debian -dev packages and no network). Usage:
#   here:            bash scripts/gpu_build.sh pack          -> .carry/deps.tgz (ignored; ~4 MB)
#   on the GPU host: bash scripts/gpu_build.sh                (carry .carry), then scripts/gpu.sh
# Faster: a build made here runs there as it is (glibc 2.36 here, 2.39 there; only CUDA libraries are linked
# dynamically), so carrying build/src/stepgraph, build/tests/stepgraph_gpu_tests and build/bench (~50 MB)
# with LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64 saves the ~3 min build
# there. Do not edit sources while that build runs: ninja then keeps objects compiled from the old text.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == pack ]]; then
  bash scripts/setup.sh >/dev/null
  rm -rf .sysdeps && mkdir -p .sysdeps/include .sysdeps/lib/cmake .carry
  cp -r /usr/include/yaml-cpp /usr/include/CLI /usr/include/nlohmann /usr/include/gtest /usr/include/gmock .sysdeps/include/
  cp /usr/local/cuda/include/cudnn*.h .sysdeps/include/
  cp /usr/lib/x86_64-linux-gnu/libyaml-cpp.a /usr/lib/x86_64-linux-gnu/libgtest*.a /usr/lib/x86_64-linux-gnu/libgmock*.a .sysdeps/lib/
  cp -r /usr/lib/x86_64-linux-gnu/cmake/GTest .sysdeps/lib/cmake/
  tar czf .carry/deps.tgz .deps/pip/include .deps/pip/.version .deps/cutlass/cutlass_library/source/include \
    .deps/cutlass/cutlass_library/source/tools/util/include .sysdeps
  rm -rf .sysdeps
  echo "packed .carry/deps.tgz ($(du -h .carry/deps.tgz | cut -f1)); carry .carry"
  exit 0
fi
tar xzf .carry/deps.tgz
cp -rn .sysdeps/include/* /usr/include/ 2>/dev/null || true
cp -n .sysdeps/lib/*.a /usr/lib/x86_64-linux-gnu/ 2>/dev/null || true
mkdir -p /usr/lib/x86_64-linux-gnu/cmake && cp -rn .sysdeps/lib/cmake/GTest /usr/lib/x86_64-linux-gnu/cmake/ 2>/dev/null || true
CUDNN_SO=$(find / \( -path /proc -o -path /sys \) -prune -o -name 'libcudnn.so*' -print 2>/dev/null | grep -E '/libcudnn\.so(\.[0-9]+)*$' | head -1)
echo "cudnn: $CUDNN_SO"
CUDNN_DIR=$(dirname "$CUDNN_SO")
[[ -e $CUDNN_DIR/libcudnn.so ]] || ln -sf "$CUDNN_SO" /tmp/libcudnn.so
LIB=$([[ -e $CUDNN_DIR/libcudnn.so ]] && echo "$CUDNN_DIR/libcudnn.so" || echo /tmp/libcudnn.so)
echo "$CUDNN_DIR" > .carry/cudnn_dir  # the tests and tools run with LD_LIBRARY_PATH=$(cat .carry/cudnn_dir)
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDNN_LIBRARY="$LIB" >/tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log; exit 1; }
cmake --build build -j16 >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -5 /tmp/build.log; exit 1; }
echo "device build: $(( $(date +%s) - t0 )) s"
