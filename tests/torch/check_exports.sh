#!/usr/bin/env bash
# gyre_torch's module exports its entry point alone (integrations/torch/gyre_torch.map): what
# a statically linked libstdc++ brings stays inside it. Usage: check_exports.sh BUILD_DIR
set -eu
module=$(ls "$1"/python/gyre_torch/_C*.so | head -1)
exported=$(nm -D --defined-only "$module" | awk '$2 ~ /^[TDBRWVGSiu]$/ {print $3}')
[ "$exported" = PyInit__C ] || {
  echo "FAIL: $module exports more than PyInit__C:"
  echo "$exported" | head
  exit 1
}
echo "PASS: $module exports PyInit__C alone"
