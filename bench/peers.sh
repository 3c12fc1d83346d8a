#!/usr/bin/env bash
# bench/peers.sh: brokered against native and against the sandboxes in use today, on the same
# workloads in the same invocation. For every workload (bench/workloads/NN-*.sh) and every runner
# it times RUNS runs, each in a fresh copy of the prepared workspace (preparation and reset are not
# timed), interleaving the runners run by run. Runners: native, `brokered run` (and, as root,
# with sandbox.readOnlyMounts: brokered-ro, and sandbox.copyOnWrite: brokered-cow; and that mode as
# an unprivileged user, whose overlay is made in a user namespace: brokered-cow-user), bubblewrap
# (--ro-bind / / --bind WS WS --dev /dev --proc /proc), `strace -f -o /dev/null`, and when
# installed Codex's Linux sandbox (`codex sandbox`, workspace-write) and Anthropic's
# sandbox-runtime (`srt`, allowWrite the workspace). bench/install-peers.sh installs them.
#
# For brokered it also records the supervisor's own peak RSS (VmHWM of the brokered process, not of
# the command it runs: bench/workloads/hwm.c), the bytes the run added to $XDG_STATE_HOME/brokered
# (du before/after), and a summary of the audit log's us= field.
#
#   bench/peers.sh [-n RUNS] [-q] [-b BROKERED] [-w WORKLOADS] [-p RUNNERS] [-f FSLIST] [-k]
#     -n RUNS   timed runs per workload and runner (default 5; quick mode 3); start-up does 4x (2x)
#     -q        quick mode: workloads at 1/4 size, 3 runs (under 3 minutes; the full run ~13)
#     -b PATH   brokered binary (default build/brokered, built with make if missing)
#     -w LIST   only these workloads, comma-separated names (startup,grep,git-status,untar,sed-i,
#               rm-rf,build,dd,npm-ci)
#     -p LIST   only these runners (native,brokered,brokered-ro,brokered-cow,brokered-cow-user,bwrap,
#               strace,codex,srt); native is always run
#     -f LIST   the file systems, one after the other in this invocation: tmpfs (a tmpfs of its
#               own, as root), disk (/var/tmp's, or BENCH_TMP's), ext4j (a journaled ext4,
#               data=ordered, made on a loop device in a sparse file under /var/tmp, as root: the
#               file system most Linux machines write to); e.g. -f tmpfs,ext4j. With -f the
#               outputs go to bench/out/FS/ instead of bench/out/
#     -k        keep the work directory (templates, last workspaces, audit logs) for profiling
#   env: BENCH_TMP=DIR  put workspaces and the store on DIR's file system (default: a tmpfs that
#                       peers.sh mounts under /var/tmp as root, else /var/tmp itself)
#        BENCH_USER=NAME the unprivileged user of brokered-cow-user (default brokered-test, the
#                       tests' user; the runner is left out where it does not exist)
#
# Output: a table on stdout, bench/out/peers.md, bench/out/peers.png (bench/plot.py), raw numbers
# in bench/out/peers.tsv and bench/out/peers-brokered.tsv. Not a test: the numbers depend on the
# machine.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/bench/out
RUNS= QUICK=0 BRK= ONLY_W= ONLY_P= KEEP=0 FSLIST=
args=("$@")
while getopts n:qb:w:p:f:kh o; do
	case $o in
	n) RUNS=$OPTARG ;;
	q) QUICK=1 ;;
	b) BRK=$OPTARG ;;
	w) ONLY_W=$OPTARG ;;
	p) ONLY_P=$OPTARG ;;
	f) FSLIST=$OPTARG ;;
	k) KEEP=1 ;;
	*) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
# Several file systems: this script once per file system, with the same options.
if [[ $FSLIST == *,* ]]; then
	st=0
	for f in ${FSLIST//,/ }; do
		echo "peers: === on $f" >&2
		"$0" "${args[@]}" -f "$f" || st=1
	done
	exit $st
fi
loopimg= loopmnt=
case $FSLIST in
'') ;;
tmpfs) unset BENCH_TMP && out=$out/tmpfs ;;
disk) BENCH_TMP=${BENCH_TMP:-/var/tmp} && out=$out/disk ;;
ext4j)
	[ "$(id -u)" = 0 ] || { echo "peers: -f ext4j needs root (a loop device and a mount)" >&2 && exit 2; }
	loopimg=$(mktemp /var/tmp/brokered-peers-ext4j.XXXXXX.img) && loopmnt=${loopimg%.img}.mnt || exit 1
	# 24 GiB sparse: room for the 20k-file trees, their copies and the store; mkfs's defaults
	# give a journal and data=ordered, as on an installed system
	if ! { truncate -s 24G "$loopimg" && mkfs.ext4 -q -F "$loopimg" && mkdir -p "$loopmnt" &&
		mount -o loop "$loopimg" "$loopmnt"; }; then
		echo "peers: cannot make the journaled ext4 (mkfs.ext4, mount -o loop)" >&2
		rmdir "$loopmnt" 2>/dev/null
		rm -f "$loopimg"
		exit 1
	fi
	BENCH_TMP=$loopmnt out=$out/ext4j
	;;
