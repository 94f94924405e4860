#!/usr/bin/env bash
# The GPU checks in one command, on a machine with an NVIDIA GPU and the CUDA toolkit:
#   tools/gpu-check.sh [REPORT_DIR]      (default: $OUT when set, else ./gpu-check-report)
# Builds gyre with CUDA for this GPU (and gyre_torch where python3 has torch), then runs, the
# correctness checks first so that a short lease spends its time on them:
#   1. the kernel test (every type and op, bit for bit against the CPU kernels),
#   2. every collective on CUDA memory as kernels over cuda_ipc links, with graph capture,
#      timeouts, abort and ranks that disagree; the same staged with the stream memory wait,
#   3. torch's CUDA tensors through gyre_torch (torch.cuda), then every other torch test; the
#      host tests on this machine's cores run meanwhile (they need its CPUs, not the GPU) and
#      are waited for before the benchmarks,
#   4. the kernel benchmark (reduce against the device's copy bandwidth, 256 MiB), all_reduce
#      busbw over cuda_ipc with ranks as processes on this GPU (under a private MPS daemon
#      where nvidia-cuda-mps-control exists: also all-gather, reduce-scatter and broadcast, and
#      the all-reduce with 8 channels, and torch's all_reduce of CUDA tensors on gyre, NCCL and
#      gloo side by side; then without MPS), NCCL beside it where nccl-tests is installed,
#   5. compute-sanitizer memcheck and racecheck on the kernel test (quick sizes) and on the
#      collectives over cuda_ipc,
#   6. the staged path with the kernel wait, the staged all_reduce on host and CUDA buffers side
#      by side,
# and writes REPORT_DIR/report.md with each step's result and the end of its output as it
# goes, every step's whole log in REPORT_DIR/logs.tgz. Exits non-zero when a step fails.
# Leaves the GPU's settings alone.
# Environment:
#   GPU_CHECK_BUILD_DIR    a CMake build with CUDA made elsewhere (else built here)
#   GPU_CHECK_CMAKE_ARGS   extra configure arguments (e.g. where tools/gpu-deps.sh put the
#                          headers of a machine without the dependencies' packages)
#   GPU_CHECK_DEADLINE     seconds from the start after which no step starts (default: none)
#   GPU_CHECK_STEP_LIMIT   seconds a test step may run before it is stopped (default 300; the
#                          host tests, which run beside other steps, at least 300)
#   GPU_CHECK_SKIP         an extended regular expression: steps whose names match are not run
#                          (recorded as skipped), for a lease too short for all of them
#   GPU_CHECK_BUILD_ONLY=1 compile the kernels for sm_90 with nvcc and g++ alone, run nothing
#                          (=kernels: without the collectives' kernels, which only ptxas's
#                          report needs; ctest's cuda.standalone-build)
# Without a CMake build (the dependencies missing) the kernels, their test and benchmark are
# built with nvcc and g++ alone and steps 1, 4 (kernels) and 5 (kernels) run.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
report_dir=${1:-${OUT:-$PWD/gpu-check-report}}
mkdir -p "$report_dir"
report=$report_dir/report.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
deadline=${GPU_CHECK_DEADLINE:-0}
step_limit=${GPU_CHECK_STEP_LIMIT:-300}
skip=${GPU_CHECK_SKIP:-}

nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$nvcc" ] || { echo "gpu-check: no nvcc (PATH or /usr/local/cuda/bin)" >&2; exit 2; }
build_only=${GPU_CHECK_BUILD_ONLY:-0}
if [ "$build_only" != 0 ]; then
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
  [ "$build_only" != 0 ] || nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
  "$nvcc" --version | tail -2
  echo "$(nproc) CPUs"
  echo '```'
} >"$report"

note() { echo "$*" | tee -a "$report"; }
skipped() { [ -n "$skip" ] && [[ $1 =~ $skip ]]; }  # a step GPU_CHECK_SKIP leaves out

