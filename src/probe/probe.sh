# gpufleet probe, protocol 2. Read-only: it reads files and runs nvidia-smi and dmesg; the only
# thing it writes is each command's output, into a file of its own private temporary folder that
# is unlinked before the command starts (nothing is left on disk, whatever kills the probe).
# Run as `sh -s` with this on stdin, after a header of five assignments that gpufleet writes
# (never in any argv or environment on the node, so no other user can read the boundary from
# /proc/*/cmdline or /proc/*/environ; no command this script runs is given it):
#   B='<boundary>' R='<root prefix>' T=<nvidia-smi limit, s> D=<node deadline, s>
#   L=<kernel log lines kept>
# Output: sections, each framed by the random boundary B that gpufleet generated for this run:
#   B <kind> <name>\n<body>\nB end <status>\n
# kinds: meta, file (a file's bytes), dir (ls -1 of a folder), grep (matching lines of a file),
#        hex (od -An -v -tx1 of a binary file), cmd (a command's stdout and stderr),
#        link (a symlink's target, not followed), find (NVIDIA module files under a folder, one
#        path per line), count (how many lines of a binary file hold a string), tail (a file's
#        last bytes).
# status: ok | absent | denied | error <rc> | rc <rc> (cmd) | timeout | missing-tool <name> |
#         not-regular (a FIFO, socket or device: never opened) | masked (a symlink to /dev/null) |
#         same (a folder that resolves to one already read; the body names it) |
#         not-link (a link was asked for and a file or folder is there) | cut <bytes> (a stream or
#         a command's output longer than that cap: the body is not all of it) | no-tmp (a command
#         not run: no private temporary folder could be made for its output)
# A command the probe ran that left processes behind (a daemon holding its output) is followed by
# a section `meta leftover` listing `<pid> <name>` of each, all killed.
# The last section is the trailer `meta complete`: without it the output is incomplete.
# Files first, nvidia-smi last. gpufleet enforces the output cap and the per-node deadline; this
# script bounds itself too: a watchdog kills its whole process group D seconds after it starts.
# Root prefix R: every path is resolved under R as chroot would (absolute symlinks restart at R,
# `..` never climbs above it); what cannot be confined is `denied`, never read from outside R.
case ${B:-} in gpufleet-*) ;; *) echo "gpufleet probe: no boundary on stdin" >&2; exit 2 ;; esac
R=${R:-}
T=${T:-10}
D=${D:-60}
L=${L:-200}
case $R in / | */) R=${R%/} ;; esac
LC_ALL=C
export LC_ALL
NL='
'
have() { command -v "$1" >/dev/null 2>&1; }
begin() { printf '%s %s %s\n' "$B" "$1" "$2"; }
end() { printf '\n%s end %s\n' "$B" "$1"; }

# The watchdog: D seconds after the start, or as soon as this shell is gone (killed by SIGPIPE
# when gpufleet closed the session), it kills this probe's process group (this shell and every
# command it started). The trailer ends it. $$ is this shell's pid, also inside the subshell.
W=
if have sleep; then
  (
    trap 'kill "$s" 2>/dev/null; exit 0' TERM
    i=0
    while [ "$i" -lt "$D" ] && kill -0 $$ 2>/dev/null; do
      sleep 1 &
      s=$!
      wait "$s"
      i=$((i + 1))
    done
    kill -KILL 0
  ) </dev/null >/dev/null 2>&1 &
  W=$!
fi

