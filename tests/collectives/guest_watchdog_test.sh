#!/usr/bin/env bash
# run_in_guest (find_rdma_vm.sh) against guests that wedge on purpose: a command that writes an
# RCU stall line into the guest kernel's log and then waits stands for a wedged emulator, and a
# kit that prints nothing for a boot that hangs before its kernel's first line. Exits 77
# (skipped) saying why when no guest can start, after the checks that need none.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/tests/collectives/find_rdma_vm.sh"
shared=$(mktemp -d)
trap 'rm -rf "$shared"' EXIT
failed=0
check() { # NAME EXPECTED_STATUS STATUS OUTPUT PATTERN...
  local name=$1 want=$2 got=$3 out=$4
  shift 4
  local ok=1 pattern
  [ "$got" = "$want" ] || ok=0
  for pattern in "$@"; do
    if [ "${pattern#!}" != "$pattern" ]; then
      ! grep -qE -- "${pattern#!}" <<<"$out" || ok=0
    else
      grep -qE -- "$pattern" <<<"$out" || ok=0
    fi
  done
  if ((ok)); then
    echo "PASS: $name"
  else
    echo "FAIL: $name (status $got, expected $want); output:"
    echo "$out" | tail -20
    failed=1
  fi
}
stall='echo "<3>rcu: INFO: rcu_preempt detected stalls on CPUs/tasks: (a stand-in)" >/dev/kmsg'

# A boot that hangs before the kernel's first line, stood in for by a kit (run -v ... --
# COMMAND) that prints nothing while FAKE_SILENT_BOOTS boots remain, then boots.
cat >"$shared/kit" <<'KIT'
#!/usr/bin/env bash
while [ "$1" != "--" ]; do shift; done
shift
boots=$(cat "$FAKE_DIR/boots" 2>/dev/null || echo 0)
echo $((boots + 1)) >"$FAKE_DIR/boots"
((boots < FAKE_SILENT_BOOTS)) && exec sleep 30
echo "[guest] Linux version (a stand-in)" >&2
"$@"
KIT
chmod +x "$shared/kit"
real_kit=$kit
kit=$shared/kit
export FAKE_DIR=$shared GYRE_GUEST_QUIET_S=4
out=$(FAKE_SILENT_BOOTS=1 run_in_guest -- bash -c "echo second boot ran; exit 5" 2>&1)
check "a guest silent from its start is booted again and its command's status returned" 5 $? \
  "$out" "printed nothing in 4 s \(attempt 1 of 2\)" "booting a fresh guest" "second boot ran"
rm -f "$shared/boots"
out=$(FAKE_SILENT_BOOTS=2 run_in_guest -- bash -c "echo never" 2>&1)
check "a guest silent twice fails, saying so" 1 $? "$out" "attempt 2 of 2" "wedged twice in a row" \
  "!never"
rm -f "$shared/boots" "$shared/kit"
kit=$real_kit
((failed)) && exit 1

require_rdma_vm "the watchdog test needs its guest"
export GYRE_GUEST_QUIET_S=8

# Wedges on the first boot only (a file in the shared folder remembers it): the second passes.
out=$(run_in_guest --timeout 120 --share "$shared" -- bash -c \
  "if [ -e $shared/booted ]; then echo second boot ran; else touch $shared/booted; echo first boot; $stall; sleep 100; fi" 2>&1)
check "a guest that wedges once is booted again and its command's status returned" 0 $? "$out" \
  "guest wedged: .*attempt 1 of 2" "rcu_preempt detected stalls" "booting a fresh guest" \
  "second boot ran" "!wedged twice"

# Wedges every time: fails, saying so, after two boots.
out=$(run_in_guest --timeout 120 -- bash -c "echo boot; $stall; sleep 100" 2>&1)
check "a guest that wedges twice fails, saying so" 1 $? "$out" "attempt 2 of 2" "wedged twice in a row"
[ "$(grep -c '^boot$' <<<"$out")" = 2 ] || { echo "FAIL: expected two boots"; failed=1; }

# Quiet for longer than the limit but with no stall: left to run, its status passed on.
out=$(run_in_guest --timeout 120 -- bash -c "sleep 14; echo done; exit 3" 2>&1)
check "a quiet guest without a stall is left to finish" 3 $? "$out" "^done$" "!wedged"

exit $failed