# step NAME COMMAND...: runs it (at most GPU_CHECK_STEP_LIMIT seconds), appends its result and
# the tail of its output to the report; past GPU_CHECK_DEADLINE it is recorded as not run.
step() {
  local name=$1
  shift
  if skipped "$name"; then
    note "skipped (GPU_CHECK_SKIP): $name"
    return 0
  fi
  if [ "$deadline" -gt 0 ] && [ $SECONDS -ge "$deadline" ]; then
    note "not run (deadline of $deadline s reached): $name"
    failed=1
    return 1
  fi
  # Each step's whole log goes into REPORT_DIR/logs.tgz, remade after every step: one file
  # however many steps ran (a lease returns few files) and whenever the check is stopped.
  mkdir -p "$work/logs"
  local log=$work/logs/$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_').log
  echo "== $name ($(date -u +%T), ${SECONDS} s in)"
  local start=$SECONDS
  if [ "$(type -t "$1")" = function ]; then
    "$@" >"$log" 2>&1  # the builds and benchmarks, whose programs have deadlines of their own
  else
    timeout -k 10 "$step_limit" "$@" >"$log" 2>&1
  fi
  local rc=$?
  local verdict=PASS
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    verdict="FAIL (stopped after $step_limit s)"
    failed=1
  elif [ $rc -ne 0 ]; then
    verdict="FAIL (exit $rc)"
    failed=1
  fi
  echo "$verdict ($((SECONDS - start)) s)"
  {
    echo
    echo "## $name: $verdict, $((SECONDS - start)) s, from ${start} s in"
    echo
    echo '```'
    tail -40 "$log"
    echo '```'
  } >>"$report"
  tar czf "$report_dir/logs.tgz" -C "$work" logs
  return $rc
}

# The kernels, their test and benchmark with nvcc and g++ alone, with ptxas's resource report.
standalone_build() {
  local flags=(-O3 -std=c++17 -I"$src" -I"$src/include")
  g++ "${flags[@]}" -c "$src/kernels/cpu/reduce.cc" -o "$work/reduce.o" &&
    g++ "${flags[@]}" -c "$src/kernels/cpu/reduce_generic.cc" -o "$work/reduce_generic.o" &&
    g++ "${flags[@]}" -c "$src/base/copy_bytes.cc" -o "$work/reduce_copy_bytes.o" &&
    g++ "${flags[@]}" -mavx2 -mf16c -mfma -c "$src/kernels/cpu/reduce_avx2.cc" \
      -o "$work/reduce_avx2.o" &&
    { "$nvcc" "${flags[@]}" -arch="$arch" -Xptxas -v -c "$src/kernels/cuda/reduce.cu" \
      -o "$work/reduce_cuda.o" 2>"$report_dir/ptxas.txt" || { cat "$report_dir/ptxas.txt"; false; }; } &&
    { [ "$build_only" = kernels ] ||
      "$nvcc" "${flags[@]}" -arch="$arch" -Xptxas -v -c "$src/algorithms/device_collectives.cu" \
      -o "$work/device_collectives.o" 2>"$report_dir/ptxas-collectives.txt" ||
      { cat "$report_dir/ptxas-collectives.txt"; false; }; } &&
    "$nvcc" "${flags[@]}" -arch="$arch" "$src/tests/cuda/kernels_test.cc" "$work"/reduce*.o \
      -o "$work/cuda_kernel_tests" &&
    "$nvcc" "${flags[@]}" -arch="$arch" "$src/tools/bench/cuda_kernel_bench.cc" \
      "$work/reduce_cuda.o" -o "$work/gyre-cuda-kernel-bench" &&
    echo "built for $arch: $(grep -c 'Compiling entry' "$report_dir/ptxas.txt") kernels," \
      "$(grep -cE '[1-9][0-9]* bytes spill' "$report_dir/ptxas.txt") lines reporting spills" \
      "(registers and spills per kernel: ptxas.txt); collective kernels:" \
      "$(grep -sc 'Compiling entry' "$report_dir/ptxas-collectives.txt")" \
      "(ptxas-collectives.txt)"
}

if [ "$build_only" != 0 ]; then
  step "build ($arch)" standalone_build
  echo
  echo "report: $report"
  exit $failed
fi

# The whole library (collectives on CUDA memory need it), gyre_torch where python3 has torch.
full=${GPU_CHECK_BUILD_DIR:-}
cmake_build() {  # everything: on 16 cores the CUDA sources set the pace, not the rest
  # shellcheck disable=SC2086
  cmake -S "$src" -B "$work/full" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGYRE_WITH_CUDA=ON \
    -DGYRE_CUDA_ARCHITECTURES="${arch#sm_}-real" -DGYRE_TORCH_PYTHON="$(command -v python3)" \
    ${GPU_CHECK_CMAKE_ARGS:-} && cmake --build "$work/full" -j "$(nproc)"
}
if [ -z "$full" ]; then
  if step "build with CMake ($arch)" cmake_build; then
    full=$work/full
  fi
