#!/usr/bin/env bash
# Issue 12: `brokered run` inside a `brokered run` runs its command directly — the outer broker
# already checks and backs up every change, into the outer turn (recorded, undoable) — but only
# when the outer broker is really an ancestor; a spoofed environment is not believed. Inside another
# sandbox that leaves only the workspace and the state dir writable (bubblewrap), the scratch dir
# falls back beside the state dir.
. "$(dirname "$0")/../lib.sh"
require_core
need python3

WSP=$(pwd -P)
echo victim >victim.txt
echo keep >keep.txt

# ---- nested: the inner command is brokered by the outer run, into its turn ----
err=$(brk run -m outer -c "\"$BROKERED\" run -m inner -c 'echo nested > nested.txt; rm victim.txt; exit 7'" 2>&1 </dev/null)
is "$?" 7 "nested run: the inner command's exit status comes through"
is "$err" "" "nested run: no error (not 'Failed to open the backup store')"
is "$(cat nested.txt 2>/dev/null)" nested "nested run: the inner command created its file"
test ! -e victim.txt
ok $? "nested run: the inner command removed its file"
is "$(brk log | wc -l)" 1 "nested run: one turn, the outer one"
brk log | grep -q ' outer$'
ok $? "nested run: the turn carries the outer message"
show=$(brk show last)
printf '%s\n' "$show" | grep -qE '^  created +absent +nested\.txt$' &&
	printf '%s\n' "$show" | grep -qE '^  deleted +file +7  victim\.txt$'
ok $? "nested run: the outer turn recorded both inner changes"
grep -q 'normalisedPath=[^ ]*victim.txt.*decision=allow' "$XDG_STATE_HOME"/brokered/sessions/*/audit.log
ok $? "nested run: the outer broker's audit log has the inner delete"
brk undo </dev/null >/dev/null 2>&1
is "$?" 0 "nested run: undo of the outer turn"
is "$(cat victim.txt 2>/dev/null)" victim "nested run: undo brought the file back"
test ! -e nested.txt
ok $? "nested run: undo removed the inner command's file"

# the outer policy still holds for the inner command
brk run -c "\"$BROKERED\" run -c 'echo x > \"$OUTSIDE/escape\"'" </dev/null >/dev/null 2>&1
test ! -e "$OUTSIDE/escape"
ok $? "nested run: the inner command cannot write outside the workspace"
brk run -c "\"$BROKERED\" run -- no-such-program-here" </dev/null >/dev/null 2>&1
is "$?" 127 "nested run: a missing program is 127"
brk run -c "\"$BROKERED\" sh -c 'echo via-sh > sh.txt'" </dev/null
is "$(cat sh.txt 2>/dev/null)" via-sh "nested brokered sh -c works too"
err=$(brk run -c "\"$BROKERED\" run --rollback last -- true" 2>&1 </dev/null)
is "$?" 125 "nested run --rollback: refused (125)"
case $err in *"inside another one"*"--rollback applies to the outer run only"*) ok 0 "nested run --rollback: the message says why" ;;
*) ok 1 "nested run --rollback: the message says why"; printf '#   %s\n' "$err" ;; esac

# ---- a spoofed environment is not believed ----
# Outside any sandbox: the variables are stale, the run is brokered as usual (a turn of its own).
n0=$(brk log --session spoofed 2>/dev/null | wc -l)
BROKERED_IPC_ADDRESS=/nonexistent/sock BROKERED_SESSION_ID=spoofed \
	"$BROKERED" run -c 'echo s > spoof1.txt' </dev/null
is "$?" 0 "stale BROKERED_IPC_ADDRESS outside a sandbox: the run works"
is "$(brk log --session spoofed | wc -l)" $((n0 + 1)) "stale BROKERED_IPC_ADDRESS: the run was brokered and recorded"
# Inside a sandbox, a socket served by a process that is not an ancestor: refused.
mkdir -p "$TEST_DIR/srv" && chmod 700 "$TEST_DIR/srv"
"$BROKERED" serve --session other --socket "$TEST_DIR/srv/s.sock" >/dev/null 2>"$TEST_DIR/serve.err" &
serve_pid=$!
for _ in $(seq 100); do [ -S "$TEST_DIR/srv/s.sock" ] && break; sleep 0.1; done
# Not believed: the inner run is a run of its own, which the outer sandbox cannot host.
err=$(brk run -c "BROKERED_IPC_ADDRESS=$TEST_DIR/srv/s.sock \"$BROKERED\" run -c 'echo s > spoof2.txt'" 2>&1 </dev/null)
# The probe's connect to that socket (outside the workspace) is itself a refused access: the outer
# run reports it for approval (120), and the inner run, not believed, fails (125) and runs nothing.
is "$?" 120 "a broker socket of a non-ancestor is not believed: no unbrokered run; the connect to it needs approval (120)"
case $err in *"names a broker (pid "*") that is not an ancestor of this process"*) ok 0 "the error says why" ;;
*) ok 1 "the error says why"; printf '#   %s\n' "$err" ;; esac
test ! -e spoof2.txt
ok $? "nothing ran"
kill "$serve_pid" 2>/dev/null
wait "$serve_pid" 2>/dev/null

# ---- wrapped: / and /tmp read-only, only the workspace and the state dir writable ----
if command -v bwrap >/dev/null 2>&1 && bwrap --ro-bind / / true 2>/dev/null; then
	wrap() {
		bwrap --ro-bind / / --dev /dev --proc /proc --bind "$WSP" "$WSP" \
			--bind "$XDG_STATE_HOME" "$XDG_STATE_HOME" --chdir "$WSP" "$@"
	}
	wrap sh -c 'touch /tmp/probe' 2>/dev/null
	is "$?" 1 "bwrap: /tmp is read-only in the wrapper"
	echo before >wrapped.txt
	out=$(wrap env -u TMPDIR "$BROKERED" run -m wrapped -c 'sed -i s/before/after/ wrapped.txt; echo "$TMPDIR"; echo t > "$TMPDIR/x" && cat "$TMPDIR/x"' 2>"$TEST_DIR/wrap.err" </dev/null)
	st=$?
	is "$st" 0 "wrapped run: works with a read-only /tmp"
	[ "$st" = 0 ] || sed 's/^/#   /' "$TEST_DIR/wrap.err"
	is "$(cat wrapped.txt)" after "wrapped run: the change happened"
	is "$(printf '%s\n' "$out" | sed -n 2p)" t "wrapped run: the scratch dir (TMPDIR) is writable"
	case $(printf '%s\n' "$out" | head -1) in "$XDG_STATE_HOME/brokered-scratch/brokered-"*) ok 0 "wrapped run: the scratch dir is beside the state dir" ;;
	*) ok 1 "wrapped run: the scratch dir is beside the state dir"; printf '#   %s\n' "$out" ;; esac
	is "$(find "$XDG_STATE_HOME/brokered-scratch" -mindepth 1 | wc -l)" 0 "wrapped run: the scratch dir is removed at the end"
	brk undo </dev/null >/dev/null 2>&1
	is "$(cat wrapped.txt)" before "wrapped run: recorded and undone like any run"
else
	[ "${CI:-}" = true ] && ok 1 "bubblewrap works here (scripts/deps.sh test)"
	skip "wrapped run" "bubblewrap missing or no user namespaces"
fi

done_testing
