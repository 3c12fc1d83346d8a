#!/usr/bin/env bash
# Git guard on a terminal (tmux): a command that sets an exec-capable git key shows the exact file,
# key and value once; [o] rolls the attempt back and reruns it with the grant (the key is kept, the
# command's other side effect happens once), [d] denies (exit 120, the key is gone).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
require_core
need tmux
. "$HERE/lib-git.sh"

sess="brokered-git-$$"
sock="$TEST_DIR/tmux-o.sock"
tm() { tmux -S "$sock" "$@"; }
trap 'for sock in "$TEST_DIR"/tmux-*.sock; do tm kill-server >/dev/null 2>&1; done; cleanup' EXIT

# wait_until CMD...: bounded wait (not a timing assertion)
wait_until() {
	local i
	for i in $(seq 600); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}
pane_has() { tm capture-pane -p -J -t "$sess" -S -50 | grep -qF -- "$1"; }

# ask ANSWER: run the plant in a tmux pane, wait for the question, answer it
ask() {
	fresh_repo
	rm -f "$TEST_DIR/status"
	sock="$TEST_DIR/tmux-$1.sock" # a server per question
	local cmd="$PAY; echo a >> log; git config core.fsmonitor \"\$PWD/pay.sh\""
	tm new-session -d -s "$sess" -x 200 -y 40 -c "$WS/repo" \
		"env XDG_STATE_HOME='$XDG_STATE_HOME' XDG_CONFIG_HOME='$XDG_CONFIG_HOME' '$BROKERED' run -c '$cmd'; echo \"exit=\$?\" > '$TEST_DIR/status'; sleep 30"
	wait_until pane_has "[d] deny"
	ok $? "[$1] the question is shown on the terminal"
	pane_has "$WS/repo/.git/config"
	ok $? "[$1] it names the exact file"
	pane_has "core.fsmonitor=$WS/repo/pay.sh"
	ok $? "[$1] it names the key and the value"
	tm send-keys -t "$sess" "$1" Enter
	wait_until test -s "$TEST_DIR/status"
	ok $? "[$1] brokered ended"
}

ask o
is "$(cat "$TEST_DIR/status")" exit=0 "[o] exit 0 after the approved rerun"
is "$(git config core.fsmonitor)" "$WS/repo/pay.sh" "[o] the approved key is kept"
is "$(cat log)" a "[o] the attempt was rolled back before the rerun: one a in log"

ask d
is "$(cat "$TEST_DIR/status")" exit=120 "[d] exit 120"
is "$(git config core.fsmonitor)" "" "[d] the key is not in .git/config"
git status >/dev/null 2>&1
[ ! -e "$MARK" ]
ok $? "[d] the user's git status runs no payload"

done_testing
