# gpufleet probe, protocol 1. Read-only: it reads files and runs nvidia-smi, and writes nothing.
# Run as: sh -s -- BOUNDARY ROOT SMI_TIMEOUT_SECS   (this script on stdin)
# Output: sections, each framed by the random BOUNDARY that gpufleet generated for this run:
#   BOUNDARY <kind> <name>\n<body>\nBOUNDARY end <status>\n
# kinds: meta, file (a file's bytes), dir (ls -1 of a folder), grep (matching lines of a file),
#        hex (od -An -v -tx1 of a binary file), cmd (a command's stdout and stderr).
# status: ok | absent | denied | error <rc> | rc <rc> (cmd) | timeout | missing-tool <name>
# Files first, nvidia-smi last. gpufleet enforces the output cap and the per-node deadline.
B=$1
R=${2:-/}
T=${3:-10}
case $R in */) R=${R%/} ;; esac
LC_ALL=C
export LC_ALL
have() { command -v "$1" >/dev/null 2>&1; }
begin() { printf '%s %s %s\n' "$B" "$1" "$2"; }
end() { printf '\n%s end %s\n' "$B" "$1"; }

# readf NAME PATH: the bytes of PATH, reported under NAME (the path on the node).
readf() {
  begin file "$1"
  if [ ! -e "$2" ]; then end absent
  elif [ ! -r "$2" ]; then end denied
  elif [ -d "$2" ]; then end "error 21"
  elif cat "$2" 2>/dev/null; then end ok
  else end "error $?"
  fi
}
file() { readf "$1" "$R$1"; }

# dir NAME: ls -1 of the folder NAME.
dir() {
  begin dir "$1"
  if [ ! -e "$R$1" ]; then end absent
  elif [ ! -r "$R$1" ]; then end denied
  elif ls -1 "$R$1" 2>/dev/null; then end ok
  else end "error $?"
  fi
}

# grepf NAME ERE: lines of NAME matching ERE (none is an answer, not an error).
grepf() {
  begin grep "$1"
  if [ ! -e "$R$1" ]; then end absent
  elif [ ! -r "$R$1" ]; then end denied
  else
    grep -E "$2" "$R$1" 2>/dev/null
    rc=$?
    if [ "$rc" -le 1 ]; then end ok; else end "error $rc"; fi
  fi
}

# limited CMD...: runs CMD with the per-call time limit T; exit 124 or 137 means it timed out.
limited() {
  if have timeout; then
    timeout -k 2 "$T" "$@"
    return $?
  fi
  "$@" &
  p=$!
  (
    s=0
    while [ "$s" -lt "$T" ]; do
      sleep 1
      kill -0 "$p" 2>/dev/null || exit 0
      s=$((s + 1))
    done
    kill -9 "$p" 2>/dev/null
  ) >/dev/null 2>&1 &
  w=$!
  wait "$p"
  rc=$?
  kill "$w" 2>/dev/null
  return $rc
}

CFG='^(# )?CONFIG_(DMA_SHARED_BUFFER|INFINIBAND|INFINIBAND_USER_MEM|PCI_P2PDMA|MODULES)[= ]'

begin meta probe
echo "protocol 1"
echo "uid $(id -u 2>/dev/null)"
[ -d "$R/proc" ] || printf 'root-missing %s\n' "${R:-/}"
for t in cat ls grep gzip timeout od chroot id; do
  if have "$t"; then echo "tool $t yes"; else echo "tool $t no"; fi
done
end ok

file /proc/sys/kernel/osrelease
file /proc/version
file /proc/sys/kernel/hostname
file /proc/sys/kernel/tainted
file /etc/os-release
file /proc/driver/nvidia/version
file /sys/module/nvidia/version
file /proc/modules
dir /sys/module

dir /proc/driver/nvidia/gpus
if [ -d "$R/proc/driver/nvidia/gpus" ]; then
  for g in "$R"/proc/driver/nvidia/gpus/*; do
    [ -e "$g" ] || continue
    file "/proc/driver/nvidia/gpus/${g##*/}/information"
  done
fi

