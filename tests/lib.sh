# shellcheck shell=bash
# Test library for end-to-end tests (git t/ style): source it, then write ok/is checks.
#
#   BROKERED      the binary under test (set by tests/run.sh)
#   TEST_DIR      a throwaway directory for this script, removed at the end
#   WS            a fresh workspace inside it (the current directory)
#   XDG_STATE_HOME points into TEST_DIR, so the store and audit log are private to the script
#
# Output is TAP. A script that needs a missing prerequisite calls skip_all "reason"; under
# CI=true a missing core kernel feature is a failure, not a skip.

set -u
: "${BROKERED:?BROKERED must point at the brokered binary}"
# The system's tools, not a per-user shim (pyenv's python3 shim costs half a second a call).
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '/\.pyenv/' | paste -sd: -)
export PATH
BROKERED=$(readlink -f "$BROKERED")
_n=0
_failed=0
_tmpbase=${TMPDIR:-/tmp}
TEST_DIR=$(mktemp -d "$_tmpbase/brokered-test.XXXXXX")
chmod 755 "$TEST_DIR"
export XDG_STATE_HOME="$TEST_DIR/state"
export XDG_CONFIG_HOME="$TEST_DIR/config"
mkdir -p "$XDG_STATE_HOME" "$XDG_CONFIG_HOME"
# Pre-images are not flushed to stable storage (sandbox.fileBackup.sync=false): that cannot be
# observed without a power loss, and the flushes of many parallel scripts on one disk dominate
# the run time. The store's own scripts (t03*) and unit tests keep the durable path
# (BROKERED_TEST_DURABLE=1 before sourcing this file).
# BROKERED_TEST_READ_ONLY_MOUNTS=1: the script runs with sandbox.readOnlyMounts (tests/run.sh runs
# some scripts again that way as root). BROKERED_TEST_COPY_ON_WRITE=1: with sandbox.copyOnWrite
# (the same, for the scripts whose behaviour that mode keeps).
_settings=
[ -z "${BROKERED_TEST_DURABLE:-}" ] && _settings='"fileBackup": {"sync": false}'
[ -n "${BROKERED_TEST_READ_ONLY_MOUNTS:-}" ] && _settings="${_settings:+$_settings, }\"readOnlyMounts\": true"
[ -n "${BROKERED_TEST_COPY_ON_WRITE:-}" ] && _settings="${_settings:+$_settings, }\"copyOnWrite\": true"
if [ -n "$_settings" ]; then
	mkdir -p "$XDG_CONFIG_HOME/brokered"
	echo "{\"sandbox\": {$_settings}}" >"$XDG_CONFIG_HOME/brokered/settings.json"
fi
WS="$TEST_DIR/ws"
mkdir -p "$WS"
cd "$WS" || exit 1
OUTSIDE="$TEST_DIR/outside"
mkdir -p "$OUTSIDE"
unset BROKERED_SESSION_ID BROKERED_TOOL_CALL_ID BROKERED_WORKSPACE BROKERED_TURN_ID

cleanup() {
	cd / || true
	if [ -n "${BROKERED_KEEP:-}" ]; then # debugging: keep the workspace and store
		echo "# kept $TEST_DIR"
		return
	fi
	chmod -R u+rwX "$TEST_DIR" 2>/dev/null
	rm -rf "$TEST_DIR"
}
trap cleanup EXIT

ok() { # ok CONDITION-EXIT-STATUS DESCRIPTION  (use: ok $? "text" or test ... ; ok $? "...")
	local st=$1
	shift
	_n=$((_n + 1))
	if [ "$st" -eq 0 ]; then
		echo "ok $_n - $*"
	else
		echo "not ok $_n - $*"
		case "$*" in
		*"# TODO"*) ;; # a known gap (TAP TODO): reported, not a failure
		*) _failed=$((_failed + 1)) ;;
		esac
	fi
}

check() { # check DESCRIPTION -- COMMAND...   (passes if COMMAND exits 0)
	local desc=$1
	shift
	[ "$1" = "--" ] && shift
	"$@"
	ok $? "$desc"
}