fi
if [ -n "$full" ]; then
  kernel_tests=$full/tests/cuda_kernel_tests
  kernel_bench=$full/tools/gyre-cuda-kernel-bench
else
  note "no CMake build (its log above; or set GPU_CHECK_BUILD_DIR): collectives on CUDA memory" \
    "and torch not checked, the kernels built with nvcc alone"
  failed=1
  step "build kernels alone ($arch)" standalone_build || { echo "report: $report"; exit 1; }
  kernel_tests=$work/cuda_kernel_tests
  kernel_bench=$work/gyre-cuda-kernel-bench
fi
torch_built=0
[ -n "$full" ] && [ -d "$full/python/gyre_torch" ] && torch_built=1

# 1-3: correctness. The host tests on this machine's cores, which CI's two do not show
# (placement, spinning, channels), run beside the GPU steps from the start: a failure's output
# (doctest names a crashing case) lands in the report when they are waited for.
host_tests_name="host tests on $(nproc) cores"
host_tests_pid=
if [ -n "$full" ] && ! skipped "$host_tests_name"; then
  host_limit=$((step_limit > 300 ? step_limit : 300))
  mkdir -p "$work/logs"
  timeout -k 10 "$host_limit" ctest --test-dir "$full" --output-on-failure -j 4 --timeout 120 \
    -E '^(cuda|torch|rdma|cluster|slurm)|fault-loop|soak|tcp-congestion|embed' \
    >"$work/host-tests.log" 2>&1 &
  host_tests_pid=$!
fi
host_tests_done() {  # waits for them; their output becomes the step's
  wait "$host_tests_pid"
  local rc=$?
  cat "$work/host-tests.log"
  return $rc
}
step "kernel test" "$kernel_tests"
if [ -n "$full" ]; then
  step "collectives on CUDA memory (cuda_ipc kernels)" "$full/tests/cuda_buffer_tests"
  step "graph capture, timeouts and abort on CUDA memory (cuda_ipc kernels)" \
    "$full/tests/cuda_failure_tests"
  step "collectives on CUDA memory (staged, memop wait)" env GYRE_CUDA_IPC=0 GYRE_CUDA_WAIT=memop \
    "$full/tests/cuda_buffer_tests"
  step "graph capture, timeouts and abort on CUDA memory (staged, memop wait)" env \
    GYRE_CUDA_IPC=0 GYRE_CUDA_WAIT=memop "$full/tests/cuda_failure_tests"
  if [ $torch_built = 1 ]; then
    step "torch CUDA tensors (torch.cuda)" ctest --test-dir "$full" --output-on-failure \
      -R '^torch\.cuda$' --timeout 300
    # Every other torch test, each bounded by ctest (the two on torchrun's port take turns).
    torch_tests() {
      ctest --test-dir "$full" --output-on-failure -R '^torch\.' -E '^torch\.cuda$' \
        --timeout 300 -j 4
    }
    step "torch tests (all)" torch_tests
  else
    note "no gyre_torch in the build (python3 has no torch): torch tests not run"
  fi
  # Not bounded by the deadline: they started with the GPU steps; the benchmarks wait for them.
  if [ -n "$host_tests_pid" ]; then
    deadline_before=$deadline
    deadline=0
    step "$host_tests_name" host_tests_done
    deadline=$deadline_before
  elif skipped "$host_tests_name"; then
    note "skipped (GPU_CHECK_SKIP): $host_tests_name"
  fi
fi

