#!/bin/sh
# bench/collected.sh [NODES]: `gpufleet snapshot --from` on a collection of NODES (1,000,000)
# nodes, end to end, on 2 cores (taskset -c 0,1), under GNU time (`/usr/bin/time -v`: wall time
# and maximum resident set size). Targets (issue 21, item 3): ≤ 10 s, ≤ 2× the input's size.
#
# Input, written to a temporary folder under /tmp and deleted at the end: an srun-style JSON
# Lines file of NODES unreachable reports with their facts left out (about 138 bytes a node:
# the smallest report, the largest per-node overhead) and a DaemonSet-style file holding 1 % of
# them again, newer (a merge finding each: "hold different reports"). Each output format that
# streams (jsonl, json, csv) is written to /dev/null.
#
#   cargo build --release && bench/collected.sh
#   GPUFLEET=target/debug/gpufleet bench/collected.sh 100000
set -eu
n=${1:-1000000}
bin=${GPUFLEET:-target/release/gpufleet}
[ -x "$bin" ] || { echo "no $bin: cargo build --release" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU time (apt install time)" >&2; exit 2; }
dir=$(mktemp -d /tmp/gpufleet-collected.XXXXXX)
trap 'rm -rf "$dir"' EXIT INT TERM
awk -v n="$n" -v a="$dir/srun.jsonl" -v b="$dir/daemonset.jsonl" 'BEGIN {
  for (i = 0; i < n; i++) {
    name = sprintf("gpu%07d", i)
    printf "{\"type\":\"node\",\"data\":{\"name\":\"%s\",\"status\":\"unreachable\",\"scanned_at\":\"2026-12-01T10:00:00Z\",\"duration_ms\":10000,\"reasons\":[]}}\n", name > a
    if (i % 100 == 0)
      printf "{\"type\":\"node\",\"data\":{\"name\":\"%s\",\"status\":\"unreachable\",\"scanned_at\":\"2026-12-01T11:00:00Z\",\"duration_ms\":10000,\"reasons\":[]}}\n", name > b
  }
}'
input=$(cat "$dir/srun.jsonl" "$dir/daemonset.jsonl" | wc -c)
echo "$n nodes, input $input bytes ($(git rev-parse --short HEAD 2>/dev/null || echo ?), $(nproc) cores here, taskset -c 0,1)"
for format in jsonl json csv; do
  taskset -c 0,1 /usr/bin/time -v "$bin" snapshot --format "$format" \
    --from "$dir/srun.jsonl" "$dir/daemonset.jsonl" 2>"$dir/time" | wc -l >"$dir/lines" || :
  # Exit 2 is the snapshot's own (every node is unreachable); anything else gpufleet says fails.
  if grep -q '^gpufleet: [^m]\|^error' "$dir/time"; then tail -5 "$dir/time" >&2; exit 1; fi
  awk -v f="$format" -v input="$input" -v lines="$(cat "$dir/lines")" '
    /Elapsed \(wall clock\)/ { n = split($NF, t, ":"); wall = t[n] + (n > 1 ? t[n-1] * 60 : 0) }
    /Maximum resident set size/ { rss = $NF * 1024 }
    /gpufleet: merge:/ { findings++ }
    /Exit status/ { rc = $NF }
    END { printf "%-5s wall %.2f s, max RSS %.1f MB = %.2fx the input, %d findings on stderr, %d lines out, exit %d\n",
          f, wall, rss / 1e6, rss / input, findings, lines, rc }' "$dir/time"
done
