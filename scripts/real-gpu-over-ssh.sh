#!/bin/bash
# Scans the machine it runs on over a real OpenSSH sshd on 127.0.0.1, as a fleet of one node,
# and prints the same node in local mode for comparison. Used on the borrowed H200 machine,
# which has no sshd of its own:
#   here:   ../shared/tools/sshd-bundle.sh .carry/ssh && cp target/release/gpufleet .carry/bin/
#   there:  scripts/real-gpu-over-ssh.sh .carry/ssh .carry/bin/gpufleet OUTDIR
set -eu
bundle=$1 bin=$2 out=${3:-.}
st=$(mktemp -d)
"$bundle/start-sshd.sh" 127.0.0.1 2222 "$st"
cat >"$st/inventory.toml" <<EOT
known_hosts = "$st/known_hosts"
[[nodes]]
name = "$(cat /proc/sys/kernel/hostname)-over-ssh"
host = "127.0.0.1"
port = 2222
user = "root"
identity_file = "$st/userkey"
EOT
cat "$st/inventory.toml"
export HOME=$st
set -x
"$bin" snapshot -i "$st/inventory.toml" --format json >"$out/h200-over-ssh.json"
"$bin" snapshot -i "$st/inventory.toml" --format table >"$out/h200-over-ssh-table.txt"
"$bin" snapshot -i "$st/inventory.toml" --check --format csv >"$out/h200-over-ssh.csv"; echo "check exit $?"
"$bin" snapshot --local --format json >"$out/h200-local.json"
set +x
kill "$(cat "$st/sshd.pid")"
cat "$out/h200-over-ssh-table.txt"