# confine PATH: sets P to where PATH (absolute, as on the node) is under the root prefix, every
# symlink resolved under it. Fails with 2 after 40 links (a loop), 1 when a link cannot be read.
confine() {
  P=$1
  [ -z "$R" ] && return 0
  _rest=$1
  _cur=
  _n=0
  while :; do
    while :; do case $_rest in /*) _rest=${_rest#/} ;; *) break ;; esac; done
    [ -n "$_rest" ] || break
    _c=${_rest%%/*}
    case $_rest in */*) _rest=${_rest#*/} ;; *) _rest= ;; esac
    case $_c in
      .) continue ;;
      ..) _cur=${_cur%/*}; continue ;;
    esac
    if [ -h "$R$_cur/$_c" ]; then
      _n=$((_n + 1))
      [ "$_n" -le 40 ] || return 2
      have readlink || return 1
      # The sentinel keeps a target's own trailing newlines (command substitution drops them).
      _t=$(readlink "$R$_cur/$_c" 2>/dev/null && echo x) || return 1
      _t=${_t%x}
      _t=${_t%"$NL"}
      [ -n "$_t" ] || return 1
      case $_t in /*) _cur= ;; esac
      _rest=$_t/$_rest
    else
      _cur=$_cur/$_c
    fi
  done
  P=$R$_cur
}

# check NAME: confines NAME into P; on failure, or when P is absent, unreadable or not a regular
# file or folder, ends the open section with that status and fails.
check() {
  confine "$1"
  case $? in
    0) ;;
    2) end "error 40"; return 1 ;;
    *) end denied; return 1 ;;
  esac
  if [ ! -e "$P" ]; then end absent; return 1; fi
  if [ -p "$P" ] || [ -c "$P" ] || [ -b "$P" ] || [ -S "$P" ]; then end not-regular; return 1; fi
  if [ ! -r "$P" ]; then end denied; return 1; fi
  return 0
}

# file NAME: the bytes of NAME (a path on the node).
file() {
  begin file "$1"
  check "$1" || return 0
  if [ -d "$P" ]; then end "error 21"
  elif cat "$P" 2>/dev/null; then end ok
  else end "error $?"
  fi
}

# dir NAME: ls -1 of the folder NAME.
dir() {
  begin dir "$1"
  check "$1" || return 0
  if [ ! -d "$P" ]; then end "error 20"
  elif ls -1 "$P" 2>/dev/null; then end ok
  else end "error $?"
  fi
}

# grepf NAME ERE: lines of NAME matching ERE (none is an answer, not an error).
grepf() {
  begin grep "$1"
  check "$1" || return 0
  grep $GA -E "$2" "$P" 2>/dev/null
  rc=$?
  if [ "$rc" -le 1 ]; then end ok; else end "error $rc"; fi
}

# grep -a: a NUL byte must not turn a text file into "binary file matches" (GNU, busybox).
GA=
echo x | grep -a x >/dev/null 2>&1 && GA=-a

# uptime_s: sets U to this machine's uptime in whole seconds (/proc/uptime of the live kernel,
# not the root prefix: it is a clock here, not a fact), or empty.
uptime_s() {
  U=
  read -r U _x </proc/uptime 2>/dev/null
  U=${U%%.*}
  case $U in '' | *[!0-9]*) U= ;; esac
}
uptime_s
S0=$U

# limited CMD...: runs CMD with the per-call time limit T, cut to what is left of the node
# deadline D, its stdout and stderr to fd 5 (capture's file); exit 124 or 137 means it timed out. `timeout` runs CMD in a process group of its
# own (out of the watchdog's reach) and kills that whole group itself within the limit + 1 s,
# which ends before D; without `timeout`, CMD stays in the probe's group, which the watchdog kills.
limited() {
  _lim=$T
  uptime_s
  if [ -n "$S0" ] && [ -n "$U" ]; then
    _left=$((D - (U - S0) - 2))
    [ "$_left" -lt "$_lim" ] && _lim=$_left
  fi
  [ "$_lim" -ge 1 ] || return 124
  if have timeout; then
    # In the background, so that its group (what the command left running: a forked child that
    # kept its stdout) is killed once it returns.
    timeout -k 1 "$_lim" "$@" </dev/null >&5 2>&5 5>&- &
    _p=$!
    wait "$_p"
    _rc=$?
    kill -s KILL -- "-$_p" 2>/dev/null
    return $_rc
  fi
  "$@" </dev/null >&5 2>&5 5>&- &
  _p=$!
  (
    # Its `sleep`s are the probe's, not what the command left behind.
    unset GPUFLEET_PROBE_RUN
    _s=0
    while [ "$_s" -lt "$_lim" ]; do
      sleep 1
      kill -0 "$_p" 2>/dev/null || exit 0
      _s=$((_s + 1))
    done
    kill -9 "$_p" 2>/dev/null
  ) </dev/null >/dev/null 2>&1 &
  _w=$!
  wait "$_p"
  _rc=$?
  kill "$_w" 2>/dev/null
  return $_rc
}

# Command output is never kept in a variable (an nvidia-smi printing forever would fill the
# node's memory) nor read through a pipe (a daemon holding it would hold the probe): `capture`
# gives it a file of a private temporary folder, under `ulimit -f` (at most the cap + 512 bytes
# on disk, tmpfs or not), unlinked before the command starts; the command's exit (`wait`) ends it,
# and its output is read back through `head -c`. Without mkdir, rm, head and tail, a command is
# not run: its section ends `missing-tool NAME`; without a writable temporary folder ($TMPDIR,
# /tmp, /dev/shm, /var/tmp) it ends `no-tmp`.
# (`ulimit` is a builtin of every POSIX sh: dash, bash, busybox ash, ksh; blocks of 512 bytes.)
CAP_TOOLS=
for t in mkdir rm head tail; do have "$t" || CAP_TOOLS=${CAP_TOOLS:-$t}; done
# M marks the environment of every command the probe runs (a run id, not the boundary): what
# still carries it after the command returned was left behind by it (a daemon in a session of
# its own, out of its process group's reach), and is killed and named.
M=$$.${S0:-0}
K=0
# capture CAP CMD...: runs CMD (a `limited` command), its stdout and stderr into an unlinked file;
# then RC is its exit status, CUT is 1 when it printed more than CAP bytes, and the main shell
# reads the output on fds 6, 7 and 8 (each from its start; closed by `release`). Fails, running
# nothing, when no private temporary folder can be made (the section then ends `no-tmp`).
capture() {
  _cap=$1
  shift
  CUT=0
  RC=
  _d=
  K=$((K + 1))
  for _b in "${TMPDIR:-/tmp}" /tmp /dev/shm /var/tmp; do
    case $_b in /*) ;; *) continue ;; esac
    # mkdir fails on anything already there (a planted folder or symlink): the folder is ours.
    if mkdir -m 700 "$_b/gpufleet-probe.$M.$K" 2>/dev/null; then
      _d=$_b/gpufleet-probe.$M.$K
      break
    fi
  done
  [ -n "$_d" ] || return 1
  # `command`: a failed redirection of `exec` must not end the probe.
  if ! { command exec 5>"$_d/out" 6<"$_d/out" 7<"$_d/out" 8<"$_d/out"; } 2>/dev/null; then
    rm -rf "$_d" 2>/dev/null
    return 1
  fi
  rm -rf "$_d" 2>/dev/null
  (
    exec 6<&- 7<&- 8<&-
    ulimit -c 0 2>/dev/null
    ulimit -f $((_cap / 512 + 1)) 2>/dev/null
    GPUFLEET_PROBE_RUN=$M
    export GPUFLEET_PROBE_RUN
    # The shell's own words (a child killed by SIGXFSZ) stay out of the file.
    "$@"
  ) 2>/dev/null
  RC=$?
  exec 5>&-
  _big=$(tail -c +$((_cap + 1)) <&6 2>/dev/null | head -c 1 | grep -c '')
  [ "${_big:-0}" != 0 ] && CUT=1
  return 0
}
release() { exec 6<&- 7<&- 8<&-; }

# leftovers: kills the processes that still carry this run's mark, and lists them in a
# `meta leftover` section (32 named at most, then how many more).
leftovers() {
  case $- in *f*) _f=1; set +f ;; *) _f= ;; esac
  _l=$(grep -l -a -F "GPUFLEET_PROBE_RUN=$M" /proc/[0-9]*/environ 2>/dev/null | head -n 1024)
  [ -n "$_f" ] && set -f
  [ -n "$_l" ] || return 0
  begin meta leftover
  _n=0
  for _e in $_l; do
    _pid=${_e#/proc/}
    _pid=${_pid%/environ}
    case $_pid in '' | *[!0-9]*) continue ;; esac
    _c=
    read -r _c <"/proc/$_pid/comm" 2>/dev/null
    kill -s KILL "$_pid" 2>/dev/null
    _n=$((_n + 1))
    [ "$_n" -le 32 ] && printf '%s %s\n' "$_pid" "$_c"
  done
  [ "$_n" -gt 32 ] && printf 'more %s\n' $((_n - 32))
  end ok
}

