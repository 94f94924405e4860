# Sourced: sets `kit` to the rdma-vm kit's rdma-vm.sh, or "" when there is none. Looks at
# $GYRE_RDMA_VM, then ../shared/rdma-vm beside the source tree `src`, then /work/shared/rdma-vm.
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
