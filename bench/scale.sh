#!/bin/bash
# bench/scale.sh: gpufleet (and bssh, where it finishes) against `gpufleet sim` at site scale,
# every run time-boxed, the whole under a total budget. A script, not a test (issue 26; the table
# goes in bench/README.md). Needs only the two binaries: no network, no sshd, no source tree.
#
#   bench/scale.sh [SIZES]          SIZES: node counts, default "10000 30000 100000"
#
# Environment (defaults in brackets):
#   GPUFLEET   the gpufleet binary [target/release/gpufleet, else ./gpufleet]
#   BSSH       the bssh binary [bench/out/bssh/bin/bssh, else ./bssh]; absent: bssh left out
#   TOOLS      "gpufleet bssh"     LATENCIES  "0 50ms" (the simulator's --latency, any form)
#   WORKERS    the client's --workers [the default: CPUs, at most 8]; SIM_WORKERS the same for
#              the simulator [the client's]
#   CONC       the client's --concurrency (a fixed cap), bssh's --parallel [1024]; "auto":
#              gpufleet without --concurrency (it adapts from 256, probe::pace), bssh at 1024
#   BOX        seconds a gpufleet run may take [120]; BSSH_BOX the same for bssh [45]
#   TOTAL      seconds for everything [540]: a run gets what is left (less 15 s), and is skipped
#              when under 10 s are left
#   OUT        where results go [bench/out/scale]: results.tsv, table.md, runs/
#
# Per run: wall, client CPU (user + system) and client peak RSS (GNU time, else Python's
# getrusage of the child, else /proc's VmHWM polled), the simulator's CPU over the run (from
# /proc/PID/stat), and complete = nodes whose report is not unreachable (gpufleet) or whose
# output holds the probe's trailer (bssh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
out=${OUT:-$here/out/scale}
sizes=${1:-10000 30000 100000}
tools=${TOOLS:-gpufleet bssh}
latencies=${LATENCIES:-0 50ms}
conc=${CONC:-1024}
cflag="--concurrency $conc"
[ "$conc" = auto ] && { cflag=""; conc=1024; }
box=${BOX:-120}
bssh_box=${BSSH_BOX:-45}
total=${TOTAL:-540}
start_s=$(date +%s)
pick() { for p in "$@"; do [ -x "$p" ] && { echo "$p"; return; }; done; }
gpufleet=${GPUFLEET:-$(pick "$repo/target/release/gpufleet" "$PWD/gpufleet")}
bssh=${BSSH:-$(pick "$repo/bench/out/bssh/bin/bssh" "$PWD/bssh")}
workers=${WORKERS:-}
sim_workers=${SIM_WORKERS:-$workers}
wflag() { [ -n "$1" ] && echo "--workers $1"; }
say() { printf '%s\n' "$*" >&2; }
left() { echo $((total - ($(date +%s) - start_s))); }
[ -x "${gpufleet:-}" ] || { say "no gpufleet binary (GPUFLEET=…)"; exit 2; }
mkdir -p "$out/runs"

# The open-files limit: one listener a node and one socket per connection on the simulator's
# side, one per connection on the client's.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
say "== $(uname -srm), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), open files $(ulimit -n) (hard $(ulimit -Hn))"
say "== $("$gpufleet" --version); bssh: ${bssh:+$("$bssh" --version 2>&1 | head -1)}"
say "== workers: client ${workers:-default}, simulator ${sim_workers:-default}; concurrency $conc; total $total s"

