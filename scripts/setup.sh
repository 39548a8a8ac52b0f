#!/usr/bin/env bash
# Installs everything stepgraph needs to build and test. Idempotent: a second run changes nothing.
#   Debian: cmake, ninja, g++, yaml-cpp (static archive), CLI11, nlohmann-json, GoogleTest, zlib (static),
#           protobuf (static protobuf-lite + protoc: TensorBoard event files)
#   PyPI:   nvidia-cudnn-frontend (C++ headers, into .deps/pip), nvidia-cutlass (CUTLASS/CuTe C++ headers, into
#           .deps/cutlass), nvidia-nvml-dev-cu12 (nvml.h, into .deps/nvml; the CUDA 13 toolkit here lacks it),
#           safetensors + numpy (checkpoint tests), pyyaml (tests/tools/torch_recipes_test.py),
#           tokenizers (tools/train_tokenizer.py, tools/preprocess_data.py); tensorboard + absl-py +
#           protobuf without their other dependencies (~8 MB: the tests read our event files with
#           TensorBoard's own EventAccumulator);
#           transformers only with SG_SETUP_TRANSFORMERS=1 (tokenizer-folder check in tests/tools; ~300 MB)
#   CUDA 13 toolkit is expected in /usr/local/cuda (nvcc, cuBLASLt, cuDNN, NCCL, CUPTI, NVTX).
set -euo pipefail
cd "$(dirname "$0")/.."

CUDNN_FRONTEND_VERSION=1.32.0
CUTLASS_VERSION=4.2.0.0
NVML_DEV_VERSION=12.9.79
TOKENIZERS_VERSION=0.23.3
TRANSFORMERS_VERSION=5.24.0
TENSORBOARD_VERSION=2.21.0
ABSL_VERSION=2.5.1
PROTOBUF_PY_VERSION=7.36.2
debs=(cmake ninja-build g++ ccache libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libgtest-dev zlib1g-dev python3-pip
      libprotobuf-dev protobuf-compiler)
missing=()
for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Header-only PyPI wheels, each pinned in its own .deps/ folder (reinstalled when the pinned version changes):
#   pip_headers DIR PACKAGE VERSION FILE   (FILE: a header that proves the install, relative to DIR)
pip_headers() {
  local dir=$1 package=$2 version=$3 file=$4
  if [[ ! -f "$dir/$file" ]] || [[ "$(cat "$dir/.version" 2>/dev/null)" != "$version" ]]; then
    echo "setup: installing $package==$version headers into $dir"
    rm -rf "$dir"
    python3 -m pip install -q --disable-pip-version-check --no-deps --target "$dir" "$package==$version"
    echo "$version" > "$dir/.version"
  fi
}
pip_headers .deps/pip nvidia-cudnn-frontend "$CUDNN_FRONTEND_VERSION" include/cudnn_frontend.h
# CUTLASS 3.x (the sm_90 grouped GEMM of the MoE experts): the wheel carries the C++ include trees under
# cutlass_library/source/{include,tools/util/include}; its Python dependencies are not needed (--no-deps).
pip_headers .deps/cutlass nvidia-cutlass "$CUTLASS_VERSION" cutlass_library/source/include/cutlass/cutlass.h
# NVML's header (stepgraph bench samples board power and SM clock); the library is the driver's, loaded at run time.
pip_headers .deps/nvml nvidia-nvml-dev-cu12 "$NVML_DEV_VERSION" nvidia/nvml_dev/include/nvml.h

if ! python3 -c "import safetensors, numpy" >/dev/null 2>&1; then
  echo "setup: installing safetensors and numpy from PyPI"
  python3 -m pip install -q --disable-pip-version-check safetensors numpy
fi

# PyYAML: bench/torch_config.py reads the recipes (tests/tools/torch_recipes_test.py checks every one).
if ! python3 -c "import yaml" >/dev/null 2>&1; then
  echo "setup: installing pyyaml from PyPI"
  python3 -m pip install -q --disable-pip-version-check pyyaml
fi

# tokenizers needs huggingface_hub only to download from the Hub; the tools work offline from local
# files, so it is installed alone (seconds instead of a minute of dependencies).
if [[ "$(python3 -c 'import tokenizers; print(tokenizers.__version__)' 2>/dev/null)" != "$TOKENIZERS_VERSION" ]]; then
  echo "setup: installing tokenizers==$TOKENIZERS_VERSION from PyPI"
  python3 -m pip install -q --disable-pip-version-check --no-deps "tokenizers==$TOKENIZERS_VERSION"
fi

# TensorBoard's reader only (no TensorFlow, no server dependencies): what tests/tools/user_data_path_test.py
# checks the event files with.
if [[ "$(python3 -c 'import tensorboard; print(tensorboard.__version__)' 2>/dev/null)" != "$TENSORBOARD_VERSION" ]] || \
   ! python3 -c 'import absl, google.protobuf' >/dev/null 2>&1; then
  echo "setup: installing tensorboard==$TENSORBOARD_VERSION (event-file reader; no dependencies) from PyPI"
  python3 -m pip install -q --disable-pip-version-check --no-deps "tensorboard==$TENSORBOARD_VERSION" \
    "absl-py==$ABSL_VERSION" "protobuf==$PROTOBUF_PY_VERSION"
fi

# transformers (no torch) with its dependencies is ~300 MB, ~30 packages and took 5.5 min on a fresh
# machine; tests/tools only uses it to check that AutoTokenizer loads a trained folder and skips that
# check with a notice without it. Opt in with SG_SETUP_TRANSFORMERS=1.
if [[ "${SG_SETUP_TRANSFORMERS:-0}" == 1 ]] && \
   [[ "$(python3 -c 'import transformers; print(transformers.__version__)' 2>/dev/null)" != "$TRANSFORMERS_VERSION" ]]; then
  echo "setup: installing transformers==$TRANSFORMERS_VERSION from PyPI (SG_SETUP_TRANSFORMERS=1)"
  python3 -m pip install -q --disable-pip-version-check "transformers==$TRANSFORMERS_VERSION" \
    "tokenizers==$TOKENIZERS_VERSION"
fi

if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup: error: no CUDA toolkit at /usr/local/cuda (need CUDA 13 with nvcc, cuBLASLt, cuDNN)" >&2
  exit 1
fi
echo "setup: ok"
