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
