#!/usr/bin/env bash
# Approval of prompt rules (terminal and --json), rollback-and-rerun without double side effects,
# the toggles that run a command unsandboxed, degraded modes, and read-deny of secrets.
. "$(dirname "$0")/../lib.sh"
require_core

PROT="$OUTSIDE/prot"
mkdir -p "$PROT" "$WS/.brokered"
reset() {
	echo orig >"$PROT/x"
	rm -f "$WS/log"
}
cat >"$WS/.brokered/settings.json" <<JSON
{"sandbox": {"fileSafety": {"rules": [{"path": "$PROT", "access": "write", "decision": "prompt"}]}}}
JSON
CMD='echo a >> log; echo b > '"$PROT"'/x'

# ---- without a terminal: exit 120, the blocks in --json, then --rollback + --approve
reset
brk run --json -c "$CMD" </dev/null >/dev/null 2>"$TEST_DIR/err"
is "$?" 120 "json: exit status 120 when approval is needed"
report=$(grep '^{' "$TEST_DIR/err" | tail -1)
is "$(printf '%s' "$report" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["approvalNeeded"][0]["path"], r["approvalNeeded"][0]["access"])')" \
	"$PROT/x write" "json: approvalNeeded names the path and the access"
turn=$(printf '%s' "$report" | python3 -c 'import json,sys; print(json.load(sys.stdin)["turn"])')
is "$(cat "$PROT/x")" orig "json: the prompted file is untouched"
is "$(cat log)" a "json: the attempt ran (log has one a)"
grep -q "decision=prompt" "$XDG_STATE_HOME"/brokered/sessions/*/audit.log
ok $? "json: the refusal is in the audit log as decision=prompt"
grep -q -- "--rollback $turn" "$TEST_DIR/err"
ok $? "json: the hint names --rollback with the attempt's turn"
brk run --rollback "$turn" --approve "$PROT" -c "$CMD" </dev/null >/dev/null 2>&1
is "$?" 0 "approved rerun: exit 0"
is "$(cat log)" a "approved rerun: log has exactly one a (the attempt was rolled back)"
is "$(cat "$PROT/x")" b "approved rerun: the approved write happened"
brk undo >/dev/null 2>&1
is "$(cat "$PROT/x")" orig "the approved write was backed up: undo restores it"

# an explicit --approve for a path outside the prompt rule does not open a denied path
echo keep >"$OUTSIDE/denied"
brk run --approve "$OUTSIDE/denied" -c "echo no > $OUTSIDE/denied" </dev/null >/dev/null 2>&1
is "$(cat "$OUTSIDE/denied")" keep "--approve never lifts a deny (outside the workspace)"

# ---- on a terminal: the dialog, once / session / deny
if command -v tmux >/dev/null 2>&1; then
	sock="$TEST_DIR/tmux.sock"
	dialog() { # dialog KEY: run CMD in a pane, answer KEY, wait for the exit status
		rm -f "$TEST_DIR/status"
		tmux -S "$sock" new-session -d -x 160 -y 40 \
			"cd '$WS' && XDG_STATE_HOME='$XDG_STATE_HOME' XDG_CONFIG_HOME='$XDG_CONFIG_HOME' '$BROKERED' run -c '$CMD'; echo \$? > '$TEST_DIR/status'"
		for _ in $(seq 100); do
			tmux -S "$sock" capture-pane -p 2>/dev/null | grep -q "deny (default)" && break
			sleep 0.1
		done
		tmux -S "$sock" capture-pane -p >"$TEST_DIR/screen"
		tmux -S "$sock" send-keys "$1" Enter
		for _ in $(seq 100); do [ -s "$TEST_DIR/status" ] && break; sleep 0.1; done
		tmux -S "$sock" kill-server 2>/dev/null
		cat "$TEST_DIR/status" 2>/dev/null
	}
	reset
	st=$(dialog d)
	grep -q "$PROT/x" "$TEST_DIR/screen"
	ok $? "terminal: the dialog shows the refused path"
	is "$st" 120 "terminal: deny → exit 120"
	is "$(cat "$PROT/x")" orig "terminal: deny → file untouched"
	reset
	st=$(dialog o)
	is "$st" 0 "terminal: allow once → the rerun succeeds"
	is "$(cat log)" a "terminal: allow once → one a in log (rolled back, rerun)"
	is "$(cat "$PROT/x")" b "terminal: allow once → the write happened"
	reset
	brk run -c "$CMD" </dev/null >/dev/null 2>&1
	is "$?" 120 "terminal: a grant 'once' is not remembered"
	reset
	st=$(dialog s)
	is "$st" 0 "terminal: allow for the session → the rerun succeeds"
	reset
	brk run -c "$CMD" </dev/null >/dev/null 2>&1
	is "$?" 0 "session grant: remembered by the next run of the session"
	is "$(cat "$PROT/x")" b "session grant: the write happened without asking"
else
	skip "terminal approval dialog" "tmux not installed"
fi
rm -f "$WS/.brokered/settings.json"

# ---- toggles
echo '{"sandbox":{"enabled":false}}' >"$WS/.brokered/settings.json"
brk run -c "echo free > $OUTSIDE/unsandboxed" </dev/null >/dev/null 2>"$TEST_DIR/err"
is "$(cat "$OUTSIDE/unsandboxed" 2>/dev/null)" free "sandbox.enabled=false: the command runs unsandboxed"
grep -q "running unsandboxed" "$TEST_DIR/err"
ok $? "sandbox.enabled=false: a warning says so"
echo '{"sandbox":{"excludedCommands":["touch","git*"]}}' >"$WS/.brokered/settings.json"
brk run -- touch "$OUTSIDE/excluded" </dev/null 2>"$TEST_DIR/err"
test -e "$OUTSIDE/excluded"
ok $? "excludedCommands: touch runs unsandboxed"
brk run -c "FOO=1 touch $OUTSIDE/excluded2" </dev/null 2>/dev/null
test -e "$OUTSIDE/excluded2"
ok $? "excludedCommands: matched on the root word after VAR= prefixes"
brk run -c "echo x > $OUTSIDE/not-excluded" </dev/null 2>/dev/null
test ! -e "$OUTSIDE/not-excluded"
ok $? "excludedCommands: other commands stay sandboxed"
rm -f "$WS/.brokered/settings.json"
brk run --dangerously-disable-sandbox -c "echo x > $OUTSIDE/dangerous" </dev/null 2>"$TEST_DIR/err"
is "$?" 125 "--dangerously-disable-sandbox without a terminal: refused (125)"
test ! -e "$OUTSIDE/dangerous"
ok $? "--dangerously-disable-sandbox without a terminal: nothing ran"

# ---- degraded: a kernel without Landlock
BROKERED_PRETEND_MISSING=landlock brk run -- true </dev/null 2>"$TEST_DIR/err"
is "$?" 125 "no Landlock: refused with 125"
grep -q "Hint:" "$TEST_DIR/err"
ok $? "no Landlock: the refusal has a hint"
echo before >"$WS/deg"
BROKERED_PRETEND_MISSING=landlock brk run --degraded -c "echo after > deg; echo x > $OUTSIDE/deg; echo t > \$TMPDIR/t && cat \$TMPDIR/t" </dev/null >"$TEST_DIR/out" 2>/dev/null
is "$(cat "$WS/deg")" after "degraded: workspace writes are brokered"
test ! -e "$OUTSIDE/deg"
ok $? "degraded: writes outside are still refused by the broker"
is "$(cat "$TEST_DIR/out")" t "degraded: the scratch dir works (the broker performs it)"
brk undo >/dev/null 2>&1
is "$(cat "$WS/deg")" before "degraded: changes are backed up"
BROKERED_PRETEND_MISSING=seccomp brk run -- true </dev/null 2>/dev/null
is "$?" 125 "no seccomp user notification: refused, no degraded mode"

# ---- read-deny of secrets
export HOME="$TEST_DIR/home"
mkdir -p "$HOME/.ssh" "$HOME/.aws"
echo SECRET >"$HOME/.ssh/id_rsa"
echo AWS >"$HOME/.aws/credentials"
echo public >"$HOME/notes"
brk run -c "cat $HOME/.ssh/id_rsa" </dev/null >"$TEST_DIR/out" 2>"$TEST_DIR/err"
test ! -s "$TEST_DIR/out"
ok $? "read-deny: ~/.ssh/id_rsa is not readable"
grep -q "Permission denied" "$TEST_DIR/err"
ok $? "read-deny: with a permission error"
is "$(brk run -c "cat $HOME/notes" </dev/null 2>/dev/null)" public "read-deny: other files in ~ are readable"
brk run -c "python3 -c 'open(\"$HOME/.aws/credentials\").read()'" </dev/null >/dev/null 2>&1
ok $(($? == 0)) "read-deny: python cannot read ~/.aws/credentials either"
if [ -x /bin/busybox ]; then
	brk run -- /bin/busybox cat "$HOME/.ssh/id_rsa" </dev/null >"$TEST_DIR/out" 2>/dev/null
	test ! -s "$TEST_DIR/out"
	ok $? "read-deny: holds for a static binary"
fi
mkdir -p "$WS/.brokered"
echo "{\"sandbox\":{\"fileSafety\":{\"blocklist\":[\"$OUTSIDE/blocked\"]}}}" >"$WS/.brokered/settings.json"
mkdir -p "$OUTSIDE/blocked" && echo hidden >"$OUTSIDE/blocked/f"
brk run -c "cat $OUTSIDE/blocked/f" </dev/null >"$TEST_DIR/out" 2>/dev/null
test ! -s "$TEST_DIR/out"
ok $? "blocklist: not readable"
done_testing