is() { # is GOT WANT DESCRIPTION
	local got=$1 want=$2
	shift 2
	if [ "$got" = "$want" ]; then
		ok 0 "$*"
	else
		ok 1 "$*"
		printf '#   got:  %q\n#   want: %q\n' "$got" "$want"
	fi
}

skip() { # skip DESCRIPTION REASON
	_n=$((_n + 1))
	echo "ok $_n - $1 # SKIP $2"
}

skip_all() {
	echo "1..0 # SKIP $*"
	exit 0
}

# A missing core feature is a skip on a laptop without it, a failure in CI.
require_core() {
	if ! "$BROKERED" doctor >/dev/null 2>&1; then
		if [ "${CI:-}" = true ]; then
			echo "not ok 1 - core kernel features missing (brokered doctor); CI=true makes this a failure"
			echo "1..1"
			exit 1
		fi
		skip_all "brokered doctor: core kernel features missing"
	fi
}

need() { # need PROGRAM... : skip the script if a program is missing
	local p
	for p in "$@"; do
		command -v "$p" >/dev/null 2>&1 || skip_all "$p not installed"
	done
}

brk() { "$BROKERED" "$@"; }

# in_sample IMPL N CMD: whether case number N (from 0) of a tool matrix runs for IMPL. The
# implementations that run the same programs as bash+coreutils (dash+coreutils, absolute-paths)
# differ from it only where the shell itself makes the change (a command not starting with "@",
# the tool prefix) and in how the program is found: by default they run those cases and one case
# in four of the rest. BROKERED_TEST_FULL=1 (make check-full) runs every case.
in_sample() {
	[ -n "${BROKERED_TEST_FULL:-}" ] && return 0
	case $1 in dash+coreutils | absolute-paths) ;; *) return 0 ;; esac
	case $3 in @*) [ $(($2 % 4)) = 0 ] ;; *) return 0 ;; esac
}

