#!/bin/sh
# Refreshes the project's copies of the team's shared data and fixtures from ../shared:
#   fixtures/nodes, fixtures/nodes-v2, fixtures/replay, fixtures/policy -> tests/fixtures/
#   fixtures/README.md                                                 -> tests/fixtures/README.shared.md
#   data/*.tsv                                                         -> data/
# tests/fixture_nodes.rs fails while a copy differs from ../shared (when ../shared exists).
#
# Symlinks: the shared copy may hold a fixture's symlinks as regular files whose content is the
# link target (no trailing newline), as a checkout without symlink support does. The project's
# copy commits them as real symlinks (sysfs entries, /boot/vmlinuz, a merged-/usr `lib`, a
# /dev/null mask), because the probe never follows a regular file's content as a link. A file under
# a fixture's root/ is turned back into a link when its whole content is one line without a newline
# that names /dev/null or an existing path inside that root/.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${GPUFLEET_SHARED:-$here/../shared}
[ -d "$shared/fixtures/nodes" ] || { echo "no $shared/fixtures/nodes" >&2; exit 2; }
mkdir -p "$here/tests/fixtures"
for d in nodes nodes-v2 replay policy; do
  rm -rf "$here/tests/fixtures/$d"
  cp -R "$shared/fixtures/$d" "$here/tests/fixtures/$d"
done
cp "$shared/fixtures/README.md" "$here/tests/fixtures/README.shared.md"
cp "$shared/data/nvidia-gpus.tsv" "$shared/data/open-gpu-supported.tsv" "$here/data/"
chmod -R u+w "$here/tests/fixtures" "$here/data"

links=0
for root in "$here"/tests/fixtures/nodes/*/root "$here"/tests/fixtures/nodes-v2/*/root; do
  [ -d "$root" ] || continue
  top=$(cd "$root" && pwd -P)
  # Regular files of at most 255 bytes: a link target is one short line.
  find "$root" -type f -size -256c | while IFS= read -r f; do
    [ -s "$f" ] || continue
    [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] && continue
    [ "$(wc -l <"$f")" -eq 0 ] || continue
    tr -d '\000' <"$f" | cmp -s - "$f" || continue
    t=$(cat "$f")
    if [ "$t" = /dev/null ]; then
      rm "$f" && ln -s /dev/null "$f"
      continue
    fi
    case $t in /* | '') continue ;; esac
    dir=$(dirname "$f")
    [ -e "$dir/$t" ] || continue
    real=$(realpath -m "$dir/$t")
    case $real in "$top" | "$top"/*) ;; *) continue ;; esac
    rm "$f" && ln -s "$t" "$f"
  done
done
links=$(find "$here/tests/fixtures/nodes" "$here/tests/fixtures/nodes-v2" -type l | wc -l)
echo "synced from $shared ($links symlinks)"