CFG='^(# )?CONFIG_(DMA_SHARED_BUFFER|INFINIBAND|INFINIBAND_USER_MEM|PCI_P2PDMA|MODULES|MODULE_SIG_FORCE|INTEGRITY_MACHINE_KEYRING)[= ]'
# The kernel config is read decompressed up to 4 MiB; a longer one is cut, never "lacks it".
CFG_CAP=4194304
HEX_CAP=262144
# What a command may print: dmesg 8 MiB (read back and filtered here), nvidia-smi 256 KiB (its
# query is a line per GPU, about 150 bytes).
LOG_CAP=8388608
SMI_CAP=262144

begin meta probe
echo "protocol 2"
echo "uid $(id -u 2>/dev/null)"
for d in proc sys; do [ -d "$R/$d" ] || echo "root-missing $d"; done
for t in cat ls grep gzip timeout od head tail readlink sleep chroot id mkdir rm; do
  if have "$t"; then echo "tool $t yes"; else echo "tool $t no"; fi
done
[ -n "$W" ] && echo "watchdog ${D}s"
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

# link NAME: the target of the symlink NAME (not followed).
link() {
  begin link "$1"
  if ! confine "${1%/*}"; then end denied; return 0; fi
  _l=$P/${1##*/}
  if [ -h "$_l" ]; then
    if have readlink && readlink "$_l" 2>/dev/null; then end ok; else end denied; fi
  elif [ -e "$_l" ]; then end not-link
  else end absent
  fi
}

# entries NAME: the names in folder NAME (confined), one per line, for `| while read`.
entries() { confine "$1" && [ -d "$P" ] && [ -r "$P" ] && ls -1 "$P" 2>/dev/null; }

dir /proc/driver/nvidia/gpus
entries /proc/driver/nvidia/gpus | while IFS= read -r g; do
  file "/proc/driver/nvidia/gpus/$g/information"
done

# PCI functions, summarized here (a node with thousands of SR-IOV functions stays within the
# output cap; docs/domain.md "PCI summary"): one `meta /sys/bus/pci/devices` section that names
# the NVIDIA functions and the physical network/RDMA functions (class 0x02: Ethernet,
# InfiniBand) as `full BUS`, counts the virtual functions of each parent (`vfs BUS N`: its
# virtfn links, the other side of each VF's physfn) and every other function, and names a
# function whose vendor or class cannot be read (`unreadable BUS`: it could be a GPU; `not-regular
# BUS`: its vendor is a FIFO, socket or device, never opened); then the
# vendor, device, class and driver of each `full` one. 256 functions in full and 256 parents or
# unreadable ones at most; past that, `cut-full N`, `cut-unreadable N`, `cut-vfs N`. Builtins only per function
# (read, test, set): no process per function.
begin meta /sys/bus/pci/devices
pci=
if check /sys/bus/pci/devices; then
  if [ ! -d "$P" ]; then end "error 20"
  elif ! ls -1 "$P" >/dev/null 2>&1; then end "error 1"
  else
    pci=$(entries /sys/bus/pci/devices | {
      nf=0 nl=0 cf=0 cu=0 cv=0 vf=0 other=0 all=0
      while IFS= read -r d; do
        all=$((all + 1))
        n=/sys/bus/pci/devices/$d
        v= c=
        if confine "$n" && [ -h "$P/physfn" ]; then vf=$((vf + 1)); continue; fi
        # No vendor file: not a function the kernel describes (as a missing file, not a GPU).
        if confine "$n" && [ -d "$P" ] && [ ! -e "$P/vendor" ] && [ ! -h "$P/vendor" ]; then
          other=$((other + 1)); continue
        fi
        # Regular files only: a FIFO, socket or device there is never opened (it could block).
        if confine "$n" && [ ! -f "$P/vendor" ] && [ ! -d "$P/vendor" ]; then
          if [ "$nl" -lt 256 ]; then printf 'not-regular %s\n' "$d"; nl=$((nl + 1)); else cu=$((cu + 1)); fi
          continue
        fi
        if ! confine "$n" || ! { read -r v || [ -n "$v" ]; } <"$P/vendor" 2>/dev/null; then
          if [ "$nl" -lt 256 ]; then printf 'unreadable %s\n' "$d"; nl=$((nl + 1)); else cu=$((cu + 1)); fi
          continue
        fi
        [ -f "$P/class" ] && { read -r c || :; } <"$P/class" 2>/dev/null
        case $v:$c in
          0x10de:* | *:0x02*)
            if [ "$nf" -lt 256 ]; then printf 'full %s\n' "$d"; nf=$((nf + 1)); else cf=$((cf + 1)); fi ;;
          *) other=$((other + 1)) ;;
        esac
        set -- "$P"/virtfn*
        if [ -h "$1" ]; then
          if [ "$nl" -lt 256 ]; then printf 'vfs %s %s\n' "$d" "$#"; nl=$((nl + 1)); else cv=$((cv + 1)); fi
        fi
      done
      printf 'functions %s\nvf %s\nother %s\n' "$all" "$vf" "$other"
      [ "$cf" -eq 0 ] || printf 'cut-full %s\n' "$cf"
      [ "$cu" -eq 0 ] || printf 'cut-unreadable %s\n' "$cu"
      [ "$cv" -eq 0 ] || printf 'cut-vfs %s\n' "$cv"
    })
    printf '%s\n' "$pci"
    end ok
  fi
