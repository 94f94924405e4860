#!/usr/bin/env bash
# The GPU checks in one command, on a machine with an NVIDIA GPU and the CUDA toolkit:
#   tools/gpu-check.sh [REPORT_DIR]      (default: $OUT when set, else ./gpu-check-report)
# Builds the CUDA kernels, their test and their benchmark with nvcc and g++ alone (nothing else
# need be installed: no CMake dependencies), then runs
#   1. the kernel test (every type and op, bit for bit against the CPU kernels),
#   2. the same test under compute-sanitizer memcheck and racecheck (quick sizes),
#   3. the kernel benchmark (reduce against the device's copy bandwidth, 256 MiB),
#   4. collectives on CUDA memory: as kernels over cuda_ipc links (also under memcheck and
#      racecheck), then staged with each kind of stream wait; all_reduce busbw over cuda_ipc
#      (ranks as processes on this GPU, without and with MPS), NCCL beside it where nccl-tests
#      is installed, and the staged path on host and CUDA buffers side by side (where the full
#      CMake build configures, or from GPU_CHECK_BUILD_DIR),
#   5. every torch test against python3's torch, CUDA tensors included (where it has torch),
# and writes REPORT_DIR/report.md with each step's result and output. Exits non-zero when a
# step fails. Leaves the GPU's settings alone.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
report_dir=${1:-${OUT:-$PWD/gpu-check-report}}
mkdir -p "$report_dir"
report=$report_dir/report.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$nvcc" ] || { echo "gpu-check: no nvcc (PATH or /usr/local/cuda/bin)" >&2; exit 2; }
build_only=${GPU_CHECK_BUILD_ONLY:-0}  # 1: compile everything for sm_90, run nothing (no GPU)
if [ "$build_only" = 1 ]; then
  arch=sm_90
else
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu-check: no NVIDIA GPU visible (nvidia-smi -L failed)" >&2
    exit 2
  fi
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '. ')
  arch=sm_${cap:-90}
fi

failed=0
{
  echo "# gyre GPU check"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo '```'
  [ "$build_only" = 1 ] || nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
  "$nvcc" --version | tail -2
  echo '```'
} >"$report"

# step NAME COMMAND...: runs it, appends its result and the tail of its output to the report.
step() {
  local name=$1
  shift
  local log=$report_dir/$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_').log
  echo "== $name"
  local start=$SECONDS
  "$@" >"$log" 2>&1
  local rc=$?
  local verdict=PASS
  if [ $rc -ne 0 ]; then
    verdict="FAIL (exit $rc)"
    failed=1
  fi
  echo "$verdict ($((SECONDS - start)) s)"
  {
    echo
    echo "## $name: $verdict, $((SECONDS - start)) s"
    echo
    echo '```'
    tail -40 "$log"
    echo '```'
  } >>"$report"
  return $rc
}

build() {
  local flags=(-O3 -std=c++17 -I"$src" -I"$src/include")
  g++ "${flags[@]}" -c "$src/kernels/cpu/reduce.cc" -o "$work/reduce.o" &&
    g++ "${flags[@]}" -c "$src/kernels/cpu/reduce_generic.cc" -o "$work/reduce_generic.o" &&
    g++ "${flags[@]}" -mavx2 -mf16c -mfma -c "$src/kernels/cpu/reduce_avx2.cc" \
      -o "$work/reduce_avx2.o" &&
    { "$nvcc" "${flags[@]}" -arch="$arch" -Xptxas -v -c "$src/kernels/cuda/reduce.cu" \
      -o "$work/reduce_cuda.o" 2>"$report_dir/ptxas.txt" || { cat "$report_dir/ptxas.txt"; false; }; } &&
    { "$nvcc" "${flags[@]}" -arch="$arch" -Xptxas -v -c "$src/algorithms/device_collectives.cu" \
      -o "$work/device_collectives.o" 2>"$report_dir/ptxas-collectives.txt" ||
      { cat "$report_dir/ptxas-collectives.txt"; false; }; } &&
    "$nvcc" "${flags[@]}" -arch="$arch" "$src/tests/cuda/kernels_test.cc" "$work"/reduce*.o \
      -o "$work/cuda_kernel_tests" &&
    "$nvcc" "${flags[@]}" -arch="$arch" "$src/tools/bench/cuda_kernel_bench.cc" \
      "$work/reduce_cuda.o" -o "$work/gyre-cuda-kernel-bench" &&
    echo "built for $arch: $(grep -c 'Compiling entry' "$report_dir/ptxas.txt") kernels," \
      "$(grep -cE '[1-9][0-9]* bytes spill' "$report_dir/ptxas.txt") lines reporting spills" \
      "(registers and spills per kernel: ptxas.txt); collective kernels:" \
      "$(grep -c 'Compiling entry' "$report_dir/ptxas-collectives.txt")" \
      "(ptxas-collectives.txt)"
}