*) echo "peers: -f takes tmpfs, disk, ext4j, or several (tmpfs,ext4j)" >&2 && exit 2 ;;
esac
if [ $QUICK = 1 ]; then SCALE=0.25 RUNS=${RUNS:-3} STARTUP_X=2; else SCALE=1 RUNS=${RUNS:-5} STARTUP_X=4; fi
export SCALE

if [ -z "$BRK" ]; then
	BRK=$top/build/brokered
	[ -x "$BRK" ] || make -C "$top" -s build/brokered || { echo "peers: cannot build brokered (make)" >&2; exit 1; }
fi
[ -x "$BRK" ] || { echo "peers: no brokered at $BRK" >&2; exit 1; }
BRK=$(readlink -f "$BRK")

# python with matplotlib for the chart (Debian's python3-matplotlib if none has it)
PY=
for p in python3 /usr/bin/python3; do
	if $p -c 'import matplotlib' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "peers: installing python3-matplotlib (apt) for the chart" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null 2>&1; }
	/usr/bin/python3 -c 'import matplotlib' 2>/dev/null && PY=/usr/bin/python3
fi
[ -n "$PY" ] || PY=$(command -v python3 || echo /usr/bin/python3) # table only; plot.py falls back to gnuplot

mkdir -p "$out"
# A tmpfs of its own by default (as root): the workloads then measure the cost of interception,
# not the disk (this machine's ext4 is mounted with `discard`, which makes rm -rf I/O-bound and
# noisy, and resetting 20k-file trees on it would not fit the time budget). Not /dev/shm: the
# sandboxes mount a fresh /dev. fsync is free on tmpfs, so the store's fdatasync of pre-images costs
# nothing here: BENCH_TMP=/var/tmp (or any directory) runs everything on that file system instead.
work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/brokered-peers.XXXXXX") || exit 1
fs=disk
if [ -z "${BENCH_TMP:-}" ] && [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=12g,mode=0755 brokered-peers "$work" 2>/dev/null; then
	fs=tmpfs
fi
WORK=$work
export WORK
cleanup() {
	cd / || return
	if [ $KEEP = 1 ]; then echo "peers: kept $work ($fs${loopmnt:+, on $loopimg})" >&2; return; fi
	[ $fs = tmpfs ] && umount "$work"
	rm -rf "$work"
	if [ -n "$loopmnt" ]; then umount "$loopmnt" && rmdir "$loopmnt" && rm -f "$loopimg"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export XDG_STATE_HOME=$work/state
WS=$work/ws
errlog=$out/peers-errors.log
: >"$errlog"
cc -O2 -shared -fPIC -o "$work/hwm.so" "$top/bench/workloads/hwm.c" || exit 1
# a copy of the binary, so that a rebuild while the benchmark runs cannot change it midway
BRK_SRC=$BRK
cp "$BRK" "$work/brokered" && BRK=$work/brokered
printf '{"filesystem":{"denyRead":[],"allowWrite":["%s"],"denyWrite":[]},"network":{"allowedDomains":[],"deniedDomains":[]}}\n' \
	"$WS" >"$work/srt-settings.json"

# ---- runners: run_NAME CMD, in the workspace (the current directory) ----
run_native() { sh -c "$1"; }
run_brokered() { "$BRK" run -c "$1" </dev/null; }
# sandbox.readOnlyMounts (root only: it needs a mount namespace)
run_brokered-ro() { XDG_CONFIG_HOME=$work/ro-config "$BRK" run -c "$1" </dev/null; }
mkdir -p "$work/ro-config/brokered"
echo '{"sandbox": {"readOnlyMounts": true}}' >"$work/ro-config/brokered/settings.json"
# sandbox.copyOnWrite (root only: a mount namespace and an overlay); the merge is timed too
run_brokered-cow() { XDG_CONFIG_HOME=$work/cow-config "$BRK" run -c "$1" </dev/null; }
mkdir -p "$work/cow-config/brokered"
echo '{"sandbox": {"copyOnWrite": true}}' >"$work/cow-config/brokered/settings.json"
# the same as an unprivileged user (its workspace, state and config its own; chown is not timed).
# setpriv, not runuser: no PAM session, one exec more than the other runners (about 4 ms here,
# which its start-up figure carries).
BUSER=${BENCH_USER:-brokered-test}
BUSER_GID=$(id -g "$BUSER" 2>/dev/null)
run_brokered-cow-user() {
	XDG_STATE_HOME="$work/user-state" XDG_CONFIG_HOME="$work/cow-config" HOME="$work/user-state" \
		setpriv --reuid="$BUSER" --regid="$BUSER_GID" --clear-groups "$BRK" run -c "$1" </dev/null
}
# for_runner R: the fresh workspace made the runner's (as root, before the timed run)
for_runner() {
	[ "$1" = brokered-cow-user ] || return 0
	rm -rf "$work/user-state" && mkdir -p "$work/user-state" && chown -R "$BUSER:" "$WS" "$work/user-state"
}
run_bwrap() { bwrap --ro-bind / / --bind "$WS" "$WS" --dev /dev --proc /proc --chdir "$WS" sh -c "$1"; }
run_strace() { strace -f -o /dev/null sh -c "$1"; }
run_codex() { codex sandbox -c 'sandbox_mode="workspace-write"' -- sh -c "$1" </dev/null; }
run_srt() { srt -s "$work/srt-settings.json" -c "$1" </dev/null; }

want() { [ -z "$2" ] || [[ ",$2," == *",$1,"* ]]; }
runners=(native)
for r in brokered brokered-ro brokered-cow brokered-cow-user bwrap strace codex srt; do
	want "$r" "$ONLY_P" || continue
	case $r in
	brokered) ok=1 ;;
	brokered-ro) "$BRK" doctor 2>/dev/null | grep -q '\[ ok \] read-only mount namespace' && ok=1 || ok=0 ;;
	brokered-cow) "$BRK" doctor 2>/dev/null | grep -q '\[ ok \] copy-on-write overlay' && ok=1 || ok=0 ;;
	brokered-cow-user)
		ok=0
		if [ "$(id -u)" = 0 ] && id "$BUSER" >/dev/null 2>&1; then
			chmod 755 "$work" # for the user: its mode is mktemp's 0700
			setpriv --reuid="$BUSER" --regid="$BUSER_GID" --clear-groups "$BRK" doctor 2>/dev/null |
				grep -q '\[ ok \] copy-on-write overlay' && ok=1
		fi
		;;
	bwrap | strace | codex | srt) command -v "$r" >/dev/null && ok=1 || ok=0 ;;
	esac
	if [ $ok = 1 ]; then # must work here, with a write in the workspace
		mkdir -p "$WS" && for_runner "$r" && cd "$WS" || exit 1
		if ! "run_$r" 'echo ok > probe && test -s probe' >/dev/null 2>>"$errlog"; then
			echo "peers: $r does not work on this machine, left out (see $errlog)" >&2
			ok=0
		fi
		cd "$work" && rm -rf "$WS" "$XDG_STATE_HOME"
	elif [ "$r" = brokered-cow-user ]; then
		echo "peers: $r needs root to run as $BUSER, that user, and user namespaces, left out" >&2
	elif [ "$r" = brokered-ro ] || [ "$r" = brokered-cow ]; then
		echo "peers: $r needs a mount namespace (root; brokered doctor), left out" >&2
	else
		echo "peers: $r not installed, left out (bench/install-peers.sh)" >&2
	fi
	[ $ok = 1 ] && runners+=("$r")
