#!/usr/bin/env bash
# The torch tests against torch 2.x from PyPI: builds gyre_torch in build-torch2 for a Python
# with torch 2.x and accelerate, and runs every torch.* test there and cluster.torch
# (torchrun, accelerate, FSDP and fully_shard, and CUDA tensors where there is a GPU:
# GYRE_TORCH2_CUDA=ON|OFF overrides; without a GPU the CUDA path is still compiled where it can be). The Python: GYRE_TORCH2_PYTHON if set, else the python3
# first on PATH where it has both already, else a virtual environment (build-torch2-venv) into
# which pip installs them, leaving the system's Python as it was (Debian's refuses pip, and its
# torch 1.13 is what scripts/test.sh tests).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
has_torch2() {
  "$1" -c 'import torch, accelerate, sys; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null
}
python=${GYRE_TORCH2_PYTHON:-$(command -v python3)}
if [ -z "${GYRE_TORCH2_PYTHON:-}" ] && ! has_torch2 "$python"; then
  venv=$PWD/build-torch2-venv
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  python=$venv/bin/python
  if ! has_torch2 "$python"; then
    echo "=== pip install torch accelerate into $venv"
    "$python" -m pip install --quiet --disable-pip-version-check 'torch>=2' accelerate
  fi
fi
has_torch2 "$python" || { echo "$python has no torch 2.x with accelerate"; exit 1; }
echo "=== gyre_torch for $("$python" -c 'import torch; print("torch", torch.__version__)') ($python)"
# gyre with CUDA (CUDA tensors, torch.cuda) where a GPU is visible. Without one, where nvcc is
# found and torch has CUDA, the same for one GPU architecture: the module's CUDA path compiles
# (torch.cuda then skips, saying why); else the quicker host build.
cuda_args=()
if [ -n "${GYRE_TORCH2_CUDA:-}" ]; then
  cuda_args=(-DGYRE_WITH_CUDA="$GYRE_TORCH2_CUDA")
elif nvidia-smi -L >/dev/null 2>&1; then
  cuda_args=(-DGYRE_WITH_CUDA=AUTO)
elif { command -v nvcc || [ -x /usr/local/cuda/bin/nvcc ]; } >/dev/null &&
  "$python" -c 'import sys, torch; sys.exit(torch.version.cuda is None)'; then
  cuda_args=(-DGYRE_WITH_CUDA=AUTO -DGYRE_CUDA_ARCHITECTURES=90-real)
else
  cuda_args=(-DGYRE_WITH_CUDA=OFF)
fi
cmake -S . -B build-torch2 -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" \
  -DGYRE_WITH_TORCH=ON -DGYRE_TORCH_PYTHON="$python"
# Only what the torch tests run: the module, and gyre-run and gyre-rendezvous for the launches.
cmake --build build-torch2 -j "$(nproc)" --target gyre_torch_ext gyre-run gyre-rendezvous
(cd build-torch2 && ctest --output-on-failure --timeout 900 -R '^(torch\..*|cluster\.torch)$')
