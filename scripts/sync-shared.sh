#!/bin/sh
# Refreshes the project's copies of the team's shared data and fixtures from ../shared.
# tests/fixture_nodes.rs fails while a copy differs from ../shared (when ../shared exists).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${GPUFLEET_SHARED:-$here/../shared}
rm -rf "$here/tests/fixtures/nodes"
mkdir -p "$here/tests/fixtures"
cp -R "$shared/fixtures/nodes" "$here/tests/fixtures/nodes"
cp "$shared/fixtures/README.md" "$here/tests/fixtures/README.shared.md"
cp "$shared/data/nvidia-gpus.tsv" "$shared/data/open-gpu-supported.tsv" "$here/data/"
chmod -R u+w "$here/tests/fixtures" "$here/data"
echo "synced from $shared"