fi
printf '%s\n' "$pci" | while read -r k d; do
  [ "$k" = full ] || continue
  n=/sys/bus/pci/devices/$d
  file "$n/vendor"
  file "$n/device"
  file "$n/class"
  link "$n/driver"
done

dir /sys/class/infiniband

# Boot configuration, in modprobe.d(5) / modules-load.d(5) order; a folder that resolves to one
# already read (/lib -> usr/lib on merged-/usr systems) is read once; a .conf that is a symlink
# to /dev/null is reported masked, never followed.
seen=
for c in modprobe.d modules-load.d; do
  for base in /etc /run /usr/local/lib /usr/lib /lib; do
    n=$base/$c
    begin dir "$n"
    check "$n" || continue
    if [ -n "$R" ]; then real=$P; else real=$(cd "$P" 2>/dev/null && pwd -P) || real=$P; fi
    case "$NL$seen$NL" in
      *"$NL$real$NL"*) printf '%s' "$real"; end same; continue ;;
    esac
    seen="$seen$NL$real"
    if [ ! -d "$P" ]; then end "error 20"; continue; fi
    if ! ls -1 "$P" 2>/dev/null; then end "error $?"; continue; fi
    end ok
    entries "$n" | while IFS= read -r f; do
      case $f in *.conf | *.alias) ;; *) continue ;; esac
      if [ -h "$real/$f" ] && [ "$(readlink "$real/$f" 2>/dev/null)" = /dev/null ]; then
        begin file "$n/$f"
        end masked
      elif [ ! -e "$real/$f" ] && [ ! -h "$real/$f" ]; then
        # Listed, yet no entry has that name: part of a name `ls -1` split (a newline in it).
        begin file "$n/$f"
        end "error 2"
      else
        file "$n/$f"
      fi
    done
  done