# measure BOXSECS DIR CMD…: runs CMD under `timeout`, writes DIR/time ("wall user sys maxrss_kb
# rc") whatever measured it.
measure() {
  local secs=$1 d=$2; shift 2
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%e %U %S %M' -o "$d/time.raw" timeout "$secs" "$@"
    local rc=$?
    echo "$(tail -1 "$d/time.raw") $rc" > "$d/time"
  elif command -v python3 >/dev/null; then
    python3 - "$d/time" "$secs" "$@" <<'PY'
import resource, subprocess, sys, time
path, secs, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
t = time.monotonic()
rc = subprocess.call(["timeout", secs] + cmd)
w = time.monotonic() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(path, "w").write(f"{w:.2f} {r.ru_utime:.2f} {r.ru_stime:.2f} {r.ru_maxrss} {rc}\n")
PY
  else
    local t0 t1 pid hwm=0 v
    t0=$(date +%s.%N)
    timeout "$secs" "$@" & pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      v=$(awk '/VmHWM/ {print $2}' /proc/$(pgrep -P "$pid" | head -1)/status 2>/dev/null)
      [ -n "$v" ] && [ "$v" -gt "$hwm" ] && hwm=$v
      sleep 0.05
    done
    wait "$pid"; local rc=$?
    t1=$(date +%s.%N)
    # CPU from the children's times (bash's `times`: user and system of waited children).
    local cpu; cpu=$(times | tail -1)
    echo "$(echo "$t1 $t0" | awk '{printf "%.2f", $1-$2}') $(echo "$cpu" | awk '{gsub(/[ms]/," "); print $1*60+$2, $3*60+$4}') $hwm $rc" > "$d/time"
  fi
}

sim_cpu() { # CPU seconds of the simulator so far
  awk -v t="$(getconf CLK_TCK)" '{printf "%.2f", ($14+$15)/t}' "/proc/$sim_pid/stat" 2>/dev/null || echo 0
}

start_sim() { # N LATENCY -> sim_pid, fleet
  local n=$1 lat=$2
  fleet=$out/fleet-$n-$lat
  rm -rf "$fleet"; mkdir -p "$fleet"
  # shellcheck disable=SC2046
  "$gpufleet" $(wflag "$sim_workers") sim --nodes "$n" --listen 127.9.0.0/16 --latency "$lat" \
    --write-inventory "$fleet/inventory.toml" --write-hosts "$fleet/hosts" > "$fleet/sim.out" 2> "$fleet/sim.err" &
  sim_pid=$!
  local t=$(( $(left) < 180 ? $(left) : 180 ))
  while [ "$t" -gt 0 ]; do
    grep -q '^ready' "$fleet/sim.out" 2>/dev/null && break
    kill -0 "$sim_pid" 2>/dev/null || break
    sleep 0.5; t=$((t - 1))
  done
  grep -q '^ready' "$fleet/sim.out" || { say "!! the simulator did not start: $(tail -3 "$fleet/sim.err")"; stop_sim; return 1; }
  say "   $(grep '^gpufleet sim:' "$fleet/sim.out" | tail -1) (started in $(( $(date +%s) - sim_t0 )) s)"
}

stop_sim() {
  kill -TERM "$sim_pid" 2>/dev/null; wait "$sim_pid" 2>/dev/null
  [ -s "$fleet/sim.err" ] && say "   $(grep 'per connection' "$fleet/sim.err" | tail -1)"
}

probe_packed() { # the probe as one command, packed under bssh's 16 KiB limit (bench/peers.sh)
  printf "B='gpufleet-bench0123456789abcdef' R='' T=10 D=60 L=200 sh -c \"\$(echo %s | base64 -d | gzip -dc)\"" "$1"
}

