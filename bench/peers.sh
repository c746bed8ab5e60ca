#!/bin/bash
# bench/peers.sh: gpufleet against its peers on the same fleet, the same probe, every node's output
# kept. A script, not a test (issue 12; bench/README.md says what it measures and holds the table).
#
#   bench/peers.sh install                 the peers, where the registries allow: a virtualenv with
#                                          ClusterShell, parallel-ssh, ansible-core (PyPI); Debian's
#                                          pdsh; bssh 2.2.3 (`cargo install`, into $OUT/bssh:
#                                          the last bssh that builds on rustc 1.95). A peer
#                                          that cannot be installed is said and left out.
#   bench/peers.sh run [FLEETS] [TOOLS]    FLEETS: sim:1000,sim:10000,sshd:64,sshd:256,sshd:1000
#                                          (default all); TOOLS: gpufleet,bssh,pssh,clush,pdsh,
#                                          xargs,ansible (default all; Ansible at ≤ 1,000 nodes)
#   bench/peers.sh table                   the table of the last run (bench/out/results.tsv)
#
# Every figure is the median of REPS (3) runs, tools interleaved (run 1 of every tool, then run 2,
# …). Per run: wall time, client CPU (user + system, children included: GNU time), client peak
# RSS (the largest process; GNU time), and the server's CPU over the run (the simulator's process,
# or every sshd of the fleet, from /proc/PID/stat). Needs root for the real-sshd fleet.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
out=${OUT:-$here/out}
venv=${VENV:-$out/venv}
reps=${REPS:-3}
conc=${CONC:-64}
gpufleet=${GPUFLEET:-$repo/target/release/gpufleet}
bench_user=gpufleet-bench   # the login of the real sshd fleets (start_sshd)
mkdir -p "$out"
bssh=${BSSH:-$out/bssh/bin/bssh}
export PATH=$venv/bin:$HOME/.cargo/bin:$PATH:/usr/sbin:/sbin

say() { printf '%s\n' "$*" >&2; }

install() {
  say "== PyPI (virtualenv $venv): ClusterShell parallel-ssh ansible-core"
  if [ ! -x "$venv/bin/pip" ]; then python3 -m venv "$venv" || say "!! no virtualenv: python3 -m venv failed"; fi
  "$venv/bin/pip" install -q ClusterShell parallel-ssh ansible-core || say "!! pip install failed"
  say "== Debian: pdsh"
  command -v pdsh >/dev/null || { apt-get install -y -q pdsh >/dev/null || say "!! apt-get install pdsh failed"; }
  say "== crates.io: bssh 2.2.3 into $out/bssh"
  # bssh 3.x needs rustc >= 1.97; 2.2.3 builds on 1.95. `cargo install` holds the shared
  # package cache lock for its whole build (every other cargo on the machine waits): it runs
  # with a CARGO_HOME of its own, the registry hard-linked from ~/.cargo (no download, no disk).
  if [ ! -x "$bssh" ]; then
    local home=$out/bssh-cargo-home
    mkdir -p "$home/registry"
    for d in index cache src; do [ -e "$home/registry/$d" ] || cp -al "${CARGO_HOME:-$HOME/.cargo}/registry/$d" "$home/registry/" 2>/dev/null; done
    CARGO_HOME=$home CARGO_TARGET_DIR=$out/bssh-build nice -n 15 cargo install -q --locked bssh --version =2.2.3 -j 2 --root "$out/bssh" ||
      CARGO_HOME=$home CARGO_TARGET_DIR=$out/bssh-build nice -n 15 cargo install -q --locked bssh --version =2.2.3 -j 2 --root "$out/bssh" --offline ||
      say "!! cargo install bssh failed"
  fi
  for t in gpufleet bssh pssh clush pdsh xargs ansible; do
    if have "$t"; then say "   $t: $(version "$t")"; else say "   $t: NOT INSTALLED (left out)"; fi
  done
}

have() {
  case $1 in
    gpufleet) [ -x "$gpufleet" ] ;;
    pssh) [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import pssh.clients' 2>/dev/null ;;
    clush) command -v clush >/dev/null ;;
    ansible) command -v ansible >/dev/null ;;
    xargs) command -v ssh >/dev/null ;;
    bssh) [ -x "$bssh" ] ;;
    *) command -v "$1" >/dev/null ;;
  esac
}

version() {
  case $1 in
    gpufleet) "$gpufleet" --version ;;
    # pssh.__version__ comes from versioneer, which reads the git checkout of the current
    # folder (this repository's): ask pip for the installed version instead.
    pssh) echo "parallel-ssh $("$venv/bin/pip" show parallel-ssh 2>/dev/null | sed -n 's/^Version: //p')" ;;
    clush) clush --version 2>&1 | head -1 ;;
    pdsh) pdsh -V 2>&1 | head -1 ;;
    bssh) "$bssh" --version 2>&1 | head -1 ;;
    ansible) ansible --version 2>&1 | head -1 ;;
    xargs) echo "xargs -P $conc + $(ssh -V 2>&1)" ;;
  esac
}

