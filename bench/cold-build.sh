#!/usr/bin/env bash
# The README's first command from nothing: a fresh clone of REPO at REV, an empty CARGO_HOME
# (crate downloads included) and target/, then `cargo run PROFILE-ARGS -- demo` in tmux; prints
# the seconds until the matrix's header shows. Run it on a quiet machine (or in a CPU cgroup of
# a high weight when the machine is shared: the figures in bench/README.md were taken so).
#
#   bench/cold-build.sh LABEL REV --profile quick      # the README's command 1
#   bench/cold-build.sh LABEL REV --release
#   SRC=/path/to/repo bench/cold-build.sh …            # default: this checkout
set -u
label=$1; rev=$2; shift 2
src=${SRC:-$(cd "$(dirname "$0")/.." && pwd)}
d=${TMPDIR:-/tmp}/cold-$label; ch=${TMPDIR:-/tmp}/cold-ch-$label
rm -rf "$d" "$ch"; git clone -q "$src" "$d"; git -C "$d" checkout -q "$rev"; mkdir -p "$ch"
sock=cold-$label
tmux -L "$sock" kill-server 2>/dev/null
start=$(date +%s.%N)
tmux -L "$sock" new-session -d -x 160 -y 45 "cd $d && CARGO_HOME=$ch cargo run $* -- demo 2>$d/build.err; sleep 600"
until tmux -L "$sock" capture-pane -p 2>/dev/null | grep -q "STATUS"; do
  tmux -L "$sock" has-session 2>/dev/null || { echo "tmux ended: see $d/build.err"; exit 1; }
  sleep 0.5
done
end=$(date +%s.%N)
echo "$label $rev $*: $(echo "$end - $start" | bc) s to the matrix"
tmux -L "$sock" kill-server
rm -rf "$d" "$ch"
