#!/usr/bin/env bash
# Prepares what bench/mamba_ssd_reference.py and bench/torch_reference.py (hybrid models, impl mamba_ssm)
# need on the GPU machine (which cannot fetch anything): mamba_ssm 2.3.2's Python sources in
# third_party/mamba_ssm-2.3.2 (the folder holding the mamba_ssm package; bench/mamba_ssm_src.py imports them
# without the package's compiled extension) and einops and packaging wheels in third_party/wheels (used only
# where the machine lacks them). third_party/ is git-ignored; carry it to the GPU run.
#
#   bash scripts/fetch_mamba_ssm.sh [GIT_DIR]
#
# With GIT_DIR (a clone or mirror of github.com/state-spaces/mamba), the sources are the tag v2.3.2's.
# Without it, pip downloads the sdist; PyPI's only 2.3.2 sdist is 2.3.2.post1, and pip prepares its
# metadata by running its setup.py, which imports torch: that works only where torch is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=third_party/mamba_ssm-2.3.2
mkdir -p third_party/wheels
python3 -m pip download -q --no-deps --only-binary=:all: einops==0.8.1 packaging==25.0 -d third_party/wheels
rm -rf "$dest" && mkdir -p "$dest"
if [[ $# -ge 1 ]]; then
  git -C "$1" archive v2.3.2 mamba_ssm | tar -x -C "$dest"
else
  tmp=$(mktemp -d)
  MAMBA_SKIP_CUDA_BUILD=TRUE python3 -m pip download -q --no-deps --no-binary :all: --no-build-isolation \
    mamba-ssm==2.3.2.post1 -d "$tmp"
  tar -xzf "$tmp"/mamba_ssm-*.tar.gz -C "$tmp"
  mv "$tmp"/mamba_ssm-*/mamba_ssm "$dest"/
  rm -rf "$tmp"
fi
test -f "$dest/mamba_ssm/ops/triton/ssd_combined.py"
echo "mamba_ssm sources in $dest, einops in third_party/wheels"
