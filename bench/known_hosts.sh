#!/bin/sh
# bench/known_hosts.sh [HASHED [PLAIN [NODES]]]: a scan of NODES (128) simulated nodes
# (`gpufleet sim`, real SSH on 127.0.0.1) with a large known_hosts (issue 21, item 4), on 2 cores
# (taskset -c 0,1), under GNU time (`/usr/bin/time -v`: wall, maximum RSS):
#   1. HASHED (100,000) hashed lines (`|1|salt|hash`, one random salt each, as `ssh-keygen -H`
#      writes them), the fleet's own lines hashed among them, last: target every node reachable;
#   2. PLAIN (1,000,000) plain lines (`name,address key`), the fleet's last: target ≤ 200 MB.
# The files are written under a temporary folder in /tmp and deleted at the end, the simulator
# stopped (by its pid).
#
#   cargo build --release && bench/known_hosts.sh
#   GPUFLEET=/path/to/other/gpufleet bench/known_hosts.sh 100000 1000000 128   # another build
set -eu
hashed=${1:-100000}
plain=${2:-1000000}
nodes=${3:-128}
bin=$(realpath "${GPUFLEET:-target/release/gpufleet}")
[ -x "$bin" ] || { echo "no $bin: cargo build --release" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU time (apt install time)" >&2; exit 2; }
dir=$(mktemp -d /tmp/gpufleet-known-hosts.XXXXXX)
sim=
cleanup() { [ -n "$sim" ] && kill "$sim" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
"$bin" sim --nodes "$nodes" --write-inventory "$dir/fleet.toml" >"$dir/sim.log" 2>&1 &
sim=$!
i=0
until [ -s "$dir/fleet.toml.known_hosts" ] && grep -q '^\[\[nodes\]\]' "$dir/fleet.toml"; do
  i=$((i + 1)); [ $i -lt 600 ] || { cat "$dir/sim.log" >&2; exit 1; }; sleep 0.1
done
sleep 0.5
cp "$dir/fleet.toml.known_hosts" "$dir/fleet.lines"
echo "$nodes simulated nodes ($(git rev-parse --short HEAD 2>/dev/null || echo ?), $bin, $(nproc) cores here, the scan under taskset -c 0,1)"

# One scan with fleet.toml.known_hosts as it is now; prints what it cost and how many answered.
scan() {
  taskset -c 0,1 /usr/bin/time -v env HOME="$dir" GPUFLEET_KNOWN_HOSTS="$dir/none" \
    "$bin" snapshot -i "$dir/fleet.toml" --format json --ssh-config none \
    >"$dir/out.json" 2>"$dir/time" || :
  python3 - "$1" "$dir/out.json" "$dir/time" "$(wc -c <"$dir/fleet.toml.known_hosts")" <<'PY'
import json, re, sys
what, out, tm, size = sys.argv[1], sys.argv[2], open(sys.argv[3]).read(), int(sys.argv[4])
wall = re.search(r"Elapsed \(wall clock\) time .*: (?:(\d+):)?(\d+):([\d.]+)", tm)
secs = float(wall.group(3)) + 60 * int(wall.group(2)) + 3600 * int(wall.group(1) or 0)
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", tm).group(1)) * 1024
try:
    nodes = json.load(open(out))["nodes"]
except Exception as e:
    print(tm[-2000:]); raise
bad = [n for n in nodes if n["status"] == "unreachable"]
codes = {}
for n in bad:
    for r in n["reasons"]:
        codes[r["code"]] = codes.get(r["code"], 0) + 1
warn = [l for l in tm.splitlines() if "hashed lines" in l]
print(f"{what}: known_hosts {size / 1e6:.1f} MB; wall {secs:.2f} s, max RSS {rss / 1e6:.1f} MB; "
      f"reachable {len(nodes) - len(bad)}/{len(nodes)} {codes or ''}")
for l in warn:
    print("  said:", l[:200])
PY
}

python3 - "$dir" "$hashed" <<'PY'
import base64, hashlib, hmac, os, sys
d, n = sys.argv[1], int(sys.argv[2])
real = [l.split(None, 1) for l in open(f"{d}/fleet.lines") if l.strip()]
b64 = lambda b: base64.b64encode(b).decode()
with open(f"{d}/fleet.toml.known_hosts", "w") as f:
    key = real[0][1].strip()
    for i in range(max(n - len(real), 0)):
        f.write(f"|1|{b64(os.urandom(20))}|{b64(os.urandom(20))} {key}\n")
    for host, key in real:
        salt = os.urandom(20)
        f.write(f"|1|{b64(salt)}|{b64(hmac.new(salt, host.encode(), hashlib.sha1).digest())} {key.strip()}\n")
PY
scan "$hashed hashed lines"

python3 - "$dir" "$plain" <<'PY'
import sys
d, n = sys.argv[1], int(sys.argv[2])
real = [l for l in open(f"{d}/fleet.lines") if l.strip()]
key = real[0].split(None, 1)[1].strip()
with open(f"{d}/fleet.toml.known_hosts", "w") as f:
    for i in range(max(n - len(real), 0)):
        f.write(f"node{i:07d}.dc1.example.com,10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255} {key}\n")
    f.writelines(real)
PY
scan "$plain plain lines"