# The audit log of the default session of $WS.
audit_log() { cat "$XDG_STATE_HOME"/brokered/sessions/*/audit.log 2>/dev/null; }

# audit_has OP PATH-SUBSTRING DECISION : an audit line names the operation, the real path, the decision
audit_has() {
	audit_log | grep -F " op=$1 " | grep -F "normalisedPath=$2" | grep -qF "decision=$3"
}

# Bytes, mode and type of a path, for before/after comparisons.
fingerprint() {
	if [ -L "$1" ]; then
		printf 'L %s\n' "$(readlink "$1")"
	elif [ -d "$1" ]; then
		printf 'D %s\n' "$(stat -c %a "$1")"
	elif [ -e "$1" ]; then
		printf 'F %s %s\n' "$(stat -c %a "$1")" "$(sha256sum <"$1" | cut -d' ' -f1)"
	else
		echo absent
	fi
}

# Snapshot of a whole tree: every path with type, mode, content hash or link target.
tree_snapshot() {
	(cd "$1" && find . -mindepth 1 -not -path './.brokered*' -print0 | sort -z |
		while IFS= read -r -d '' p; do printf '%q ' "$p"; fingerprint "$p"; done)
}

done_testing() {
	echo "1..$_n"
	[ "$_failed" -eq 0 ]
}

# ---- helpers for the `brokered run` end-to-end scripts (tests/e2e/t0*) ----

# The directory of the C test helpers (tests/helpers/*.c built into build/helpers). tests/run.sh
# passes $HELPERS; the sanitizer build has no helpers of its own, so fall back to the release ones
# next to it.
_lib_cwd=${OLDPWD:-/} # lib.sh changed into $WS above; OLDPWD is where the script started
helpers_dir() {
	local d h=${HELPERS:-}
	case $h in "" | /*) ;; *) h="$_lib_cwd/$h" ;; esac # relative to where the script was started
	for d in "$h" "$(dirname "$BROKERED")/../build/helpers" "$(dirname "$BROKERED")/helpers"; do
		[ -n "$d" ] && [ -d "$d" ] && { (cd "$d" && pwd); return 0; }
	done
	return 1
}

# audit_escape STRING: STRING as the audit log writes it (src/basic/escape.c): bytes <= 0x20,
# >= 0x7f and \ " = ' become \xHH (lower-case hex), every other byte stays.
audit_escape() {
	local b ch out=
	for b in $(printf '%s' "$1" | od -An -v -tx1); do
		case $b in
		22 | 27 | 3d | 5c) out+="\\x$b" ;;
		2[1-9a-f] | [3-6][0-9a-f] | 7[0-9a-e]) printf -v ch "\\x$b"; out+=$ch ;;
		*) out+="\\x$b" ;;
		esac
	done
	printf '%s' "$out"
}

# audit_grep OPS REALPATH DECISION: the audit lines of an operation in OPS (an ERE alternation such
# as "open|truncate") whose real path (normalisedPath=, or normalisedTo= of a rename/link) is
# exactly REALPATH, with DECISION.
audit_grep() {
	local e
	e=$(audit_escape "$2")
	audit_log | grep -E " op=($1) " | grep -F -e " normalisedPath=$e " -e " normalisedTo=$e " |
		grep -F " decision=$3${3:+ }"
}

# audit_names OPS REALPATH DECISION: true if such a line exists
audit_names() { [ -n "$(audit_grep "$@")" ]; }

# run_in DIR CMD...: run CMD natively with DIR as the current directory
run_in() { (cd "$1" && shift && "$@"); }

# brk_in DIR CMD...: run CMD under `brokered run --` with DIR as the current directory (workspace)
brk_in() { (cd "$1" && shift && "$BROKERED" run -- "$@"); }

# fingerprint_any PATH: like fingerprint, but also FIFOs, sockets and device nodes (which it must
# not open: reading a FIFO blocks), and the owner-independent mode of every type.
fingerprint_any() {
	if [ -L "$1" ]; then
		printf 'L %s\n' "$(readlink "$1")"
	elif [ -p "$1" ]; then
		printf 'P %s\n' "$(stat -c %a "$1")"
	elif [ -S "$1" ]; then
		printf 'S %s\n' "$(stat -c %a "$1")"
	elif [ -b "$1" ] || [ -c "$1" ]; then
		printf 'N %s %s\n' "$(stat -c '%a %t:%T' "$1")"
	else
		fingerprint "$1"
	fi
}

# tree_snapshot_any DIR: every path below DIR with its type, mode, content (size and hash), link
# target or device numbers, safe on FIFOs: tests/helpers/snapshot.c, a process of its own instead
# of several per path (it runs two or more times per check).
_snapshot_bin=$(helpers_dir 2>/dev/null)/snapshot
tree_snapshot_any() {
	if [ ! -x "$_snapshot_bin" ]; then
		echo "tree_snapshot_any: no $_snapshot_bin (make helpers)" >&2
		return 1
	fi
	"$_snapshot_bin" "$1"
}

# twin_check DESC SETUP CMD...: make two fresh copies of a workspace, $TEST_DIR/twin/N/native and
# .../brokered, each prepared by the shell function SETUP (run inside it), run CMD natively in the
# first and under `brokered run --` in the second, and check that exit status, stdout and the whole
# tree (file set, types, modes, contents, link targets) are the same. Sets TWIN_NAT, TWIN_BRK (the
# two directories, physical paths) for further checks.
_twin=0
twin_check() {
	local desc=$1 setup=$2
	shift 2
	_twin=$((_twin + 1))
	TWIN_NAT="$TEST_DIR/twin/$_twin/native"
	TWIN_BRK="$TEST_DIR/twin/$_twin/brokered"
	mkdir -p "$TWIN_NAT" "$TWIN_BRK"
	TWIN_NAT=$(cd "$TWIN_NAT" && pwd -P)
	TWIN_BRK=$(cd "$TWIN_BRK" && pwd -P)
	run_in "$TWIN_NAT" "$setup"
	run_in "$TWIN_BRK" "$setup"
	local nout bout nrc brc
	nout=$(run_in "$TWIN_NAT" "$@" 2>"$TEST_DIR/twin/$_twin/native.err" </dev/null)
	nrc=$?
	bout=$(brk_in "$TWIN_BRK" "$@" 2>"$TEST_DIR/twin/$_twin/brokered.err" </dev/null)
	brc=$?
	is "$brc" "$nrc" "$desc: exit status as native"
	[ "$brc" = "$nrc" ] || sed 's/^/#   stderr: /' "$TEST_DIR/twin/$_twin/brokered.err"
	is "$bout" "$nout" "$desc: stdout as native"
	is "$(tree_snapshot_any "$TWIN_BRK")" "$(tree_snapshot_any "$TWIN_NAT")" "$desc: same files, modes, contents as native"
}

# outside_check DESC CMD...: run CMD under brokered (workspace $WS) against fixtures in $OUTSIDE,
# expect failure with a permission error on stderr and $OUTSIDE byte-identical afterwards.
# OUTSIDE_STATUS_ANY=1: do not require a non-zero status (tools that only warn, like perl -i);
# OUTSIDE_ERR_RE=ERE: another error text that the kernel itself gives first natively.
outside_check() {
	local desc=$1 before after rc err
	shift
	before=$(tree_snapshot_any "$OUTSIDE")
	err=$(cd "$WS" && "$BROKERED" run -- "$@" 2>&1 >/dev/null </dev/null)
	rc=$?
	after=$(tree_snapshot_any "$OUTSIDE")
	if [ -n "${OUTSIDE_STATUS_ANY:-}" ]; then
		ok 0 "$desc: status $rc (the tool itself reports a failed file as a warning)"
	else
		[ "$rc" -ne 0 ]
		ok $? "$desc: fails (status $rc)"
	fi
	if printf '%s' "$err" | grep -qE "Permission denied|PermissionError|EACCES${OUTSIDE_ERR_RE:+|$OUTSIDE_ERR_RE}"; then
		ok 0 "$desc: permission error"
	else
		ok 1 "$desc: permission error"; printf '#   stderr: %s\n' "$err"
	fi
	is "$after" "$before" "$desc: outside unchanged"
}

# no_process_with MARKER: true if no process has MARKER in its command line
no_process_with() { ! pgrep -f -- "$1" >/dev/null 2>&1; }

# ---- helpers for the backup store scripts (tests/e2e/t03*) ----

# BRK_PY: the system python3 (a pyenv shim on PATH costs half a second per call)
BRK_PY=/usr/bin/python3
[ -x "$BRK_PY" ] || BRK_PY=$(command -v python3 || echo python3)

# tree_snapshot_full DIR: like tree_snapshot, plus the mtime (ns) and link count of regular files (a
# restore that forgets the mtime or leaves a hard link into the store shows up); FIFOs, sockets and
# devices by type and mode, never opened (fingerprint would block reading a FIFO).
tree_snapshot_full() {
	"$BRK_PY" - "$1" <<'PYEOF'
import hashlib, os, stat, sys
top = os.fsencode(sys.argv[1])
out = []
def err(e):
    out.append(b"ERROR " + os.fsencode(str(e)))
def entry(p):
    st = os.lstat(p)
    m = st.st_mode
    if stat.S_ISLNK(m):
        return b"L " + os.readlink(p)
    if stat.S_ISDIR(m):
        return b"D %o" % stat.S_IMODE(m)
    if stat.S_ISREG(m):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return b"F %o %s mtime=%d nlink=%d" % (stat.S_IMODE(m), h.hexdigest().encode(), st.st_mtime_ns, st.st_nlink)
    return b"S %o %o" % (stat.S_IFMT(m), stat.S_IMODE(m))
for root, dirs, files in os.walk(top, onerror=err):
    if root == top:
        dirs[:] = [d for d in dirs if not d.startswith(b".brokered")]
        files = [f for f in files if not f.startswith(b".brokered")]
    for name in dirs + files:
        p = os.path.join(root, name)
        rel = b"." + p[len(top):]
        try:
            d = entry(p)
        except OSError as e:  # a directory the workload locked (chmod 0444 as non-root)
            d = b"ERROR %s" % os.fsencode(e.strerror or str(e))
        out.append(repr(rel)[2:-1].encode() + b" " + d)
out.sort()
sys.stdout.buffer.write(b"\n".join(out) + (b"\n" if out else b""))
PYEOF
}

# snap_diff A B: the differing lines of two snapshots, as TAP comments (for failure output)
snap_diff() { diff <(printf '%s\n' "$1") <(printf '%s\n' "$2") | head -${SNAP_DIFF_LINES:-30} | sed 's/^/#   /'; }

# is_snap GOT WANT DESC: like is, but prints a diff of the snapshots on failure
is_snap() {
	if [ "$1" = "$2" ]; then ok 0 "$3"; else ok 1 "$3"; snap_diff "$2" "$1"; fi
}

# json_valid: stdin parses as JSON
json_valid() { "$BRK_PY" -c 'import json,sys; json.load(sys.stdin)' 2>/dev/null; }

# store_root: the store directory of every session (one line each)
store_roots() { ls -d "$XDG_STATE_HOME"/brokered/sessions/*/modify_backup 2>/dev/null; }

