#!/usr/bin/env bash
# Command 1: install dependencies, build, and run the main job: 4 ranks over loopback with
# the rendezvous embedded in gyre-run, printing an nccl-tests style all-reduce table.
# Extra arguments go to gyre-bench (e.g. -e 64M).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build
build/tools/gyre-run -n 4 build/tools/gyre-bench all_reduce "$@"
