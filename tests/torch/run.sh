#!/usr/bin/env bash
# Runs one torch test with the Python gyre_torch was built for, from this folder, with the
# built module on PYTHONPATH. Usage: run.sh PYTHON BUILD_DIR (SCRIPT.py | PROGRAM) [ARGS...]
set -u
python=$1
build=$2
shift 2
cd "$(dirname "$0")"
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
export GYRE_TIMEOUT=${GYRE_TIMEOUT:-60}
case "$1" in
*.py) exec timeout 300 "$python" "$@" ;;
*) exec timeout 300 "$@" ;;
esac
