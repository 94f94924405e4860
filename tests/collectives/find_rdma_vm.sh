# Sourced: sets `kit` to the rdma-vm kit's rdma-vm.sh, or "" when there is none. Looks at
# $GYRE_RDMA_VM, then ../shared/rdma-vm beside the source tree `src`, then /work/shared/rdma-vm.
# Also defines require_rdma_vm and run_in_guest (below).
kit=""
for candidate in "${GYRE_RDMA_VM:-}" "$src/../shared/rdma-vm/rdma-vm.sh" /work/shared/rdma-vm/rdma-vm.sh; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then
    kit=$candidate
    break
  fi
done

# require_rdma_vm WHAT: for tests that need the guest; exits 77 (skipped), saying why, where
# there is no kit or it cannot prepare its guest.
require_rdma_vm() {
  if [ -z "$kit" ]; then
    echo "SKIP: no rdma-vm kit (set GYRE_RDMA_VM to its rdma-vm.sh): $1"
    exit 77
  fi
  local log
  log=$(mktemp)
  if ! "$kit" setup >"$log" 2>&1; then
    echo "SKIP: the rdma-vm kit cannot prepare its guest (qemu, kernel or packages missing):"
    tail -5 "$log"
    rm -f "$log"
    exit 77
  fi
  rm -f "$log"
}

# split_console DIR: the kit's stderr under -v, line by line as it comes (awk would read ahead):
# the guest's console lines into DIR/console, the rest to stderr and DIR/err.
split_console() {
  local line
  while IFS= read -r line; do
    case $line in
      "[guest] "*) printf '%s\n' "$line" >>"$1/console" ;;
      *)
        printf '%s\n' "$line" >>"$1/err"
        printf '%s\n' "$line" >&2
        ;;
    esac
  done
}

# run_in_guest RUN_ARGS...: "$kit" run RUN_ARGS (its options, then -- COMMAND), streaming
# COMMAND's output; returns its status. The emulated guest can wedge: under TCG on a busy host
# its kernel's timers can stop, which its console reports as an RCU stall, and the command then
# waits forever; or it can hang before its kernel prints a line. A guest whose console reported
# a stall, or is still empty, and whose command has printed nothing for GYRE_GUEST_QUIET_S
# seconds (default 180; a healthy run here is never quiet for 60) is stopped and a fresh one
# booted, once; a second wedge returns 1, saying so. A command that is only quiet, with no
# stall, is left to its own timeouts and the kit's.
run_in_guest() {
  local quiet=${GYRE_GUEST_QUIET_S:-180} dir attempt status=0
  local stall="rcu.*(stall|timer wakeup didn't happen)|soft lockup"
  dir=$(mktemp -d)
  for attempt in 1 2; do
    : >"$dir/out"
    : >"$dir/err"
    : >"$dir/console"
    # -v streams the guest's console, each line marked "[guest] ", among the kit's own stderr.
    "$kit" run -v "$@" > >(tee -a "$dir/out") 2> >(split_console "$dir") &
    local pid=$! size=-1 now last=$SECONDS wedged=0
    while kill -0 "$pid" 2>/dev/null; do
      sleep 2
      now=$(($(stat -c %s "$dir/out") + $(stat -c %s "$dir/err")))
      if [ "$now" != "$size" ]; then
        size=$now
        last=$SECONDS
      elif ((SECONDS - last >= quiet)) && { grep -qE "$stall" "$dir/console" || [ ! -s "$dir/console" ]; }; then
        wedged=1
        kill -TERM "$pid"
        break
      fi
    done
    status=0
    wait "$pid" || status=$?
    wait # the output's filters
    ((wedged)) || break
    if [ -s "$dir/console" ]; then
      echo "rdma-vm guest wedged: its kernel reported a stall and the command printed nothing" \
        "for ${quiet} s (attempt $attempt of 2); its console:"
      grep -m 3 -E "$stall" "$dir/console"
      tail -n 5 "$dir/console"
    else
      echo "rdma-vm guest wedged: its kernel printed nothing in ${quiet} s (attempt $attempt of 2)"
    fi
    if ((attempt == 2)); then
      echo "rdma-vm guest wedged twice in a row"
      status=1
    else
      echo "booting a fresh guest"
    fi
  done
  rm -rf "$dir"
  return "$status"
}
