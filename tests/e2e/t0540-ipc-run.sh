#!/usr/bin/env bash
# `brokered run` serves the socket for its own command: the sandboxed command finds it through
# BROKERED_IPC_ADDRESS / BROKERED_SESSION_ID / BROKERED_TOOL_CALL_ID, and what it asks for goes
# through the same broker, policy, backups and audit log as its intercepted syscalls (one
# implementation, two doors). Skipped while run.c does not serve the socket.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
. "$here/lib/ipc.sh"
require_core
need python3

addr=$(brk run -- sh -c 'printf %s "${BROKERED_IPC_ADDRESS:-}"' 2>/dev/null)
[ -n "$addr" ] || skip_all "brokered run does not serve the broker socket (BROKERED_IPC_ADDRESS unset)"

printf 'old\n' >"$WS/f"
printf 'gone\n' >"$WS/g"
printf 'outside\n' >"$OUTSIDE/o"
before=$(tree_snapshot "$WS")
out=$(brk run -m "ipc from inside" -- sh -c '
	set -e
	test -S "$BROKERED_IPC_ADDRESS"
	test -n "$BROKERED_SESSION_ID" && test -n "$BROKERED_TOOL_CALL_ID"
	"$0" client write --flags wronly,trunc --data "via the token
" f >"$TMPDIR/w.out"
	"$0" client delete --unlink g >"$TMPDIR/d.out"
	if "$0" client write "'"$OUTSIDE"'/o" >"$TMPDIR/o.out" 2>&1; then exit 3; fi
	"$0" client write "$TMPDIR/scratch-file" >"$TMPDIR/s.out"
	"$0" client json "{\"operation\":\"mkdir\",\"path\":\"$PWD/made\",\"sessionId\":\"$BROKERED_SESSION_ID\"}" >"$TMPDIR/m.out"
	printf "W:%s\n" "$(cat "$TMPDIR/w.out")"
	printf "S:%s\n" "$(cat "$TMPDIR/s.out")"
	' "$BROKERED")
ok $? "the sandboxed command used the socket (token, delete, a refusal, scratch, JSON)"
is "$(cat "$WS/f")" "via the token" "the write token's fd wrote the workspace file (Landlock would refuse a direct open)"
is "$(grep '^W:' <<<"$out" | cut -d' ' -f1,2)" "W:FD w" "  the answer was FD with a writable fd"
check "the JSON delete removed g" -- test ! -e "$WS/g"
is "$(cat "$OUTSIDE/o")" "outside" "a write token outside the workspace was refused"
is "$(grep '^S:' <<<"$out")" "S:SANDBOX" "a token for the scratch dir is SANDBOX (Landlock allows it)"
check "mkdir through JSON" -- test -d "$WS/made"
check "audit: the token was logged as ipc-token with its backup" -- sh -c "audit_log() { cat \"$XDG_STATE_HOME\"/brokered/sessions/*/audit.log; }; audit_log | grep -q 'phase=ipc-token .*path=$WS/f .*backup=saved'"
brk undo --force last >/dev/null 2>&1
ok $? "undo the run's turn"
is "$(tree_snapshot "$WS")" "$before" "  everything the socket requests did is undone (they were backed up in the run's turn)"
check "the run's socket is gone after the run" -- test ! -e "$addr"
done_testing
