#!/usr/bin/env bash
# Signals and process lifetime: SIGTERM/SIGINT/SIGHUP sent to brokered reach the command, and
# processes the command leaves behind (background, setsid, nohup) do not outlive the run.
. "$(dirname "$0")/../lib.sh"
require_core
need pgrep

# wait_for FILE: wait (bounded, generously) until FILE exists. Not a timing assertion.
wait_for() {
	local i
	for i in $(seq 600); do
		[ -e "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
# gone MARKER: wait (bounded) until no process carries MARKER
gone() {
	local i
	for i in $(seq 100); do
		no_process_with "$1" && return 0
		sleep 0.1
	done
	return 1
}

# ---- signal forwarding ----
for sig in TERM INT HUP; do
	rm -f ready got
	# brokered runs in the background of this script: $! is brokered itself, not the command.
	"$BROKERED" run -- sh -c "trap 'echo got-$sig > got; exit 7' $sig; echo > ready; while :; do sleep 0.1; done" </dev/null &
	pid=$!
	wait_for ready
	ok $? "SIG$sig: command started"
	kill -"$sig" "$pid"
	wait "$pid"
	is "$?" 7 "SIG$sig to brokered: the command's trap ran and its exit status is returned"
	is "$(cat got 2>/dev/null)" "got-$sig" "SIG$sig to brokered: the command received SIG$sig"
done

rm -f ready
"$BROKERED" run -- sh -c 'echo > ready; while :; do sleep 0.1; done' </dev/null &
pid=$!
wait_for ready
kill -TERM "$pid"
wait "$pid"
is "$?" 143 "SIGTERM to brokered, command without a trap: 128+15"

# ---- nothing survives the command ----
m1="brokered-e2e-bg-$$-$RANDOM"
timeout 120 "$BROKERED" run -c "sh -c 'sleep 1000; :' $m1 & echo started" >out 2>&1
is "$?" 0 "background job: run returns the command's status (not held open by the job)"
is "$(cat out)" started "background job: the command ran"
gone "$m1"
ok $? "background job (sleep 1000 &) does not survive the run"
pkill -f -- "$m1" 2>/dev/null

m2="brokered-e2e-setsid-$$-$RANDOM"
timeout 120 "$BROKERED" run -c "setsid sh -c 'sleep 1000; :' $m2 >/dev/null 2>&1 </dev/null & echo started" >out 2>&1
is "$?" 0 "setsid job: run returns"
gone "$m2"
ok $? "process in a new session (setsid) does not survive the run"
pkill -f -- "$m2" 2>/dev/null

m3="brokered-e2e-nohup-$$-$RANDOM"
timeout 120 "$BROKERED" run -c "nohup sh -c 'trap \"\" TERM HUP; sleep 1000; :' $m3 >/dev/null 2>&1 </dev/null &" >out 2>&1
is "$?" 0 "nohup job ignoring TERM and HUP: run returns"
gone "$m3"
ok $? "process ignoring SIGTERM/SIGHUP does not survive the run"
pkill -f -- "$m3" 2>/dev/null

# A double fork whose grandchild keeps stdout open must not keep `$(brokered run ...)` waiting.
m4="brokered-e2e-dbl-$$-$RANDOM"
out=$(timeout 120 "$BROKERED" run -c "(sh -c 'sleep 1000; :' $m4 &) ; echo parent-done")
is "$?" 0 "double fork holding stdout: run returns"
is "$out" parent-done "double fork holding stdout: output of the command"
gone "$m4"
ok $? "double-forked grandchild does not survive the run"
pkill -f -- "$m4" 2>/dev/null

# A left-behind process must not write after the run: the file it would create stays absent.
timeout 120 "$BROKERED" run -c "(sleep 3; echo late > late.txt) >/dev/null 2>&1 & exit 0"
is "$?" 0 "delayed writer: run returns 0"
sleep 5
test ! -e late.txt
ok $? "delayed writer left behind: killed before it could write late.txt"

done_testing
