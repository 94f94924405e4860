# Sourced: sets `kit` to the rdma-vm kit's rdma-vm.sh, or "" when there is none. Looks at
# $GYRE_RDMA_VM, then ../shared/rdma-vm beside the source tree `src`, then /work/shared/rdma-vm.
kit=""
for candidate in "${GYRE_RDMA_VM:-}" "$src/../shared/rdma-vm/rdma-vm.sh" /work/shared/rdma-vm/rdma-vm.sh; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then
    kit=$candidate
    break
  fi
done
