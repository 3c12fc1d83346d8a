#!/usr/bin/env bash
# Escape suite, processes: signals, ptrace, /proc/PID/mem, process_vm_writev and pidfd_getfd against
# the supervisor (brokered itself) and an outside process; processes that try to outlive the run;
# and brokered killed with SIGKILL mid-run: what is left of the sandbox must fail closed.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/../lib.sh"
require_core
need pgrep
. "$HERE/lib-escape.sh"
make_fixtures
K=$ESC_DIR/escape-kernel
[ -x "$K" ] || skip_all "escape-kernel helper not built"
X="$OUTSIDE/x"

# The supervisor is the command's parent: sh -c 'exec helper ... $PPID' makes it the helper's too.
for sig in 9 15 19 0; do
	attempt "kill(supervisor, $sig)" 'EPERM' - - -- sh -c "exec $K kill \$PPID $sig"
	attempt "tgkill(supervisor, $sig)" 'EPERM' - - -- sh -c "exec $K tgkill \$PPID $sig"
	attempt "pidfd_send_signal(supervisor, $sig)" 'EPERM|pidfd_open:.*' - - -- sh -c "exec $K pidfd-kill \$PPID $sig"
done
attempt "kill(an outside process, 0)" 'EPERM' - - -- "$K" kill $$ 0
attempt "kill(an outside process, SIGCONT)" 'EPERM' - - -- "$K" kill $$ 18
attempt "ptrace(PTRACE_ATTACH, supervisor)" 'EPERM|EACCES' - - -- sh -c "exec $K ptrace \$PPID"
attempt "ptrace(PTRACE_SEIZE, supervisor)" 'EPERM|EACCES' - - -- sh -c "exec $K ptrace-seize \$PPID"
attempt "ptrace(PTRACE_ATTACH, outside process)" 'EPERM|EACCES' - - -- "$K" ptrace $$
attempt "write /proc/<supervisor>/mem" 'EACCES|EPERM' - - -- sh -c "exec $K procmem \$PPID"
attempt "write /proc/<outside process>/mem" 'EACCES|EPERM' - - -- "$K" procmem $$
attempt "process_vm_writev(supervisor)" 'EPERM|EACCES' - - -- sh -c "exec $K vmwrite \$PPID"
for fd in 3 4 5 6 7; do
	attempt "pidfd_getfd(supervisor, $fd)" 'EPERM|EACCES|EBADF|pidfd_open:.*' - - -- sh -c "exec $K pidfd-getfd \$PPID $fd"
done
attempt "gdb-like: write /proc/<supervisor>/mem via the broker (open O_RDWR)" 'EACCES|EPERM' - - -- \
	sh -c "exec $ESC open /proc/\$PPID/mem rw"
attempt "write /proc/<supervisor>/attr/current, oom_score_adj" 'EACCES|EPERM|EINVAL|ENOENT' - - -- \
	sh -c "$ESC open /proc/\$PPID/oom_score_adj w 1000 ; exec $ESC open /proc/\$PPID/attr/current w unconfined"

# ---- nothing outlives the run ----
gone() { # gone MARKER: wait (bounded) until no process carries MARKER
	local i
	for i in $(seq 100); do
		no_process_with "$1" && return 0
		sleep 0.1
	done
	return 1
}
reap() { # reap MARKER: end what the test started and the run left behind (by pid)
	local p
	for p in $(pgrep -f -- "$1" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
}
m1="escape-dfork-$$-$RANDOM"
timeout 50 "$BROKERED" run -- perl -e 'my $m = shift; fork and exit; require POSIX; POSIX::setsid(); fork and exit;
	open STDIN, "<", "/dev/null"; open STDOUT, ">", "/dev/null"; open STDERR, ">", "/dev/null";
	exec { "sleep" } "sleep", "1000", $m' "$m1" >/dev/null 2>&1
is "$?" 0 "double fork + setsid: the run returns"
gone "$m1"
ok $? "double fork + setsid: the sleeper is gone after brokered exits"
reap "$m1"
m2="escape-nohup-$$-$RANDOM"
timeout 50 "$BROKERED" run -c "nohup setsid sh -c 'trap \"\" HUP TERM; sleep 1000; : $m2' >/dev/null 2>&1 </dev/null &" >/dev/null 2>&1
gone "$m2"
ok $? "nohup + setsid + trapped HUP/TERM: gone after brokered exits"
reap "$m2"

# ---- brokered killed with SIGKILL mid-run: the rest fails closed ----
echo victim >"$WS/victim"
rm -f "$WS/go" "$WS/ready" "$WS/after"
m3="escape-writer-$$-$RANDOM"
before=$(protected_snapshot)
victim_before=$(fingerprint "$WS/victim")
ws_before=$(tree_snapshot "$WS")
# The writer is a setsid grandchild; its stdout is a file the test opened outside the sandbox.
"$BROKERED" run -- sh -c "setsid '$K' writer-loop '$WS/go' after '$X' '$m3' </dev/null & echo writer=\$!; echo ready > ready; wait" \
	>"$TEST_DIR/writer.out" 2>&1 </dev/null &
bpid=$!
for i in $(seq 300); do [ -e "$WS/ready" ] && break; sleep 0.1; done
[ -e "$WS/ready" ]
ok $? "kill -9 brokered: the command started"
ws_before=$(tree_snapshot "$WS")
kill -9 "$bpid"
wait "$bpid" 2>/dev/null
touch "$WS/go"
for i in $(seq 300); do grep -q 'writer done' "$TEST_DIR/writer.out" 2>/dev/null && break; sleep 0.1; done
grep -q 'writer done' "$TEST_DIR/writer.out"
ok $? "kill -9 brokered: the orphaned writer ran its attempts"
is "$(grep -o 'changes=[0-9]*' "$TEST_DIR/writer.out")" "changes=0" "kill -9 brokered: no attempt of the orphaned writer succeeded"
grep -E ' ok$|first errno' "$TEST_DIR/writer.out" | sed 's/^/#   writer: /'
[ ! -e "$WS/after" ] && [ ! -e "$WS/after-dir" ]
ok $? "kill -9 brokered: nothing created in the workspace afterwards"
is "$(fingerprint "$WS/victim")" "$victim_before" "kill -9 brokered: a workspace file was neither changed nor removed"
is "$(tree_snapshot "$WS" | grep -v -e '^\./go ' -e '^\./ready ')" "$(printf '%s\n' "$ws_before" | grep -v -e '^\./go ' -e '^\./ready ')" \
	"kill -9 brokered: the workspace is as it was"
after=$(protected_snapshot)
if [ "$after" = "$before" ]; then ok 0 "kill -9 brokered: protected files unchanged"; else
	ok 1 "kill -9 brokered: protected files unchanged"
	snap_changes "$before" "$after"
fi
wpid=$(sed -n 's/^writer=//p' "$TEST_DIR/writer.out")
[ -n "$wpid" ] && kill -9 "$wpid" 2>/dev/null
reap "$m3"

broker_alive "a new run works after the killed one"
done_testing
