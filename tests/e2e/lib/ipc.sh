# shellcheck shell=bash
# Helpers for the broker socket tests (t05NN-ipc-*): a `brokered serve` of the script's own, and
# python checks (tests/e2e/lib/ipc_client.py) whose PASS/FAIL lines become TAP.
IPC_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYTHONPATH="$IPC_LIB${PYTHONPATH:+:$PYTHONPATH}"
export XDG_DATA_HOME="$TEST_DIR/data" # the home trash
SID=ipc-test-session
RUNDIR="$TEST_DIR/run"
SOCK="$RUNDIR/broker.sock"
SERVE_PID=
export SID SOCK WS OUTSIDE TEST_DIR

stop_serve() { # stop_serve: SIGTERM, wait; SERVE_STATUS is its exit status
	SERVE_STATUS=
	if [ -n "$SERVE_PID" ]; then
		kill -TERM "$SERVE_PID" 2>/dev/null
		wait "$SERVE_PID"
		SERVE_STATUS=$?
		SERVE_PID=
	fi
}

ipc_cleanup() {
	stop_serve
	cleanup
}
trap ipc_cleanup EXIT

start_serve() { # start_serve [SERVE-ARGS...]: serve $WS for $SID on $SOCK; fails if not up in 10 s
	mkdir -p "$RUNDIR"
	chmod 700 "$RUNDIR"
	"$BROKERED" serve --session "$SID" --workspace "$WS" --socket "$SOCK" "$@" \
		>"$TEST_DIR/serve.out" 2>"$TEST_DIR/serve.err" &
	SERVE_PID=$!
	local i
	for i in $(seq 100); do
		[ -S "$SOCK" ] && return 0
		kill -0 "$SERVE_PID" 2>/dev/null || break
		sleep 0.1
	done
	cat "$TEST_DIR/serve.err" >&2
	return 1
}

serve_alive() { [ -n "$SERVE_PID" ] && kill -0 "$SERVE_PID" 2>/dev/null; }

# py_checks: run python from stdin; each "PASS text"/"FAIL text" line is one TAP result; the
# script must print "DONE" at its end (a crash is a failure).
py_checks() {
	local st rest done=1
	while IFS=' ' read -r st rest; do
		case $st in
		PASS) ok 0 "$rest" ;;
		FAIL) ok 1 "$rest" ;;
		DONE) done=0 ;;
		*) echo "# $st $rest" ;;
		esac
	done < <(python3 - "$@" 2>&1)
	ok $done "python checks ran to the end"
}

brk_client() { "$BROKERED" client --socket "$SOCK" --session "$SID" "$@"; }

# py_snapshot DIR: like tree_snapshot (type, mode, content hash, link target per path), in one
# process: the load test's trees are too big to fork a few programs per file.
py_snapshot() {
	python3 - "$1" <<'PYEOF'
import hashlib, os, stat, sys
top = sys.argv[1]
out = []
for root, dirs, files in os.walk(top):
    dirs[:] = [d for d in dirs if not (root == top and d == ".brokered")]
    for name in dirs + files:
        p = os.path.join(root, name); st = os.lstat(p); rel = os.path.relpath(p, top)
        if stat.S_ISLNK(st.st_mode): out.append("%s L %s" % (rel, os.readlink(p)))
        elif stat.S_ISDIR(st.st_mode): out.append("%s D %o" % (rel, stat.S_IMODE(st.st_mode)))
        else: out.append("%s F %o %s" % (rel, stat.S_IMODE(st.st_mode), hashlib.sha256(open(p, "rb").read()).hexdigest()))
print("\n".join(sorted(out)))
PYEOF
}