done

version() {
	case $1 in
	native) echo "$(uname -sr)" ;;
	brokered | brokered-ro | brokered-cow | brokered-cow-user) echo "$(git -C "$top" describe --always --dirty 2>/dev/null) ($BRK_SRC, $(stat -c %y "$BRK_SRC" | cut -d. -f1))" ;;
	bwrap) bwrap --version 2>/dev/null | head -1 ;;
	strace) strace -V 2>/dev/null | head -1 ;;
	codex) codex --version 2>/dev/null | head -1 ;;
	srt) echo "srt $(srt --version 2>/dev/null | head -1)" ;;
	esac
}
{
	echo "date	$(date -u +%Y-%m-%dT%H:%MZ)"
	echo "machine	$(uname -r), $(nproc) CPUs, $(df -T "$work" | awk 'NR==2 {print $2}') at $work"
	echo "runs	$RUNS (start-up: $((RUNS * STARTUP_X)))"
	echo "scale	$SCALE"
	for r in "${runners[@]}"; do echo "version:$r	$(version "$r")"; done
} >"$out/peers-meta.tsv"

store_bytes() { if [ -d "$XDG_STATE_HOME" ]; then du -sb "$XDG_STATE_HOME" | cut -f1; else echo 0; fi; }

# audit_summary LOG...: lines, sum of us=, median us=, and per op "op:count:sum_us,..."
audit_summary() {
	local med
	med=$(cat "$@" 2>/dev/null | grep -o ' us=[0-9]*' | cut -d= -f2 | sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : 0}')
	cat "$@" 2>/dev/null | awk -v med="$med" '
	     { u = 0; o = "?"
	       for (i = 1; i <= NF; i++) { if ($i ~ /^us=/) u = substr($i, 4); if ($i ~ /^op=/) o = substr($i, 4) }
	       n++; s += u; c[o]++; t[o] += u }
	     END { if (!n) { print "0\t0\t0\t-"; exit }
	           ops = ""
	           for (o in c) ops = ops (ops ? "," : "") o ":" c[o] ":" t[o]
	           printf "%d\t%d\t%d\t%s\n", n, s, med, ops }'
}

