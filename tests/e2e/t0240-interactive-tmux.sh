#!/usr/bin/env bash
# Interactive use: a bash started by `brokered run` inside a tmux pane (a real terminal), typed at.
. "$(dirname "$0")/../lib.sh"
require_core
need tmux bash

sock="$TEST_DIR/tmux.sock"
sess="brokered-e2e-$$"
tm() { tmux -S "$sock" "$@"; }
kill_tmux() { tm kill-server >/dev/null 2>&1; }
trap 'kill_tmux; cleanup' EXIT

# wait_until CMD...: bounded wait (not a timing assertion)
wait_until() {
	local i
	for i in $(seq 300); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

tm new-session -d -s "$sess" -x 120 -y 30 -c "$WS" \
	"env XDG_STATE_HOME='$XDG_STATE_HOME' PS1='brk\$ ' '$BROKERED' run -- bash --norc --noprofile -i; echo \"exit=\$?\" > '$TEST_DIR/status'; sleep 30"
ok $? "tmux session started"
wait_until sh -c "tmux -S '$sock' capture-pane -p -t '$sess' | grep -q 'brk\\$'"
ok $? "the interactive bash shows its prompt"
tm send-keys -t "$sess" 'echo hi > f; tty > tty.txt; exit' Enter
wait_until test -e "$TEST_DIR/status"
ok $? "the shell exited after 'exit'"
is "$(cat f 2>&1)" hi "typed 'echo hi > f': f written"
case $(cat tty.txt 2>&1) in /dev/pts/*) ok 0 "the shell has the tmux terminal as its tty" ;;
*) ok 1 "the shell has the tmux terminal as its tty"; printf '#   got: %s\n' "$(cat tty.txt 2>&1)" ;; esac
is "$(cat "$TEST_DIR/status")" exit=0 "brokered returned the shell's status"
audit_names open "$(pwd -P)/f" allow
ok $? "audit line for f"

# Job control and a refused write at the terminal
rm -f "$TEST_DIR/status"
printf 'keep\n' >"$OUTSIDE/o"
tm new-window -t "$sess" -c "$WS" \
	"env XDG_STATE_HOME='$XDG_STATE_HOME' PS1='brk2\$ ' '$BROKERED' run -- bash --norc --noprofile -i; echo \"exit=\$?\" > '$TEST_DIR/status'; sleep 30"
wait_until sh -c "tmux -S '$sock' capture-pane -p -t '$sess' | grep -q 'brk2\\$'"
ok $? "second interactive shell shows its prompt"
tm send-keys -t "$sess" "echo evil > '$OUTSIDE/o'; echo st=\$? > st.txt; sleep 1000 & kill %1; wait; exit 4" Enter
wait_until test -e "$TEST_DIR/status"
ok $? "second shell exited"
is "$(cat "$OUTSIDE/o")" keep "a write outside typed at the terminal is refused, file unchanged"
is "$(cat st.txt 2>&1)" st=1 "the refused redirection fails in the shell (status 1)"
is "$(cat "$TEST_DIR/status")" exit=4 "exit 4 passed through"

done_testing