done

grepf /proc/kallsyms '[[:space:]]ib_umem_dmabuf_get([[:space:]]|$)'

rel=$(confine /proc/sys/kernel/osrelease && [ -f "$P" ] && cat "$P" 2>/dev/null)
case $rel in '' | *[!A-Za-z0-9._+~-]*) rel= ;; esac
[ -n "$rel" ] && grepf "/boot/config-$rel" "$CFG"

begin grep /proc/config.gz
if check /proc/config.gz; then
  if have gzip && have head && have tail; then
    # A stream longer than the cap (a gzip bomb) is cut: the config is then unknown.
    big=$(gzip -dc <"$P" 2>/dev/null | head -c $((CFG_CAP + 1)) | tail -c +$((CFG_CAP + 1)) | grep -c '')
    if [ "${big:-0}" != 0 ]; then
      end "cut $CFG_CAP"
    elif ! gzip -t <"$P" 2>/dev/null; then
      # A damaged stream (cut short): what it held is not all of the config.
      end "error 1"
    else
      gzip -dc <"$P" 2>/dev/null | head -c "$CFG_CAP" | grep $GA -E "$CFG"
      end ok
    fi
  else
    miss=gzip
    for t in head tail; do have "$t" || miss=$t; done
    have gzip || miss=gzip
    end "missing-tool $miss"
    if have od && have head && have tail; then
      # gpufleet decompresses it (also capped at 4 MiB). At most 256 KiB travel as hex (about
      # 800 KiB of text, under the output cap); a real config.gz is 30-150 KiB.
      begin hex /proc/config.gz
      big=$(head -c $((HEX_CAP + 1)) "$P" 2>/dev/null | tail -c +$((HEX_CAP + 1)) | grep -c '')
      if [ "${big:-0}" != 0 ]; then
        end "cut $HEX_CAP"
      elif od -An -v -tx1 "$P" 2>/dev/null; then
        end ok
      else
        end "error $?"
      fi
    fi
  fi