raw=$out/peers.tsv
brk=$out/peers-brokered.tsv
printf 'workload\trunner\trun\tseconds\tstatus\n' >"$raw"
printf 'workload\tdesc\ttarget\trss_kb\tstore_bytes\taudit_lines\taudit_us_sum\taudit_us_median\taudit_ops\tprobe_seconds\n' >"$brk"

reset_ws() { # reset_ws TEMPLATE
	cd "$work" || exit 1
	rm -rf "$WS"
	cp -a "$1" "$WS"
	if declare -F w_reset >/dev/null; then w_reset "$1" "$WS"; fi
	sync
}

t_start=$EPOCHREALTIME
# warm-up: page cache of every runner's binaries
mkdir -p "$WS" && cd "$WS" && for r in "${runners[@]}"; do "run_$r" true >/dev/null 2>&1; done
cd "$work" && rm -rf "$WS" "$XDG_STATE_HOME"

for wf in "$top"/bench/workloads/[0-9]*.sh; do
	unset -f w_prepare w_reset
	# shellcheck source=/dev/null
	. "$top/bench/workloads/common.sh"
	# shellcheck source=/dev/null
	. "$wf"
	want "$W_NAME" "$ONLY_W" || continue
	tmpl=$work/tmpl-$W_NAME
	printf 'peers: %-11s preparing ... ' "$W_NAME" >&2
	w_prepare "$tmpl"
	case $? in
	0) ;;
	2) echo "skipped (its tools or the npm registry are missing)" >&2 && continue ;;
	*) echo "peers: preparing $W_NAME failed" >&2 && exit 1 ;;
	esac
	runs=$RUNS
	[ "$W_NAME" = startup ] && runs=$((RUNS * STARTUP_X))
	printf '%d runs x %d runners\n' "$runs" "${#runners[@]}" >&2
	sizes=()
	for ((k = 1; k <= runs; k++)); do
		for r in "${runners[@]}"; do
			reset_ws "$tmpl"
			rm -rf "$XDG_STATE_HOME"
			for_runner "$r" || exit 1
			s0=$(store_bytes)
			cd "$WS" || exit 1
			echo "== $W_NAME $r run $k" >>"$errlog"
			t0=$EPOCHREALTIME
			"run_$r" "$W_CMD" >/dev/null 2>>"$errlog"
			rc=$?
			t1=$EPOCHREALTIME
			cd "$work" || exit 1
			[ "$r" = brokered ] && sizes+=($(($(store_bytes) - s0)))
			printf '%s\t%s\t%d\t%s\t%d\n' "$W_NAME" "$r" "$k" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')" "$rc" >>"$raw"
			[ $rc = 0 ] || echo "peers: $W_NAME under $r exited $rc (see $errlog)" >&2
		done
	done
	# probe: one more brokered run, untimed by the table, for the supervisor's peak RSS and the audit log
	rss=0 store=0 audit="0	0	0	-"
	if [[ " ${runners[*]} " == *" brokered "* ]]; then
		reset_ws "$tmpl"
		rm -rf "$XDG_STATE_HOME"
		cd "$WS" || exit 1
		t0=$EPOCHREALTIME
		BENCH_HWM_OUT=$work/hwm.txt LD_PRELOAD=$work/hwm.so "$BRK" run -c "$W_CMD" </dev/null >/dev/null 2>>"$errlog"
		t1=$EPOCHREALTIME
		cd "$work" || exit 1
		rss=$(cat "$work/hwm.txt" 2>/dev/null || echo 0)
		store=$(printf '%s\n' "${sizes[@]}" | sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : 0}')
		audit=$(audit_summary "$XDG_STATE_HOME"/brokered/sessions/*/audit.log)
		if [ $KEEP = 1 ]; then cp "$XDG_STATE_HOME"/brokered/sessions/*/audit.log "$work/audit-$W_NAME.log" 2>/dev/null; fi
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$W_NAME" "$W_DESC" "$W_TARGET" "$rss" "$store" "$audit" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')" >>"$brk"
	rm -rf "$WS" "$XDG_STATE_HOME"
	[ $KEEP = 1 ] || rm -rf "$tmpl"
done
awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "peers: done in %.0f s\n", b - a }' >&2

"$PY" "$top/bench/plot.py" "$out"