# last_turn_id [--session ID]: the id of the newest turn per `brokered log --json`
last_turn_id() {
	"$BROKERED" log --json "$@" | "$BRK_PY" -c 'import json,sys; t=json.load(sys.stdin); print(t[0]["id"] if t else "")'
}

# turn_state ID [--session ID]: the state `log --json` gives a turn (committed, open, interrupted)
turn_state() {
	local id=$1
	shift
	"$BROKERED" log --json "$@" | "$BRK_PY" -c '
import json,sys
for t in json.load(sys.stdin):
    if t["id"] == sys.argv[1]: print(t["state"])' "$id"
}

# make_fixture_tree DIR SEED: a varied tree to destroy: nested directories, files of several sizes
# and modes with old mtimes, symlinks (to files, to directories, dangling, absolute), a FIFO, names
# with spaces and non-ASCII bytes.
make_fixture_tree() {
	local dir=$1 i j d
	RANDOM=$2
	mkdir -p "$dir" && (
		cd "$dir" || exit 1
		mkdir -p src/lib src/app 'docs/user guide' data/deep/er/est empty build
		for d in . src src/lib src/app 'docs/user guide' data data/deep data/deep/er/est; do
			for j in 1 2 3; do
				i=$RANDOM
				{ for _ in $(seq $((i % 40 + 1))); do echo "line $RANDOM TODO foo bar $i"; done; } >"$d/f$j.txt"
				touch -d "@$((1500000000 + i * 1000))" "$d/f$j.txt"
			done
		done
		head -c 300000 /dev/urandom >data/blob.bin
		head -c 70000 /dev/urandom >src/lib/mid.bin
		printf 'no newline' >src/app/nonl.txt
		: >src/app/empty.txt
		echo caf >'docs/user guide/caf'$'\xc3\xa9'' notes.txt'
		chmod 600 src/lib/f1.txt
		chmod 755 src/app/f2.txt
		chmod 444 data/f3.txt
		chmod 640 src/f3.txt
		ln -s f1.txt src/link-to-file
		ln -s ../data src/link-to-dir
		ln -s no-such-target src/dangling
		ln -s "$PWD/data/f1.txt" absolute-link
		mkfifo data/fifo
		chmod 700 data/deep
		find . -type f -name 'f*.txt' -print0 | sort -z | while IFS= read -r -d '' f; do
			touch -d "@$((1400000000 + RANDOM * 7))" "$f"
		done
		touch -d @1600000000 data/blob.bin src/lib/mid.bin src/app/nonl.txt src/app/empty.txt
	)
}