run_one() { # TOOL N LATENCY
  local tool=$1 n=$2 lat=$3 d secs rc s0 s1 ok
  d=$out/runs/$tool-$n-$lat
  rm -rf "$d"; mkdir -p "$d"
  secs=$box; [ "$tool" = bssh ] && secs=$bssh_box
  local room=$(( $(left) - 15 ))
  [ "$room" -lt "$secs" ] && secs=$room
  if [ "$secs" -lt 10 ]; then say "   $tool $n $lat: skipped (the total time box is spent)"; return; fi
  s0=$(sim_cpu)
  case $tool in
    gpufleet)
      # shellcheck disable=SC2046
      GPUFLEET_KNOWN_HOSTS=$d/kh measure "$secs" "$d" "$gpufleet" $(wflag "$workers") snapshot \
        -i "$fleet/inventory.toml" --format jsonl $cflag --ssh-config none > "$d/out.jsonl" 2> "$d/stderr"
      ok=$(grep -c '"status":"' "$d/out.jsonl")
      ok=$((ok - $(grep -c '"status":"unreachable"' "$d/out.jsonl"))) ;;
    bssh)
      mkdir -p "$d/home/.ssh"
      cp "$fleet/inventory.toml.known_hosts" "$d/home/.ssh/known_hosts"
      # The hosts as a cluster of bssh's YAML config: 2.2.3 refuses its own `-H ^FILE`
      # ("Hostname contains invalid characters"), and 10,000 on the command line pass the
      # kernel's argument limit (bench/peers.sh).
      { printf 'clusters:\n  bench:\n    nodes:\n'; sed 's/^/      - root@/' "$fleet/hosts"; } > "$d/bssh.yaml"
      # bssh reads known_hosts from $HOME/.ssh only: a HOME holding the fleet's.
      ( unset SSH_AUTH_SOCK; export HOME=$d/home
        measure "$secs" "$d" "$bssh" --config "$d/bssh.yaml" -C bench -i "$fleet/inventory.toml.id_ed25519" \
          --strict-host-key-checking yes --parallel "$conc" --batch "$(probe_packed "$packed")" \
          > "$d/out.txt" 2> "$d/stderr" )
      ok=$(grep -c 'gpufleet-bench0123456789abcdef meta complete' "$d/out.txt") ;;
  esac
  s1=$(sim_cpu)
  read -r wall user sys rss rc < "$d/time"
  local line
  line=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%.0f\t%s\t%s\t%s\t%s' "$n" "$lat" "$tool" \
    "${workers:-default}" "$conc" "$wall" "$user" "$sys" "$((rss / 1024))" \
    "$(echo "$s1 $s0" | awk '{printf "%.2f", $1-$2}')" "$ok" "$rc" "$(nproc)")
  printf '%s\n' "$line" >> "$out/results.tsv"
  say "   $tool: wall ${wall} s, CPU $(echo "$user $sys $n" | awk '{printf "%.3f", ($1+$2)*1000/$3}') ms/node, RSS $((rss / 1024)) MB, $ok/$n complete$([ "$rc" != 0 ] && echo " (exit $rc$([ "$rc" = 124 ] && echo ': time box'))")"
}

[ -f "$out/results.tsv" ] || printf 'nodes\tlatency\ttool\tworkers\tconcurrency\twall_s\tuser_s\tsys_s\tpeak_rss_mb\tsim_cpu_s\tcomplete\texit\tcpus\n' > "$out/results.tsv"
packed=""
if [ -n "${bssh:-}" ]; then
  if [ -f "$repo/src/probe/probe.sh" ]; then packed=$(gzip -9cn "$repo/src/probe/probe.sh" | base64 -w0)
  elif [ -f "$here/probe.sh" ]; then packed=$(gzip -9cn "$here/probe.sh" | base64 -w0)
  else say "!! no probe.sh beside the script: bssh left out"; bssh=""; fi
fi
for lat in $latencies; do
  for n in $sizes; do
    [ "$(left)" -lt 30 ] && { say "== $n nodes, latency $lat: skipped (the total time box is spent)"; continue; }
    say "== $n nodes, latency $lat ($(left) s left)"
    sim_t0=$(date +%s)
    start_sim "$n" "$lat" || continue
    for t in $tools; do
      [ "$t" = bssh ] && [ -z "${bssh:-}" ] && continue
      run_one "$t" "$n" "$lat"
    done
    stop_sim
  done
done

# The table: one row per run (a run each; medians are for bench/peers.sh).
{
  echo "| nodes | sim latency | tool | workers | concurrency | wall s | client CPU ms/node | peak RSS MB | sim CPU s | complete | CPUs |"
  echo "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
  tail -n +2 "$out/results.tsv" | awk -F'\t' '{printf "| %s | %s | %s | %s | %s | %s%s | %.3f | %s | %s | %s/%s | %s |\n", $1, $2, $3, $4, $5, $6, ($12 == 124 ? " (time box)" : ""), ($7+$8)*1000/$1, $9, $10, $11, $1, $13}'
} | tee "$out/table.md"
say "== total $(( $(date +%s) - start_s )) s"
