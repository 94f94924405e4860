#!/usr/bin/env bash
# torch.distributed on gyre against gloo (tools/bench/torch_bench.py) with plots: average time
# and effective bandwidth of all_reduce, grouped by backend and process count.
# Usage: torch_bench.sh [OUT_DIR] [torch_bench.py options]; PYTHON picks the interpreter
# (default /usr/bin/python3, Debian's torch) and BUILD the build folder (default build).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/build/torch-bench}
shift || true
python=${PYTHON:-/usr/bin/python3}
build=${BUILD:-$root/build}
mkdir -p "$out"
PYTHONPATH="$build/python" GYRE_TIMEOUT=600 "$python" "$root/tools/bench/torch_bench.py" --out "$out" "$@" |
  tee "$out/tables.md"
if ! command -v gnuplot >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null 2>&1 ||
    { echo "# no gnuplot (apt-get install gnuplot-nox): tables only"; exit 0; }
fi
# One row per (procs, size): gyre and gloo side by side.
awk -F, 'NR > 1 { key = $2 " procs " ($3 >= 1073741824 ? $3 / 1073741824 " GiB" : $3 / 1048576 " MiB");
  t[key, $1] = $5; b[key, $1] = $8; if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
  END { for (i = 1; i <= n; i++) { k = order[i];
    printf "\"%s\" %s %s %s %s\n", k, t[k, "gyre"], t[k, "gloo"], b[k, "gyre"], b[k, "gloo"] } }' \
  "$out/allreduce.csv" >"$out/plot.dat"
for what in time bandwidth; do
  if [ "$what" = time ]; then cols="2:xtic(1) title 'gyre', '' using 3 title 'gloo'"; ylabel="ms per all_reduce (log)"; logscale="set logscale y"
  else cols="4:xtic(1) title 'gyre', '' using 5 title 'gloo'"; ylabel="GB/s (bytes / time)"; logscale=""; fi
  gnuplot <<GP
set terminal pngcairo size 1000,560 noenhanced
set output "$out/torch_allreduce_$what.png"
set title "torch.distributed all_reduce, float32: gyre vs gloo"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -35
set ylabel "$ylabel"
$logscale
set key top left
plot "$out/plot.dat" using $cols
GP
done
echo "# plots: $out/torch_allreduce_time.png $out/torch_allreduce_bandwidth.png"
