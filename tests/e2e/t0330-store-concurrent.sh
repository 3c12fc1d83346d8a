#!/usr/bin/env bash
# Issue 3: concurrent runs of one session. Two `brokered run --session S` at once each get a turn
# of their own, the store stays readable, and undoing both puts the tree back; two runs at once
# inside one `turn begin` … `turn commit` are undone together by one undo.
BROKERED_TEST_DURABLE=1
. "$(dirname "$0")/../lib.sh"
require_core
need python3

WSP=$(pwd -P)
S=conc-$$
mk() { # mk DIR N: N files with TODO lines and old mtimes
	mkdir -p "$1"
	for i in $(seq "$2"); do printf 'TODO %s\nkeep\n' "$i" >"$1/f$i.txt"; done
	touch -d @1500000000 "$1"/*.txt
}
mk a 150
mk b 150
mk shared 60
snap0=$(tree_snapshot_full "$WSP")

job() { # job DIR: many small changes in DIR
	"$BROKERED" run --session "$S" -c "cd $1 && sed -i s/TODO/DONE/ *.txt && rm -f f1*.txt && mkdir -p sub &&
		for i in \$(seq 40); do echo x >> f5\$i.txt; mv f2\$i.txt sub/ 2>/dev/null; done; true" </dev/null
}
job a &
p1=$!
job b &
p2=$!
wait "$p1"
r1=$?
wait "$p2"
r2=$?
is "$r1:$r2" 0:0 "two concurrent runs of one session both exit 0"
n=$(brk log --json --session "$S" | "$BRK_PY" -c 'import json,sys; print(sum(1 for t in json.load(sys.stdin) if t["state"]=="committed"))')
is "$n" 2 "log: two committed turns, one per run"
for T in $(brk log --json --session "$S" | "$BRK_PY" -c 'import json,sys; print(" ".join(t["id"] for t in json.load(sys.stdin)))'); do
	brk show --json --session "$S" "$T" | json_valid || { echo "#   show --json $T does not parse"; false; } || break
done
ok $? "show --json parses for both turns"
brk undo --session "$S" </dev/null >/dev/null
is "$?" 0 "undo of the newer turn"
T=$(brk log --json --session "$S" | "$BRK_PY" -c '
import json,sys
print([t["id"] for t in json.load(sys.stdin) if not t["message"].startswith(("undo","restore"))][1])')
brk undo --session "$S" "$T" </dev/null >/dev/null
is "$?" 0 "undo of the older turn"
is_snap "$(tree_snapshot_full "$WSP")" "$snap0" "both concurrent turns undone: the tree is as before"

# ---- one explicit turn, concurrent runs joining it, overlapping paths ----
brk turn begin --session "$S" -m shared >/dev/null 2>&1
is "$?" 0 "turn begin"
for k in 1 2 3; do
	"$BROKERED" run --session "$S" -c 'cd shared && for i in $(seq 60); do echo "w'$k'" >> f$i.txt; done; sed -i s/keep/K'$k'/ f*.txt; rm -f f'$k'*.txt' </dev/null 2>/dev/null &
done
wait
n_open=$(brk log --json --session "$S" | "$BRK_PY" -c 'import json,sys; print(sum(1 for t in json.load(sys.stdin) if t["state"]!="committed"))')
is "$n_open" 1 "the concurrent runs joined the open turn (no turn of their own)"
brk turn commit --session "$S" -m "shared done" >/dev/null
is "$?" 0 "turn commit"
brk undo --session "$S" </dev/null >/dev/null
is "$?" 0 "one undo of the shared turn"
is_snap "$(tree_snapshot_full "$WSP")" "$snap0" "after the undo of the shared turn the tree is as before"

done_testing
