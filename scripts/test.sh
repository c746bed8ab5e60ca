#!/usr/bin/env bash
# The whole test suite on a fresh Debian or Ubuntu machine: installs what the tests need (as root,
# or through sudo), checks formatting and lints, runs every test, then checks that no server a
# test started is still running. CI (.ci/run) calls this; so can you, as root (the Slurm tests make network namespaces).
#
# The unit tests alone need none of this and no root: `cargo test --lib`.
set -euo pipefail
cd "$(dirname "$0")/.."
# System tools (sshd, slurmctld, runuser, ip) live in sbin, which a user's PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

export DEBIAN_FRONTEND=noninteractive
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update
# The probe script's tools (sh, grep, gzip, timeout, od); a real OpenSSH server and client for
# the fleet tests (they start their own sshd processes on 127.0.0.N, and use ssh-keygen,
# ssh-agent and ssh-add); tmux for the end-to-end TUI tests. Slurm (slurmctld, slurmd, the
# client and munge) and iproute2 for the real Slurm tests (they make their own network
# namespaces in 198.18.0.0/15 and start their own slurmctld and slurmd; root is needed for
# that). Prometheus for its `promtool check metrics`, which checks the `--format prometheus`
# export (tests/exports.rs).
$SUDO apt-get install -y --no-install-recommends \
  dash grep gzip coreutils procps ca-certificates openssh-server openssh-client tmux \
  iproute2 util-linux munge slurmctld slurmd slurm-client prometheus
# sshd's privilege separation folder (the package's service is not started here).
$SUDO mkdir -p /run/sshd
# Slurm authenticates with munge: start munged unless the package already did.
if ! pgrep -x munged >/dev/null; then
  $SUDO mkdir -p /run/munge
  $SUDO chown munge:munge /run/munge
  [ -f /etc/munge/munge.key ] || $SUDO runuser -u munge -- /usr/sbin/mungekey --create
  $SUDO runuser -u munge -- /usr/sbin/munged
fi
munge -n | unmunge >/dev/null
# kubernetes-validate (PyPI) checks deploy/kubernetes against the Kubernetes schemas offline
# (tests/collect.rs); kubectl's client-side dry run needs a server for its schemas.
$SUDO apt-get install -y --no-install-recommends python3-venv
[ -x target/ci-venv/bin/kubernetes-validate ] || {
  python3 -m venv target/ci-venv
  target/ci-venv/bin/pip install --quiet kubernetes-validate==1.37.0
}
# The differential tests' oracles (tests/oracle_*.rs): ClusterShell's nodeset and
# ansible-core's ansible-inventory (ssh -G is openssh-client's, installed above).
[ -x target/ci-venv/bin/nodeset ] || target/ci-venv/bin/pip install --quiet ClusterShell==1.10.1
[ -x target/ci-venv/bin/ansible-inventory ] || target/ci-venv/bin/pip install --quiet ansible-core==2.19.14
# Python's jsonschema validates every golden output against docs/report.schema.json
# (tests/fixture_nodes.rs); kubernetes-validate brings it, pinned here all the same.
target/ci-venv/bin/python3 -c 'import jsonschema' 2>/dev/null || target/ci-venv/bin/pip install --quiet jsonschema==4.26.0

export CARGO_TERM_COLOR=never
cargo --version
rustup component add rustfmt clippy 2>/dev/null || true
cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
# The product without the simulator (the `sim` feature, on by default) builds and lints too.
cargo clippy --no-default-features --locked -- -D warnings

# What a test may start: sshd with its own config file, slurmctld, slurmd, tmux on a
# gpufleet-test socket, gpufleet itself (sim, TUI). None may outlive the suite.
leftovers() {
  pgrep -a -f '[s]shd .*-f .*/sshd_config|[s]lurmctld|[s]lurmd|[t]mux -L gpufleet-test|target/[a-z]+/gpufleet ' || true
}
before=$(leftovers)
if [ -n "$before" ]; then
  echo "scripts/test.sh: already running before the tests (not counted):"
  echo "$before"
fi

cargo test --locked

sleep 2
after=$(leftovers)
new=$(comm -13 <(echo "$before" | sort) <(echo "$after" | sort) | sed '/^$/d')
if [ -n "$new" ]; then
  echo "scripts/test.sh: the tests left these processes running:"
  echo "$new"
  exit 1
fi
echo "scripts/test.sh: every test passed, and no process a test started is still running"