fi

# Installed kernels, their NVIDIA driver module files, and the kernel the next boot starts.
# Module files: a walk of at most 6 levels under /lib/modules/<k> (no -maxdepth: not POSIX),
# 32 files at most, symlinks not followed; 32 kernels at most.
# The driver and peermem module files, by exact name (`nvidia.ko`, Debian's names, and the
# compressed forms).
MODNAMES=
for m in nvidia nvidia-current nvidia-current-open nvidia-peermem nvidia_peermem; do
  for z in '' .xz .zst .gz; do
    MODNAMES="$MODNAMES${MODNAMES:+ -o }-name $m.ko$z"
  done
done
set -f
dir /lib/modules
dir /boot
MODS=
entries /lib/modules | head -n 32 | while IFS= read -r k; do
  n=/lib/modules/$k
  dir "$n"
  begin find "$n"
  if ! check "$n"; then continue; fi
  if ! have find; then end "missing-tool find"; continue; fi
  base=$P
  # 33 at most: a 33rd line says the list was cut (gpufleet then treats it as unknown).
  find "$base" -path "$base/*/*/*/*/*/*/*" -prune -o \( $MODNAMES \) -print 2>/dev/null |
    head -n 33 | while IFS= read -r m; do printf '%s\n' "$n${m#"$base"}"; done
  end ok
done
# The running kernel's host nvidia.ko: its last 28 bytes say whether it is signed.
if [ -n "$rel" ] && confine "/lib/modules/$rel" && [ -d "$P" ] && have find && have tail; then
  base=$P
  ko=$(find "$base" -path "$base/*/*/*/*/*/*/*" -prune -o \( -name nvidia.ko -o -name nvidia-current.ko \
    -o -name nvidia-current-open.ko \) -print 2>/dev/null | head -n 1)
  if [ -n "$ko" ]; then
    n=/lib/modules/$rel${ko#"$base"}
    begin tail "$n"
    if check "$n"; then
      if tail -c 28 "$P" 2>/dev/null; then end ok; else end "error $?"; fi
    fi
  fi
fi
link /boot/vmlinuz
link /vmlinuz
file /boot/grub2/grubenv
dir /boot/loader/entries
entries /boot/loader/entries | head -n 32 | while IFS= read -r e; do
  case $e in *.conf) file "/boot/loader/entries/$e" ;; esac
done
file /run/reboot-required

# Firmware the kernel loads for the driver (GSP): the search path, then each folder's nvidia/
# version folders and what they hold (8 versions at most per folder).
file /sys/module/firmware_class/parameters/path
fw=$(confine /sys/module/firmware_class/parameters/path && [ -f "$P" ] && cat "$P" 2>/dev/null)
case $fw in /*) ;; *) fw= ;; esac
# Schema 3 (issue 24): also /usr/lib/firmware and the GPU Operator's driver root.
for d in "$fw" "/lib/firmware/updates/$rel" /lib/firmware/updates "/lib/firmware/$rel" /lib/firmware \
  /usr/lib/firmware /run/nvidia/driver/lib/firmware; do
  case $d in '' | */) continue ;; esac
  dir "$d/nvidia"
  entries "$d/nvidia" | head -n 8 | while IFS= read -r v; do dir "$d/nvidia/$v"; done
done

file /proc/driver/nvidia/params
file /sys/kernel/mm/memory_peers/nv_mem/version
file /sys/kernel/mm/memory_peers/nv_mem_nc/version
dir /run/nvidia/driver

# The host's verbs library: can it register DMA-BUF memory (rdma-core >= 34)?
for d in /usr/lib64 /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib; do
  n=$d/libibverbs.so.1
  begin count "$n"
  check "$n" || continue
  grep -c -F ibv_reg_dmabuf_mr "$P" 2>/dev/null
  rc=$?
  if [ "$rc" -le 1 ]; then end ok; else end "error $rc"; fi
done

# Module signature enforcement: Secure Boot (EFI variable: 4 attribute bytes, then the value),
# lockdown, the kernel command line.
dir /sys/firmware/efi
begin hex /sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c
if check /sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c; then
  if ! have od || ! have head; then end "missing-tool od"
  elif head -c 64 "$P" 2>/dev/null | od -An -v -tx1; then end ok
  else end "error $?"
  fi
