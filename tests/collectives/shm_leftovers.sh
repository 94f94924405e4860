#!/usr/bin/env bash
# Runs after every test that uses shared memory (the suite sets GYRE_SHM_SWEEP=0, so no rank
# tidies up after another): a gyre segment whose creating process has exited is a leak.
dir=${GYRE_SHM_DIR:-/dev/shm}
leaks=0
for f in "$dir"/gyre-*; do
  [ -e "$f" ] || continue
  pid=$(basename "$f" | cut -d- -f2)
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "leftover: $f (process $pid has exited)"
    leaks=$((leaks + 1))
  fi
done
echo "$leaks leftover segments in $dir"
[ "$leaks" -eq 0 ]