# gen_workload DIR SEED NOPS [PAUSE]: print a bash script of NOPS random destructive operations on
# the tree in DIR (paths picked from it and fresh names), each done by one of: shell builtins,
# coreutils, a static busybox, python3, perl. Every operation may fail (a path may be gone); none
# blocks (FIFOs are never written, nor given to Python 3.11's shutil.rmtree, which opens its path
# before it looks at its type). PAUSE (seconds) sleeps between operations.
gen_workload() {
	local dir=$1 seed=$2 nops=$3 pause=${4:-} i p q r d e t tool op n bb=
	RANDOM=$seed
	[ -x /bin/busybox ] && bb=/bin/busybox
	local PY=$BRK_PY
	local -a pool dirs
	mapfile -d '' pool < <(cd "$dir" && find . -mindepth 1 -not -path './.brokered*' -print0)
	mapfile -d '' dirs < <(cd "$dir" && find . -mindepth 1 -type d -not -path './.brokered*' -print0)
	dirs+=(.)
	for i in $(seq 12); do pool+=("${dirs[RANDOM % ${#dirs[@]}]}/n$i"); done
	pool+=(./newdir ./newdir/sub ./newdir/x.txt)
	# pick VAR: no command substitution, whose subshell would reseed RANDOM (seeds replay)
	pk() { printf -v "$1" '%q' "${pool[RANDOM % ${#pool[@]}]}"; }
	pkd() { printf -v "$1" '%q' "${dirs[RANDOM % ${#dirs[@]}]}"; }
	echo "# workload seed $seed"
	echo 'exec 2>/dev/null'
	echo 'nofifo() { [ ! -p "$1" ]; }'
	for i in $(seq "$nops"); do
		pk p
		pk q
		pk r
		pkd d
		pkd e
		n=$RANDOM
		tool=$((RANDOM % 5)) # 0 builtin, 1 coreutils, 2 busybox, 3 python, 4 perl
		[ $tool = 2 ] && [ -z "$bb" ] && tool=1
		op=$((RANDOM % 18))
		case $op.$tool in
		0.0) echo "nofifo $p && echo w$n > $p" ;;
		0.1) echo "nofifo $p && printf 'w%s\n' $n | tee $p >/dev/null" ;;
		0.2) echo "nofifo $p && $bb sh -c 'echo w$n > \"\$1\"' sh $p" ;;
		0.3) echo "nofifo $p && $PY -c 'import sys; open(sys.argv[1],\"w\").write(\"py$n\\n\")' $p" ;;
		0.4) echo "nofifo $p && perl -e 'open(F,\">\",\$ARGV[0]) or exit 1; print F \"pl$n\\n\"' $p" ;;
		1.0 | 1.1) echo "nofifo $p && echo a$n >> $p" ;;
		1.2) echo "nofifo $p && $bb sh -c 'echo a$n >> \"\$1\"' sh $p" ;;
		1.3) echo "nofifo $p && $PY -c 'import sys; open(sys.argv[1],\"a\").write(\"pa$n\\n\")' $p" ;;
		1.4) echo "nofifo $p && perl -e 'open(F,\">>\",\$ARGV[0]) or exit 1; print F \"pa$n\\n\"' $p" ;;
		2.0) echo "nofifo $p && : > $p" ;;
		2.1) echo "nofifo $p && truncate -s $((n % 5000)) $p" ;;
		2.2) echo "nofifo $p && $bb truncate -s $((n % 100)) $p" ;;
		2.3) echo "$PY -c 'import os,sys; os.truncate(sys.argv[1], $((n % 50)))' $p" ;;
		2.4) echo "perl -e 'truncate(\$ARGV[0], $((n % 50)))' $p" ;;
		3.0 | 3.1) echo "mv -f $p $q" ;;
		3.2) echo "$bb mv -f $p $q" ;;
		3.3) echo "$PY -c 'import os,sys; os.replace(sys.argv[1], sys.argv[2])' $p $q" ;;
		3.4) echo "perl -e 'rename(\$ARGV[0], \$ARGV[1])' $p $q" ;;
		4.0 | 4.1) echo "rm -f $p" ;;
		4.2) echo "$bb rm -f $p" ;;
		4.3) echo "$PY -c 'import os,sys; os.unlink(sys.argv[1])' $p" ;;
		4.4) echo "perl -e 'unlink(\$ARGV[0])' $p" ;;
		5.0 | 5.1) echo "rmdir $p" ;;
		5.2) echo "$bb rmdir $p" ;;
		5.3) echo "$PY -c 'import os,sys; os.rmdir(sys.argv[1])' $p" ;;
		5.4) echo "perl -e 'rmdir(\$ARGV[0])' $p" ;;
		6.0 | 6.1) echo "rm -rf $d" ;;
		6.2) echo "$bb rm -rf $d" ;;
		6.3) echo "nofifo $d && $PY -c 'import shutil,sys; shutil.rmtree(sys.argv[1])' $d" ;;
		6.4) echo "perl -MFile::Path=remove_tree -e 'remove_tree(\$ARGV[0])' $d" ;;
		7.0 | 7.1) echo "mkdir -p $p/m$n" ;;
		7.2) echo "$bb mkdir $p" ;;
		7.3) echo "$PY -c 'import os,sys; os.makedirs(sys.argv[1])' $p/m$n" ;;
		7.4) echo "perl -e 'mkdir(\$ARGV[0])' $p" ;;
		8.0 | 8.1) echo "mkfifo $p" ;;
		8.2) echo "$bb mkfifo $p" ;;
		8.3) echo "$PY -c 'import os,sys; os.mkfifo(sys.argv[1])' $p" ;;
		8.4) echo "perl -MPOSIX -e 'POSIX::mkfifo(\$ARGV[0], 0644)' $p" ;;
		9.0 | 9.1) echo "ln -f $p $q" ;;
		9.2) echo "$bb ln $p $q" ;;
		9.3) echo "$PY -c 'import os,sys; os.link(sys.argv[1], sys.argv[2])' $p $q" ;;
		9.4) echo "perl -e 'link(\$ARGV[0], \$ARGV[1])' $p $q" ;;
		10.0 | 10.1) echo "ln -sfn $r $q" ;;
		10.2) echo "$bb ln -sfn $r $q" ;;
		10.3) echo "$PY -c 'import os,sys; os.symlink(sys.argv[1], sys.argv[2]+\".t\"); os.replace(sys.argv[2]+\".t\", sys.argv[2])' $r $q" ;;
		10.4) echo "perl -e 'unlink(\$ARGV[1]); symlink(\$ARGV[0], \$ARGV[1])' $r $q" ;;
		11.*)
			t=$(printf '%s' 600 644 755 444 640 700 | fold -w3 | sed -n "$((n % 6 + 1))p")
			case $tool in
			0 | 1) echo "chmod $t $p" ;;
			2) echo "$bb chmod $t $p" ;;
			3) echo "$PY -c 'import os,sys; os.chmod(sys.argv[1], 0o$t)' $p" ;;
			4) echo "perl -e 'chmod(0$t, \$ARGV[0])' $p" ;;
			esac
			;;
		12.0 | 12.1) echo "touch -d @$((1300000000 + n)) $p" ;;
		12.2) echo "$bb touch $p" ;;
		12.3) echo "$PY -c 'import os,sys; os.utime(sys.argv[1], ($n, $n))' $p" ;;
		12.4) echo "perl -e 'utime($n, $n, \$ARGV[0])' $p" ;;
		13.0 | 13.1) echo "find $d -type f -name '*.txt' -exec sed -i 's/TODO/DONE$n/;s/foo/F/g' {} +" ;;
		13.2) echo "find $d -type f -name '*.txt' -exec $bb sed -i 's/line/L$n/' {} +" ;;
		13.3) echo "find $d -type f -name '*.txt' -exec $PY -c 'import sys
for f in sys.argv[1:]:
    s=open(f).read(); open(f,\"w\").write(s.replace(\"bar\",\"BAR\"))' {} +" ;;
		13.4) echo "find $d -type f -name '*.txt' -exec perl -pi -e 's/bar/B$n/' {} +" ;;
		14.0 | 14.1) echo "mv $d $e/" ;;
		14.2) echo "$bb mv $d $q" ;;
		14.3) echo "$PY -c 'import shutil,sys; shutil.move(sys.argv[1], sys.argv[2])' $d $q" ;;
		14.4) echo "perl -e 'rename(\$ARGV[0], \$ARGV[1])' $d $q" ;;
		15.*) echo "cp -a $d $q" ;;
		16.*) echo "nofifo $p && dd if=/dev/urandom of=$p bs=1k count=$((n % 4 + 1)) seek=$((n % 7)) conv=notrunc status=none" ;;
		17.*) echo "cd $d && { nofifo f1.txt && echo cwd$n >> f1.txt; rm -f f2.txt; cd - >/dev/null; }" ;;
		esac
		[ -n "$pause" ] && echo "sleep $pause"
	done
	echo 'exit 0'
	unset -f pk pkd
}
