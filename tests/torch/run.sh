#!/usr/bin/env bash
# Runs one torch test with the Python gyre_torch was built for. Usage: run.sh PYTHON BUILD_DIR SCRIPT [ARGS]
set -u
python=$1
build=$2
script=$3
shift 3
cd "$(dirname "$0")"
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
export GYRE_TIMEOUT=${GYRE_TIMEOUT:-60}
exec timeout 300 "$python" "$script" "$@"
