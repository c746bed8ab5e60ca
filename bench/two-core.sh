#!/bin/bash
# bench/two-core.sh: issue 26's 2-core targets, for a quiet 2-core machine: gpufleet against
# `gpufleet sim --nodes 10000` (no latency), REPS runs (3), the median wall (target ≤ 10 s), the
# largest peak RSS (≤ 100 MB) and the median client CPU per node (user + system / nodes; target
# ≤ 0.8 ms/node). Each run is bench/scale.sh's (GNU time; the simulator's CPU from /proc), so
# the figures are the same kind as the 16-core table's. A script, not a test.
#
#   bench/two-core.sh                 REPS runs at 10,000 nodes, then the summary line
#   PERF=1 bench/two-core.sh          and once more under `perf record -g` (the client only):
#                                     its top symbols in $OUT/perf.txt
#
# Environment: GPUFLEET, WORKERS, SIM_WORKERS, CONC (default "auto": adaptive concurrency; a
# number: that fixed cap), NODES [10000], REPS [3], OUT [bench/out/two-core].
set -u
here=$(cd "$(dirname "$0")" && pwd)
n=${NODES:-10000}
reps=${REPS:-3}
out=${OUT:-$here/out/two-core}
rm -rf "$out"; mkdir -p "$out"
for r in $(seq "$reps"); do
  echo "== run $r of $reps" >&2
  OUT=$out/run$r TOOLS=gpufleet LATENCIES=0 CONC=${CONC:-auto} TOTAL=${TOTAL:-300} \
    "$here/scale.sh" "$n" > /dev/null || exit 1
  tail -n +2 "$out/run$r/results.tsv" >> "$out/results.tsv"
  grep -h 'concurrency' "$out/run$r"/runs/*/stderr >&2 || true
done
# nodes latency tool workers concurrency wall user sys rss sim_cpu complete exit cpus
sort -t$'\t' -k6,6g "$out/results.tsv" | awk -F'\t' -v reps="$reps" '
  { wall[NR] = $6; cpu[NR] = ($7 + $8) * 1000 / $1; if ($9 > rss) rss = $9
    if ($11 < ok || NR == 1) ok = $11; n = $1; cpus = $13 }
  END {
    m = int((NR + 1) / 2); asort(cpu)
    printf "2-core: %d nodes, %d runs on %s CPUs: median wall %.2f s (target <= 10), peak RSS %d MB (<= 100), client CPU %.3f ms/node (median; <= 0.8), fewest complete %d/%d\n",
      n, NR, cpus, wall[m], rss, cpu[m], ok, n }' | tee "$out/summary.txt"
if [ "${PERF:-0}" = 1 ] && command -v perf > /dev/null; then
  echo "== perf record (one more run)" >&2
  gf=${GPUFLEET:-$here/../target/release/gpufleet}
  OUT=$out/perf-run TOOLS=gpufleet LATENCIES=0 CONC=${CONC:-auto} GPUFLEET="$out/gf-perf" \
    bash -c "printf '#!/bin/sh\nexec perf record -g -o $out/perf.data -- $gf \"\$@\"\n' > $out/gf-perf; chmod +x $out/gf-perf; $here/scale.sh $n" > /dev/null
  perf report -i "$out/perf.data" --no-children --sort symbol --stdio 2> /dev/null | grep -v '^#' | grep '%' | head -40 > "$out/perf.txt"
  head -25 "$out/perf.txt"
fi