# 4: speed.
step "kernel benchmark" "$kernel_bench" 256 20
if [ -n "$full" ]; then
  # Busbw over cuda_ipc, ranks as processes sharing this one GPU: without MPS their kernels
  # take turns on the GPU (time slices), so it runs first under a private MPS daemon (started
  # here, stopped after; the GPU's own settings are left alone).
  cuda_bench() {  # cuda_bench LABEL COLLECTIVE LARGEST, at n = 2 and 4
    for n in 2 4; do
      echo "## $2 n=$n $1"
      "$full/tools/gyre-run" -n $n "$full/tools/gyre-bench" "$2" -b 1M -e "$3" -f 4 -n 10 -w 3 \
        --cuda | grep -v '^\[[1-9]\]' || return 1
    done
  }
  # The other ring collectives, and the all-reduce with the channels of earlier defaults.
  ring_bench() {
    for coll in all_gather reduce_scatter broadcast; do
      cuda_bench "cuda_ipc under MPS" $coll 256M || return 1
    done
    GYRE_CUDA_CHANNELS=8 cuda_bench "cuda_ipc under MPS, GYRE_CUDA_CHANNELS=8" all_reduce 256M
  }
  if command -v nvidia-cuda-mps-control >/dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=$work/mps-pipe CUDA_MPS_LOG_DIRECTORY=$work/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
      step "all_reduce over cuda_ipc (MPS)" cuda_bench "cuda_ipc under MPS" all_reduce 1G
      if [ $torch_built = 1 ]; then
        step "torch all_reduce of CUDA tensors: gyre, nccl, gloo (MPS)" env \
          PYTHONPATH="$full/python" NCCL_MULTI_RANK_GPU_ENABLE=1 python3 \
          "$src/tools/bench/torch_cuda_bench.py" --sizes 64K,1M,16M,128M --repeats 3
      fi
      step "ring collectives over cuda_ipc (MPS)" ring_bench
      echo quit | nvidia-cuda-mps-control
    else
      note "MPS daemon did not start: cuda_ipc under MPS not measured"
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  else
    note "no nvidia-cuda-mps-control: cuda_ipc under MPS not measured"
  fi
  # Without MPS every wait may cost a time slice: smaller sizes keep the step bounded.
  step "all_reduce over cuda_ipc (no MPS)" cuda_bench "cuda_ipc" all_reduce 64M
  # NCCL side by side where nccl-tests' all_reduce_perf is on PATH (NCCL >= 2.30 runs several
  # ranks per GPU with NCCL_MULTI_RANK_GPU_ENABLE=1).
  if command -v all_reduce_perf >/dev/null; then
    step "NCCL all_reduce, 2 and 4 ranks on this GPU" bash -c "for n in 2 4; do \
      NCCL_MULTI_RANK_GPU_ENABLE=1 CUDA_VISIBLE_DEVICES=0 all_reduce_perf -b 1M -e 1G -f 4 \
      -t \$n -g 1 || exit 1; done"
  else
    note "no all_reduce_perf (nccl-tests) on PATH: NCCL not compared"
  fi
fi

# 5: sanitizers.
if [ -x "$sanitizer" ]; then
  for tool in memcheck racecheck; do
    leaks=()
    [ $tool = memcheck ] && leaks=(--leak-check full)
    step "$tool (kernels)" env GYRE_CUDA_TEST_QUICK=1 "$sanitizer" --tool $tool \
      --error-exitcode 1 "${leaks[@]}" "$kernel_tests"
    if [ -n "$full" ]; then
      step "collectives over cuda_ipc under $tool" "$sanitizer" --tool $tool \
        --error-exitcode 1 "$full/tests/cuda_buffer_tests" -tc='*every collective*,*alternating*'
    fi
  done
else
  note "no compute-sanitizer: memcheck and racecheck not run"
  failed=1
fi

# 6: the rest.
if [ -n "$full" ]; then
  step "collectives on CUDA memory (staged, kernel wait)" env GYRE_CUDA_IPC=0 \
    GYRE_CUDA_WAIT=kernel "$full/tests/cuda_buffer_tests"
  step "graph capture, timeouts and abort on CUDA memory (staged, kernel wait)" env \
    GYRE_CUDA_IPC=0 GYRE_CUDA_WAIT=kernel "$full/tests/cuda_failure_tests"
  # The staged path against host buffers, same ranks, same run (shared memory between ranks).
  for n in 2 4; do
    step "all_reduce n=$n host vs CUDA buffers (staged)" bash -c "for m in '' --cuda; do \
      GYRE_CUDA_IPC=0 '$full/tools/gyre-run' -n $n '$full/tools/gyre-bench' all_reduce -b 8 \
      -e 256M -f 8 -n 10 -w 3 \$m | grep -v '^\[[1-9]\]' || exit 1; done"
  done
fi
echo
echo "report: $report"
exit $failed