fi
file /sys/kernel/security/lockdown
file /proc/cmdline

# gpufleet's own node lock (a rollout holds the node): the folder, then its owner file.
dir /var/lib/gpufleet/rollout.lock
file /var/lib/gpufleet/rollout.lock/owner

# The kernel log: the last L lines that are NVIDIA's, the module loader's or lockdown's, with
# the continuation lines of their messages (those that start with whitespace), filtered here.
# At most LOG_CAP bytes of dmesg are read (a kernel's ring buffer is at most 32 MiB with
# log_buf_len, 1-2 MiB by default): a longer output is `cut`, and its messages unknown. Lines of
# more than 4 KiB are no kernel record (at most 1 KiB) and are dropped before the shell reads.
begin cmd dmesg
if ! have dmesg; then
  end "missing-tool dmesg"
elif [ -n "$CAP_TOOLS" ]; then
  end "missing-tool $CAP_TOOLS"
elif ! capture "$LOG_CAP" limited dmesg; then
  end no-tmp
else
  if [ "$CUT" = 1 ]; then
    head -c 4096 <&7 | head -n 5
    end "cut $LOG_CAP"
  elif [ "$RC" != 0 ]; then
    head -c 4096 <&7 | head -n 5
    case $RC in 124 | 137) end timeout ;; *) end "rc $RC" ;; esac
  else
    head -c "$LOG_CAP" <&7 | grep $GA -v -E '(.{256}){16}' | {
      keep=
      while IFS= read -r l; do
        case $l in
          [[:space:]]*) [ -n "$keep" ] && printf '%s\n' "$l" ;;
          *NVRM:* | *nvidia* | *Lockdown:* | *'Loading of'*) keep=1; printf '%s\n' "$l" ;;
          *) keep= ;;
        esac
      done
    } | tail -n "$L"
    end ok
  fi
  release
  leftovers
fi

# nvidia-smi: from PATH; else /usr/local/nvidia/bin (where NVIDIA's container images and many
# GPU hosts keep it, outside a login PATH; only on the live root); else the GPU Operator's
# driver root (chroot into it when root).
smi=
if have nvidia-smi; then
  smi=path
elif [ -z "$R" ] && [ -x /usr/local/nvidia/bin/nvidia-smi ]; then
  smi=local-nvidia
elif confine /run/nvidia/driver/usr/bin/nvidia-smi && [ -f "$P" ] && [ -x "$P" ]; then
  # The binary that runs is the one found under the root prefix (every link resolved there).
  SMI_BIN=$P
  DR=$R/run/nvidia/driver
  confine /run/nvidia/driver && DR=$P
  if [ "$(id -u 2>/dev/null)" = 0 ] && have chroot; then smi=chroot; else smi=driver-root; fi
fi
run_smi() {
  case $smi in
    path) limited nvidia-smi "$@" ;;
    local-nvidia) limited /usr/local/nvidia/bin/nvidia-smi "$@" ;;
    chroot) limited chroot "$DR" nvidia-smi "$@" ;;
    *) limited "$SMI_BIN" "$@" ;;
  esac
}
fields=index,name,uuid,pci.bus_id,pci.device_id,driver_version,compute_cap
if [ -z "$smi" ]; then
  begin cmd "nvidia-smi --query-gpu=$fields --format=csv,nounits"
  end "missing-tool nvidia-smi"