# NVIDIA PCI devices. sysfs entries are symlinks; a tree copied without symlink support
# (a checkout with core.symlinks=false) holds the link target as a file, which is followed too.
dir /sys/bus/pci/devices
if [ -d "$R/sys/bus/pci/devices" ]; then
  for d in "$R"/sys/bus/pci/devices/*; do
    [ -e "$d" ] || continue
    dd=$d
    if [ ! -d "$d" ] && [ -f "$d" ] && [ -r "$d" ]; then
      t=$(cat "$d" 2>/dev/null)
      case $t in /*) dd=$R$t ;; *) dd=${d%/*}/$t ;; esac
    fi
    v=$(cat "$dd/vendor" 2>/dev/null)
    [ "$v" = 0x10de ] || continue
    n=/sys/bus/pci/devices/${d##*/}
    readf "$n/vendor" "$dd/vendor"
    readf "$n/device" "$dd/device"
    readf "$n/class" "$dd/class"
  done
fi

for c in /etc/modules-load.d /etc/modprobe.d; do
  dir "$c"
  if [ -d "$R$c" ]; then
    for f in "$R$c"/*.conf; do
      [ -e "$f" ] || continue
      file "$c/${f##*/}"
    done
  fi
done

grepf /proc/kallsyms '[[:space:]]ib_umem_dmabuf_get([[:space:]]|$)'

rel=$(cat "$R/proc/sys/kernel/osrelease" 2>/dev/null)
case $rel in '' | *[!A-Za-z0-9._+~-]*) rel= ;; esac
[ -n "$rel" ] && grepf "/boot/config-$rel" "$CFG"

p=$R/proc/config.gz
if [ ! -e "$p" ]; then
  begin grep /proc/config.gz; end absent
elif [ ! -r "$p" ]; then
  begin grep /proc/config.gz; end denied
elif have gzip; then
  begin grep /proc/config.gz
  if cfg=$(gzip -dc <"$p" 2>/dev/null); then
    printf '%s\n' "$cfg" | grep -E "$CFG"
    end ok
  else
    end "error $?"
  fi
elif have od; then
  begin hex /proc/config.gz
  if od -An -v -tx1 "$p" 2>/dev/null; then end ok; else end "error $?"; fi
else
  begin grep /proc/config.gz; end "missing-tool gzip"
fi

# nvidia-smi: from PATH; else /usr/local/nvidia/bin (where NVIDIA's container images and many
# GPU hosts keep it, outside a login PATH; only on the live root); else the GPU Operator's
# driver root (chroot into it when root).
smi=
if have nvidia-smi; then
  smi=path
elif [ -z "$R" ] && [ -x /usr/local/nvidia/bin/nvidia-smi ]; then
  smi=local-nvidia
elif [ -x "$R/run/nvidia/driver/usr/bin/nvidia-smi" ]; then
  if [ "$(id -u 2>/dev/null)" = 0 ] && have chroot; then smi=chroot; else smi=driver-root; fi
fi
run_smi() {
  case $smi in
    path) limited nvidia-smi "$@" ;;
    local-nvidia) limited /usr/local/nvidia/bin/nvidia-smi "$@" ;;
    chroot) limited chroot "$R/run/nvidia/driver" nvidia-smi "$@" ;;
    *) limited "$R/run/nvidia/driver/usr/bin/nvidia-smi" "$@" ;;
  esac
}
fields=index,name,uuid,pci.bus_id,pci.device_id,driver_version,compute_cap
if [ -z "$smi" ]; then
  begin cmd "nvidia-smi --query-gpu=$fields --format=csv,nounits"
  end "missing-tool nvidia-smi"
else
  while :; do
    begin cmd "nvidia-smi --query-gpu=$fields --format=csv,nounits"
    out=$(run_smi --query-gpu="$fields" --format=csv,nounits 2>&1)
    rc=$?
    printf '%s' "$out"
    case $rc in
      0) end ok ;;
      124 | 137) end timeout; break ;;
      *) end "rc $rc" ;;
    esac
    [ "$rc" = 0 ] && break
    case $out in
      *'is not a valid field to query'*)
        bad=${out#*Field \"}
        bad=${bad%%\"*}
        new=
        IFS=,
        set -f
        for f in $fields; do [ "$f" = "$bad" ] || new=${new:+$new,}$f; done
        set +f
        unset IFS
        if [ -n "$new" ] && [ "$new" != "$fields" ]; then fields=$new; continue; fi
        ;;
    esac
    break
  done
fi

begin meta done
end ok
