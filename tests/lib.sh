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
BROKERED=$(readlink -f "$BROKERED")
_n=0
_failed=0
_tmpbase=${TMPDIR:-/tmp}
TEST_DIR=$(mktemp -d "$_tmpbase/brokered-test.XXXXXX")
chmod 755 "$TEST_DIR"
export XDG_STATE_HOME="$TEST_DIR/state"
export XDG_CONFIG_HOME="$TEST_DIR/config"
mkdir -p "$XDG_STATE_HOME" "$XDG_CONFIG_HOME"
WS="$TEST_DIR/ws"
mkdir -p "$WS"
cd "$WS" || exit 1
OUTSIDE="$TEST_DIR/outside"
mkdir -p "$OUTSIDE"
unset BROKERED_SESSION_ID BROKERED_TOOL_CALL_ID BROKERED_WORKSPACE BROKERED_TURN_ID

cleanup() {
	cd / || true
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
		_failed=$((_failed + 1))
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
helpers_dir() {
	local d
	for d in "${HELPERS:-}" "$(dirname "$BROKERED")/../build/helpers" "$(dirname "$BROKERED")/helpers"; do
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

# tree_snapshot_any DIR: tree_snapshot with fingerprint_any (safe on FIFOs)
tree_snapshot_any() {
	(cd "$1" && find . -mindepth 1 -not -path './.brokered*' -print0 | sort -z |
		while IFS= read -r -d '' p; do printf '%q ' "$p"; fingerprint_any "$p"; done)
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
outside_check() {
	local desc=$1 before after rc err
	shift
	before=$(tree_snapshot_any "$OUTSIDE")
	err=$(cd "$WS" && "$BROKERED" run -- "$@" 2>&1 >/dev/null </dev/null)
	rc=$?
	after=$(tree_snapshot_any "$OUTSIDE")
	[ "$rc" -ne 0 ]
	ok $? "$desc: fails (status $rc)"
	case $err in
	*"Permission denied"* | *PermissionError* | *EACCES*) ok 0 "$desc: permission error" ;;
	*) ok 1 "$desc: permission error"; printf '#   stderr: %s\n' "$err" ;;
	esac
	is "$after" "$before" "$desc: outside unchanged"
}

# no_process_with MARKER: true if no process has MARKER in its command line
no_process_with() { ! pgrep -f -- "$1" >/dev/null 2>&1; }