if step "build ($arch)" build && [ "$build_only" != 1 ]; then
  step "kernel test" "$work/cuda_kernel_tests"
  if [ -x "$sanitizer" ]; then
    step "memcheck" env GYRE_CUDA_TEST_QUICK=1 "$sanitizer" --tool memcheck --error-exitcode 1 \
      --leak-check full "$work/cuda_kernel_tests"
    step "racecheck" env GYRE_CUDA_TEST_QUICK=1 "$sanitizer" --tool racecheck --error-exitcode 1 \
      "$work/cuda_kernel_tests"
  else
    echo "no compute-sanitizer: memcheck and racecheck not run" | tee -a "$report"
    failed=1
  fi
  step "kernel benchmark" "$work/gyre-cuda-kernel-bench" 256 20
  # Collectives on CUDA memory need the whole library, hence its dependencies (libasio-dev,
  # doctest-dev, libcli11-dev, libssl-dev): built here where they are installed, or taken from
  # GPU_CHECK_BUILD_DIR (a CMake build made elsewhere with CUDA), else said so.
  full=${GPU_CHECK_BUILD_DIR:-}
  # gyre_torch too, where python3 has torch (its CUDA tensors run in the last step).
  if [ -z "$full" ] && cmake -S "$src" -B "$work/full" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGYRE_WITH_CUDA=ON -DGYRE_CUDA_ARCHITECTURES="${arch#sm_}-real" \
    -DGYRE_TORCH_PYTHON="$(command -v python3)" >"$report_dir/full-configure.log" 2>&1 &&
    cmake --build "$work/full" >"$report_dir/full-build.log" 2>&1; then
    full=$work/full
  fi
  if [ -n "$full" ]; then
    # Collectives as kernels over cuda_ipc links (the default between GPUs of one host), under
    # compute-sanitizer too, then staged through pinned host memory with each kind of wait.
    step "collectives on CUDA memory (cuda_ipc kernels)" "$full/tests/cuda_buffer_tests"
    step "graph capture, timeouts and abort on CUDA memory (cuda_ipc kernels)" \
      "$full/tests/cuda_failure_tests"
    if [ -x "$sanitizer" ]; then
      for tool in memcheck racecheck; do
        step "collectives over cuda_ipc under $tool" "$sanitizer" --tool $tool --error-exitcode 1 \
          "$full/tests/cuda_buffer_tests" -tc='*every collective*,*alternating*'
      done
    fi
    for wait in memop kernel; do
      step "collectives on CUDA memory (staged, $wait wait)" env GYRE_CUDA_IPC=0 \
        GYRE_CUDA_WAIT=$wait "$full/tests/cuda_buffer_tests"
      step "graph capture, timeouts and abort on CUDA memory (staged, $wait wait)" env \
        GYRE_CUDA_IPC=0 GYRE_CUDA_WAIT=$wait "$full/tests/cuda_failure_tests"
    done
    # All-reduce busbw over cuda_ipc, ranks as processes sharing this one GPU: without MPS their
    # kernels take turns on the GPU (time slices), so it runs again under a private MPS daemon
    # where nvidia-cuda-mps-control exists (started here, stopped after; the GPU's own settings
    # are left alone). Then the staged path, for the figure of issue #6 (>= 80% of host).
    ipc_bench() {  # ipc_bench LABEL LARGEST
      for n in 2 4; do
        echo "## n=$n $1"
        "$full/tools/gyre-run" -n $n "$full/tools/gyre-bench" all_reduce -b 1M -e "$2" -f 4 \
          -n 10 -w 3 --cuda | grep -v '^\[[1-9]\]' || return 1
      done
    }
    # Without MPS every wait may cost a time slice: smaller sizes keep the step bounded.
    step "all_reduce over cuda_ipc (no MPS)" ipc_bench "cuda_ipc" 64M
    if command -v nvidia-cuda-mps-control >/dev/null; then
      export CUDA_MPS_PIPE_DIRECTORY=$work/mps-pipe CUDA_MPS_LOG_DIRECTORY=$work/mps-log
      mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
      if nvidia-cuda-mps-control -d; then
        step "all_reduce over cuda_ipc (MPS)" ipc_bench "cuda_ipc under MPS" 1G
        echo quit | nvidia-cuda-mps-control
      else
        echo "MPS daemon did not start: cuda_ipc under MPS not measured" | tee -a "$report"
      fi
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
    # NCCL side by side where nccl-tests' all_reduce_perf is on PATH (NCCL >= 2.30 runs several
    # ranks per GPU with NCCL_MULTI_RANK_GPU_ENABLE=1).
    if command -v all_reduce_perf >/dev/null; then
      step "NCCL all_reduce, 2 and 4 ranks on this GPU" bash -c "for n in 2 4; do \
        NCCL_MULTI_RANK_GPU_ENABLE=1 CUDA_VISIBLE_DEVICES=0 all_reduce_perf -b 1M -e 1G -f 4 \
        -t \$n -g 1 || exit 1; done"
    else
      echo "no all_reduce_perf (nccl-tests) on PATH: NCCL not compared" | tee -a "$report"
    fi
    # The staged path against host buffers, same ranks, same run (shared memory between ranks).
    for n in 2 4; do
      step "all_reduce n=$n host vs CUDA buffers (staged)" bash -c "for m in '' --cuda; do \
        GYRE_CUDA_IPC=0 '$full/tools/gyre-run' -n $n '$full/tools/gyre-bench' all_reduce -b 8 \
        -e 256M -f 8 -n 10 -w 3 \$m | grep -v '^\[[1-9]\]' || exit 1; done"
    done
    # torch.distributed on gyre with this torch: every torch test, CUDA tensors among them.
    if [ -d "$full/python/gyre_torch" ]; then
      step "torch tests (CUDA tensors included)" ctest --test-dir "$full" --output-on-failure \
        -R '^torch\.' --timeout 300
    else
      echo "no gyre_torch in the build (python3 has no torch): torch tests not run" | tee -a "$report"
    fi
  else
    echo "not run: collectives on CUDA memory (the full build does not configure here:" \
      "full-configure.log; or set GPU_CHECK_BUILD_DIR)" | tee -a "$report"
    failed=1
  fi
fi
echo
echo "report: $report"
exit $failed