# The probe as one command for tools that cannot feed stdin: the five assignments, then
# sh -c "$(cat probe.sh)" as one single-quoted word (what `gpufleet sim` recognises, what sshd runs).
probe_command() {
  local q
  q=$(sed "s/'/'\\\\''/g" "$repo/src/probe/probe.sh")
  printf "B='gpufleet-bench0123456789abcdef' R='%s' T=10 D=60 L=200 sh -c '%s'" "$1" "$q"
}

# The same, the script packed (gzip, base64: 12 KB) for bssh, which refuses a command over
# 16 KiB (its sanitize_command: "Command too long", reported as "the command could not be
# executed"; the probe is 25 KB): sh -c "$(echo … | base64 -d | gzip -dc)", which the node's
# shell unpacks into the same script and `gpufleet sim` recognises (unpacked in memory).
probe_command_packed() {
  printf "B='gpufleet-bench0123456789abcdef' R='%s' T=10 D=60 L=200 sh -c \"\$(echo %s | base64 -d | gzip -dc)\"" \
    "$1" "$(gzip -9cn "$repo/src/probe/probe.sh" | base64 -w0)"
}

# --- fleets --------------------------------------------------------------------------------
# Each fleet leaves in $fleet/: inventory.toml (gpufleet), hosts (host:port lines), ssh_config
# (every node by name; Host * with the key and known_hosts), names (one node name a line),
# root (the probe's root prefix on the nodes), server_pids (whose CPU is the server's).

start_sim() { # N
  local n=$1 f=$out/fleet-sim-$1
  rm -rf "$f"; mkdir -p "$f"
  # Over 20,000 nodes: spread over 127.9.0.0/16 (ports from 2200), one address has too few ports.
  local listen=${LISTEN:-127.0.0.1}
  [ "$n" -gt 20000 ] && listen=${LISTEN:-127.9.0.0/16}
  "$gpufleet" sim --nodes "$n" --listen "$listen" ${SIM_ARGS:-} --write-inventory "$f/inventory.toml" --write-hosts "$f/hosts" \
    > "$f/sim.out" 2> "$f/sim.err" &
  echo $! > "$f/server_pids"
  for _ in $(seq 600); do grep -q '^ready' "$f/sim.out" 2>/dev/null && break; sleep 0.5; done
  grep -q '^ready' "$f/sim.out" || { say "!! the simulator did not start: $(cat "$f/sim.err")"; return 1; }
  cp "$f/hosts.ssh_config" "$f/ssh_config"
  grep '^Host ' "$f/ssh_config" | grep -v '^Host \*' | cut -d' ' -f2 > "$f/names"
  cp "$f/inventory.toml.known_hosts" "$f/known_hosts"
  echo root > "$f/user"
  cp "$f/inventory.toml.id_ed25519" "$f/userkey"
  echo "" > "$f/root"
  fleet=$f
}

stop_sim() { kill -TERM "$(cat "$fleet/server_pids")" 2>/dev/null; wait 2>/dev/null; }

