#!/usr/bin/env bash
# The torch tests against torch 2.x from PyPI: installs torch and accelerate with pip for the
# python3 first on PATH (GYRE_TORCH2_PYTHON overrides) where it has no torch 2.x yet, builds
# gyre_torch for it in build-torch2, and runs every torch.* test there, and cluster.torch (torchrun, accelerate,
# FSDP, and CUDA tensors where there is a GPU: GYRE_TORCH2_CUDA=ON|OFF overrides). Debian's torch 1.13 is what scripts/test.sh tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
python=${GYRE_TORCH2_PYTHON:-$(command -v python3)}
if ! "$python" -c 'import torch, accelerate, sys; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; then
  "$python" -m pip install --quiet 'torch>=2' accelerate
fi
echo "=== gyre_torch for $("$python" -c 'import torch; print("torch", torch.__version__)') ($python)"
# gyre with CUDA (CUDA tensors, torch.cuda) where a GPU is visible, else the quicker host build.
cuda=${GYRE_TORCH2_CUDA:-$(nvidia-smi -L >/dev/null 2>&1 && echo AUTO || echo OFF)}
cmake -S . -B build-torch2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DGYRE_WITH_CUDA="$cuda" \
  -DGYRE_WITH_TORCH=ON -DGYRE_TORCH_PYTHON="$python"
cmake --build build-torch2 -j "$(nproc)"
(cd build-torch2 && ctest --output-on-failure -R '^(torch\..*|cluster\.torch)$')
