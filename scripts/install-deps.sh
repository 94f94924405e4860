#!/usr/bin/env bash
# Installs what gyre builds and tests with, from Debian 12's packages. Safe to re-run.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config  # toolchain
  libasio-dev libcli11-dev libssl-dev           # standalone Asio, command lines, HMAC/random
  libibverbs-dev ibverbs-providers              # rdma transport (rxe, mlx5, ... providers)
  doctest-dev                                   # tests
  clang libclang-rt-14-dev clang-format         # libFuzzer targets, format check
  procps                                        # pgrep, used by the process tests
  iproute2 nftables util-linux                  # tests/cluster: namespaces, links, loss
  slurm-wlm munge                               # tests/slurm: srun launches gyre
  python3-torch libtorch-dev pybind11-dev       # gyre_torch against Debian's torch 1.13
  python3-venv python3-dev                      # gyre_torch against torch 2.x from PyPI
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