start_sshd() { # N: one real OpenSSH sshd per node on 127.0.0.1, ports from 30000
  local n=$1 f=$out/fleet-sshd-$1 i port fx
  rm -rf "$f"; mkdir -p "$f/n"
  fx=$repo/tests/fixtures/nodes/h200-open-580-k6.18-real
  ssh-keygen -q -t ed25519 -N '' -f "$f/userkey"
  ssh-keygen -q -t ed25519 -N '' -f "$f/hostkey"
  mkdir -p /run/sshd
  # A login of its own whose shell reads no startup file: a login as root runs root's
  # ~/.bashrc (bash sources it for a command over SSH), whose cost on this machine (pyenv init:
  # a `pyenv rehash` per login) would be measured as every tool's server floor.
  # Its password field `*` (no password, not `!` locked: sshd without PAM refuses a locked
  # account even for a key).
  id "$bench_user" >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
    --shell /bin/sh --password '*' "$bench_user" || { say "!! cannot create the user $bench_user"; return 1; }
  : > "$f/hosts"; : > "$f/known_hosts"; : > "$f/names"; : > "$f/server_pids"
  printf 'known_hosts = "known_hosts"\nread_only = true\n[defaults]\nuser = "%s"\nidentity_file = "userkey"\nroot = "%s"\n' "$bench_user" "$fx/root" > "$f/inventory.toml"
  : > "$f/ssh_config"
  for i in $(seq 0 $((n - 1))); do
    port=$((30000 + i))
    cat > "$f/n/$i.conf" <<EOC
Port $port
ListenAddress 127.0.0.1
HostKey $f/hostkey
PidFile $f/n/$i.pid
AuthorizedKeysFile $f/userkey.pub
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
MaxStartups 10000
SetEnv PATH=$fx/bin:/usr/bin:/bin
EOC
    /usr/sbin/sshd -f "$f/n/$i.conf" || { say "!! sshd $i did not start"; return 1; }
    echo "127.0.0.1:$port" >> "$f/hosts"
    echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$f/hostkey.pub")" >> "$f/known_hosts"
    echo "node$i" >> "$f/names"
    printf 'Host node%s\n  HostName 127.0.0.1\n  Port %s\n' "$i" "$port" >> "$f/ssh_config"
    printf '[[nodes]]\nname = "node%s"\nhost = "127.0.0.1"\nport = %s\n' "$i" "$port" >> "$f/inventory.toml"
  done
  echo "$bench_user" > "$f/user"
  printf 'Host *\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n' \
    "$bench_user" "$f/userkey" "$f/known_hosts" >> "$f/ssh_config"
  sleep 1
  cat "$f"/n/*.pid > "$f/server_pids"
  echo "$fx/root" > "$f/root"
  fleet=$f
}

stop_sshd() { for p in $(cat "$fleet/server_pids"); do kill -TERM "$p" 2>/dev/null; done; }

# CPU seconds (user + system, children that were waited for included) of the server's processes
# and, for sshd, of the per-connection sshd children (their CPU lands in cutime/cstime of the
# listening sshd once reaped).
server_cpu() {
  local t=0 p v
  for p in $(cat "$fleet/server_pids"); do
    v=$(awk '{print $14+$15+$16+$17}' "/proc/$p/stat" 2>/dev/null || echo 0)
    t=$((t + v))
  done
  echo "$t $(getconf CLK_TCK)" | awk '{printf "%.2f", $1/$2}'
}

# --- one run of one tool -------------------------------------------------------------------
run_tool() { # TOOL N RUNDIR
  local tool=$1 n=$2 d=$3 cmd root
  mkdir -p "$d"
  root=$(cat "$fleet/root")
  cmd=$(probe_command "$root")
  case $tool in
    gpufleet)
      GPUFLEET_KNOWN_HOSTS=$d/kh "$gpufleet" snapshot -i "$fleet/inventory.toml" --format json \
        --concurrency "${GPUFLEET_CONC:-$conc}" --ssh-config none > "$d/out.json" ;;
    xargs)
      xargs -P "$conc" -I{} sh -c 'ssh -F "$1" "$2" "$3" > "$4/$2.out" 2>&1' _ "$fleet/ssh_config" {} "$cmd" "$d" < "$fleet/names" ;;
    pdsh)
      PDSH_SSH_ARGS_APPEND="-F $fleet/ssh_config" pdsh -R ssh -f "$conc" -w "^$fleet/names" "$cmd" > "$d/out.txt" 2>&1 ;;
    clush)
      clush -f "$conc" -o "-F $fleet/ssh_config" --hostfile "$fleet/names" "$cmd" > "$d/out.txt" 2>&1 ;;
    pssh)
      "$venv/bin/python" "$here/pssh_run.py" "$fleet" "$conc" "$cmd" "$d" ;;
    bssh)
      # bssh reads known_hosts from $HOME/.ssh only: a HOME holding the fleet's. The hosts from a
      # cluster of its YAML config (--config FILE -C bench; 10,000 on the command line pass the
      # kernel's argument limit, and 2.2.3 refuses its documented `-H ^FILE`: "Invalid hostname
      # in node: ^FILE ... Hostname contains invalid characters"). Not --output-dir: it names
      # files by host alone (all 127.0.0.1 here).
      mkdir -p "$d/home/.ssh"
      cp "$fleet/known_hosts" "$d/home/.ssh/known_hosts"
      { printf 'clusters:\n  bench:\n    nodes:\n'
        sed "s/^/      - $(cat "$fleet/user")@/" "$fleet/hosts"; } > "$d/bssh.yaml"
      env -u SSH_AUTH_SOCK HOME="$d/home" "$bssh" --config "$d/bssh.yaml" -C bench -i "$fleet/userkey" \
        --strict-host-key-checking yes --parallel "$conc" --batch \
        "$(probe_command_packed "$root")" > "$d/out.txt" 2>&1 ;;
    ansible)
      sed 's/:/ ansible_port=/; s/^/node ansible_host=/' "$fleet/hosts" | awk '{ $1 = "n" NR; print }' > "$d/inv.ini"
      ANSIBLE_HOST_KEY_CHECKING=True ANSIBLE_SSH_ARGS="-F $fleet/ssh_config" ansible all -i "$d/inv.ini" -u "$(awk '$1 == "User" {print $2; exit}' "$fleet/ssh_config")" \
        -m raw -a "$cmd" -f "$conc" > "$d/out.txt" 2>&1 ;;
  esac
}

# Complete outputs: nodes whose output holds the probe's trailer.
complete() { # TOOL RUNDIR
  case $1 in
    gpufleet) grep -o '"status": *"[a-z-]*"' "$2/out.json" | grep -vc unreachable ;;
    *) grep -rh -c 'gpufleet-bench0123456789abcdef meta complete' "$2" 2>/dev/null | awk '{s+=$1} END {print s+0}' ;;
  esac
}

measure() { # TOOL N REP -> appends a line to results.tsv
  local tool=$1 n=$2 rep=$3 d s0 s1 line
  d=$out/runs/$kind-$n/$tool-$rep
  rm -rf "$d"; mkdir -p "$d"
  s0=$(server_cpu)
  /usr/bin/time -f '%e %U %S %M' -o "$d/time" bash -c "$(declare -f run_tool probe_command probe_command_packed); fleet=$fleet venv=$venv here=$here repo=$repo gpufleet=$gpufleet bssh=$bssh conc=$conc; run_tool $tool $n $d" 2> "$d/stderr"
  s1=$(server_cpu)
  read -r wall user sys rss < "$d/time"
  line=$(printf '%s\t%s\t%s\t%s\t%.2f\t%s\t%.2f\t%s' "$kind" "$n" "$tool" "$rep" "$wall" "$(echo "$user $sys" | awk '{printf "%.2f", $1+$2}')" "$rss" "$(echo "$s1 $s0" | awk '{printf "%.2f", $1-$2}')")
  line=$(printf '%s\t%s' "$line" "$(complete "$tool" "$d")")
  printf '%s\n' "$line" >> "$out/results.tsv"
  say "   $line"
}

run() {
  local fleets=${1:-sim:1000,sim:10000,sshd:64,sshd:256,sshd:1000}
  local tools=${2:-gpufleet,bssh,pssh,clush,pdsh,xargs,ansible}
  [ -f "$out/results.tsv" ] || printf 'fleet\tnodes\ttool\trep\twall_s\tclient_cpu_s\tpeak_rss_kb\tserver_cpu_s\tcomplete\n' > "$out/results.tsv"
  ulimit -n "$(ulimit -Hn)"
  local fl t rep
  for fl in ${fleets//,/ }; do
    kind=${fl%%:*}; local n=${fl#*:}
    say "== $kind, $n nodes"
    "start_$kind" "$n" || continue
    for rep in $(seq "$reps"); do
      for t in ${tools//,/ }; do
        if ! have "$t"; then [ "$rep" = 1 ] && say "   $t: not installed, left out"; continue; fi
        if [ "$t" = ansible ] && [ "$n" -gt 1000 ]; then continue; fi
        measure "$t" "$n" "$rep"
      done
    done
    "stop_$kind"
  done
  table
}

# Medians of the reps, per fleet and tool, with the ratio to gpufleet (wall and client CPU).
table() {
  python3 - "$out/results.tsv" <<'PY'
import sys, csv, statistics as st
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
groups = {}
for r in rows:
    groups.setdefault((r["fleet"], int(r["nodes"]), r["tool"]), []).append(r)
med = {}
for k, rs in groups.items():
    f = lambda c: st.median(float(r[c]) for r in rs)
    med[k] = dict(wall=f("wall_s"), cpu=f("client_cpu_s"), rss=f("peak_rss_kb") / 1024,
                  srv=f("server_cpu_s"), ok=min(int(r["complete"]) for r in rs), reps=len(rs))
print("| fleet | nodes | tool | wall s | client CPU s | CPU ms/node | peak RSS MB | server CPU s | complete | wall ×gpufleet | CPU ×gpufleet |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for (fl, n, t), m in sorted(med.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != "gpufleet", kv[0][2])):
    g = med.get((fl, n, "gpufleet"))
    rw = f"{m['wall']/g['wall']:.2f}" if g and g["wall"] else "-"
    rc = f"{m['cpu']/g['cpu']:.2f}" if g and g["cpu"] else "-"
    print(f"| {fl} | {n} | {t} | {m['wall']:.2f} | {m['cpu']:.2f} | {m['cpu']*1000/n:.2f} | {m['rss']:.0f} | {m['srv']:.2f} | {m['ok']}/{n} | {rw} | {rc} |")
PY
}

case ${1:-} in
  install) install ;;
  run) shift; run "$@" ;;
  table) table ;;
  *) sed -n 2,16p "$0"; exit 2 ;;
esac
