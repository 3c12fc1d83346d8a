#!/usr/bin/env bash
# A run's own turn is made on disk at its first record, under the id it drew when the run began,
# unless a turn of that id (the same second, the same 16 random bits) was made meanwhile: then it
# takes another. The run must go on with the id its turn has on disk: its --json report, its commit
# retry, the git check and the rollbacks name the turn by it (an id taken by another turn would
# roll that turn back). Here the run's id is taken while its command waits to make its change.
. "$(dirname "$0")/../lib.sh"
require_core
need python3

brk run -- touch first </dev/null
is "$?" 0 "a first run makes the session's store"
turns=$(store_roots)/turns
[ -d "$turns" ]
ok $? "the store has its turns/ directory"

# The command tells the id it was given (before its first change, nothing is on disk), waits
# while a directory of that id is made in turns/, then changes the workspace.
coproc RUN { brk run --json -- sh -c 'echo "$BROKERED_TURN_ID"; read -r go; echo x >second' \
	2>"$TEST_DIR/report.json"; }
read -r drawn <&"${RUN[0]}"
odd=$(printf '%s' "$drawn" | tr -d '0-9a-f-')
[ -n "$drawn" ] && [ -z "$odd" ] && mkdir -m 700 "$turns/$drawn"
ok $? "the run's id ($drawn) is taken by another turn before its first record"
echo go >&"${RUN[1]}"
wait "$RUN_PID"
is "$?" 0 "the run exits 0"
rmdir "$turns/$drawn"
id=$(last_turn_id)
[ -n "$id" ] && [ "$id" != "$drawn" ]
ok $? "its turn took another id on disk ($id)"
reported=$("$BRK_PY" -c 'import json, sys; print([json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]["turn"])' \
	"$TEST_DIR/report.json" 2>/dev/null)
is "$reported" "$id" "the --json report names the turn by its id on disk"
is "$(turn_state "$id")" committed "the turn is committed"
brk undo "$id" </dev/null >/dev/null 2>&1
is "$?" 0 "undo of the turn by that id"
[ ! -e second ] && [ -e first ]
ok $? "undo took back the run's change, and only it"

done_testing