else
  while :; do
    begin cmd "nvidia-smi --query-gpu=$fields --format=csv,nounits"
    if [ -n "$CAP_TOOLS" ]; then
      end "missing-tool $CAP_TOOLS"
      break
    fi
    if ! capture "$SMI_CAP" run_smi --query-gpu="$fields" --format=csv,nounits; then
      end no-tmp
      break
    fi
    rc=$RC
    bad=
    if [ "$CUT" = 1 ]; then
      # What it printed first, as evidence; the rest is not read.
      head -c 4096 <&7
      end "cut $SMI_CAP"
      rc=cut
    else
      head -c "$SMI_CAP" <&7
      case $rc in
        0) end ok ;;
        124 | 137) end timeout ;;
        *)
          end "rc $rc"
          bad=$(grep -F 'is not a valid field to query' <&8 2>/dev/null | head -n 1 | head -c 1024)
          ;;
      esac
    fi
    release
    leftovers
    [ "$rc" = 0 ] && break
    case $bad in
      *'is not a valid field to query'*)
        bad=${bad#*Field \"}
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

# Schema 3 (docs/domain.md "Schema 3"): the NVLink fabric, MIG and row remapping per GPU, the GPU
# instances, the fabric daemons. `nvidia-smi -q` only after the query answered (a wedged nvidia-smi
# is not waited for twice); its GPU headers, top-level fields and the second-level Current,
# Pending, State, Status and Remapping Failure Occurred lines are kept (about 5 KiB per GPU).
QKEEP='^GPU |^    [^ ]|^        (Current|Pending|State|Status|Remapping Failure Occurred) +:'
mig=
if [ -n "$smi" ] && [ "${rc:-x}" = 0 ] && [ -z "$CAP_TOOLS" ]; then
  begin cmd "nvidia-smi -q"
  if ! capture "$SMI_CAP" run_smi -q; then
    end no-tmp
  else
    if [ "$CUT" = 1 ]; then
      head -c 4096 <&7 | grep $GA -E "$QKEEP"
      end "cut $SMI_CAP"
    elif [ "$RC" != 0 ]; then
      head -c 4096 <&7 | head -n 5
      case $RC in 124 | 137) end timeout ;; *) end "rc $RC" ;; esac
    else
      head -c "$SMI_CAP" <&7 | grep $GA -E "$QKEEP"
      end ok
      # MIG enabled (now or pending) on a GPU: its GPU instances are listed below.
      mig=$(head -c "$SMI_CAP" <&8 | grep $GA -E "$QKEEP" | {
        p=
        while IFS= read -r l; do
          case $l in
            '    '[A-Za-z]*) p=${l#    } ;;
            '        Current'*Enabled* | '        Pending'*Enabled*)
              case $p in 'MIG Mode'*) echo yes; break ;; esac ;;
          esac
        done
      })
    fi
    release
    leftovers
  fi
fi
if [ "$mig" = yes ]; then
  begin cmd "nvidia-smi mig -lgi"
  if ! capture "$SMI_CAP" run_smi mig -lgi; then
    end no-tmp
  else
    if [ "$CUT" = 1 ]; then
      head -c 4096 <&7
      end "cut $SMI_CAP"
    else
      head -c "$SMI_CAP" <&7
      case $RC in 0) end ok ;; 124 | 137) end timeout ;; *) end "rc $RC" ;; esac
    fi
    release
    leftovers
  fi
fi

# The fabric's daemons by their /proc/<pid>/comm (15 bytes: nv-fabricmanager reads
# `nv-fabricmanage`), builtins only per process; whether nvidia-imex is installed.
begin meta processes
fm=
if confine /proc && [ -d "$P" ] && [ -r "$P" ]; then
  pr=$P
  n=0
  case $- in *f*) gf=1; set +f ;; *) gf= ;; esac
  set -- "$pr"/[0-9]*/comm
  [ -n "$gf" ] && set -f
  for c in "$@"; do
    [ -f "$c" ] || continue
    n=$((n + 1))
    x=
    { read -r x || :; } <"$c" 2>/dev/null
    case $x in
      nv-fabricmanage | nvlsm | nvidia-imex)
        d=${c%/comm}
        printf 'proc %s %s\n' "${d##*/}" "$x"
        [ "$x" = nv-fabricmanage ] && fm=1
        ;;
    esac
  done
  echo "scanned $n"
  if confine /usr/bin/nvidia-imex && [ -e "$P" ]; then echo "imex-installed yes"; else echo "imex-installed no"; fi
  end ok
else
  end denied
fi
# Fabric Manager's version (it must equal the driver's), when it runs and is on PATH.
if [ -n "$fm" ] && have nv-fabricmanager && [ -z "$CAP_TOOLS" ]; then
  begin cmd "nv-fabricmanager --version"
  if ! capture 4096 limited nv-fabricmanager --version; then
    end no-tmp
  else
    head -c 4096 <&7
    case $RC in 0) end ok ;; 124 | 137) end timeout ;; *) end "rc $RC" ;; esac
    release
    leftovers
  fi
fi

[ -n "$W" ] && kill -TERM "$W" 2>/dev/null
begin meta complete
end ok
