#!/usr/bin/env bash
# Fails when an #include points up the layers of docs/architecture.md:
#   integrations -> include/gyre only;
#   tools -> runtime -> algorithms | transport -> kernels | link -> base -> include/gyre
# Each folder lists the folders it may include from (its own always); algorithms and transport
# never see each other, kernels and link never see each other, and the store sees only the
# ground floor. Headers of the system (<...>) are not ours and not checked.
set -euo pipefail
cd "$(dirname "$0")/.."

allowed_for() {
  case "$1" in
    include/gyre/*) echo "gyre" ;;
    base/*) echo "gyre base" ;;
    kernels/*) echo "gyre base kernels" ;;
    link/*) echo "gyre base link" ;;
    algorithms/*) echo "gyre base kernels link algorithms" ;;
    transport/*) echo "gyre base kernels link transport" ;;
    runtime/store/*) echo "gyre base runtime/store" ;;
    runtime/*) echo "gyre base kernels link algorithms transport runtime" ;;
    tools/*) echo "gyre base kernels link algorithms transport runtime tools" ;;
    integrations/*) echo "gyre" ;;  # the public API only, plus files of its own folder
    *) echo "*" ;;
  esac
}

bad=0
checked=0
while IFS= read -r file; do
  allowed=$(allowed_for "$file")
  [ "$allowed" = "*" ] && continue
  checked=$((checked + 1))
  while IFS=: read -r line target; do
    ok=0
    for prefix in $allowed; do
      case "$target" in "$prefix"/*) ok=1 ;; esac
    done
    # A bare name beside the including file (integrations include their own headers so).
    case "$target" in */*) ;; *) [ -f "$(dirname "$file")/$target" ] && ok=1 ;; esac
    if [ "$ok" = 0 ]; then
      echo "$file:$line: includes \"$target\", a layer it may not see (it may: $allowed)"
      bad=$((bad + 1))
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
           sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
done < <(git ls-files '*.h' '*.hpp' '*.cc' '*.cu' '*.cuh')

if [ "$bad" -gt 0 ]; then
  echo "check-layers: $bad include(s) point the wrong way (see docs/architecture.md)"
  exit 1
fi
echo "check-layers: $checked files, every include points down"
