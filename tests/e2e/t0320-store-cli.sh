#!/usr/bin/env bash
# Issue 3: turns and the store commands users rely on — turn begin / many runs / turn commit then
# one undo, undo of an undo, restore of one path, restore and undo over a path changed after the turn
# (refused without --force when not on a terminal, done with it), diff, --json of log and show,
# the documented option order, gc.
BROKERED_TEST_DURABLE=1
. "$(dirname "$0")/../lib.sh"
require_core
need python3 perl

WSP=$(pwd -P)
make_fixture_tree "$WSP" 42
snap0=$(tree_snapshot_full "$WSP")

# ---- one explicit turn spanning many runs, by several tools, then one undo ----
out=$(brk turn begin -m "agent turn" 2>&1)
is "$?" 0 "turn begin exits 0"
tid=$(last_turn_id)
st=$(turn_state "$tid")
is "$st" open "log --json: the begun turn is open"
brk turn begin -m again >/dev/null 2>&1
is "$?" 1 "a second turn begin while one is open fails (status 1)"
brk run -c 'rm -rf src/lib; echo new > src/new.txt' </dev/null
is "$?" 0 "run 1 in the turn"
brk run -- sed -i 's/TODO/DONE/' f1.txt f2.txt f3.txt data/f1.txt
is "$?" 0 "run 2 in the turn (sed -i)"
brk run -- "$BRK_PY" -c 'import os; import shutil; shutil.move("docs", "docs2"); os.chmod("data/f2.txt", 0o600); os.symlink("f1.txt", "s")'
is "$?" 0 "run 3 in the turn (python)"
brk run -- perl -e 'truncate("data/blob.bin", 10) or die; mkdir("pdir") or die; utime(5, 5, "f3.txt")'
is "$?" 0 "run 4 in the turn (perl)"
n=$(brk log --json | "$BRK_PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')
is "$n" 1 "log: the four runs joined the one turn (no turn of their own)"
is "$(turn_state "$tid")" open "the turn is still open before turn commit"
brk turn commit -m "agent turn done" >/dev/null
is "$?" 0 "turn commit exits 0"
is "$(turn_state "$tid")" committed "the turn is committed"
msg=$(brk log --json | "$BRK_PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["message"])')
is "$msg" "agent turn done" "log: the commit message is the turn's message"
snap1=$(tree_snapshot_full "$WSP")
brk undo </dev/null >/dev/null
is "$?" 0 "undo (default: the last turn) exits 0"
is_snap "$(tree_snapshot_full "$WSP")" "$snap0" "undo of the four-run turn: the tree is as before it"

# ---- undo of an undo ----
brk undo </dev/null >/dev/null 2>&1
is "$?" 0 "undo of the undo exits 0"
is_snap "$(tree_snapshot_full "$WSP")" "$snap1" "undo of the undo: the turn's result is back"
brk undo </dev/null >/dev/null 2>&1
is "$?" 0 "undo of the undo of the undo exits 0"
is_snap "$(tree_snapshot_full "$WSP")" "$snap0" "and the tree is as before the turn again"

# ---- restore of one path ----
echo a1 >ra
echo b1 >rb
mkdir -p rdir && echo d1 >rdir/x
brk run -c 'echo a2 > ra; echo b2 > rb; rm -rf rdir' </dev/null
T=$(last_turn_id)
brk restore "$T" ra </dev/null >/dev/null
is "$?" 0 "restore TURN PATH (relative) exits 0"
is "$(cat ra)" a1 "restore: the path is as before the turn"
is "$(cat rb)" b2 "restore: other paths of the turn are left as they are"
brk restore "$T" "$WSP/rdir" </dev/null >/dev/null
is "$?" 0 "restore TURN DIR (absolute) exits 0"
is "$(cat rdir/x 2>&1)" d1 "restore of a deleted directory brings its contents back"

# ---- restore / undo over a path changed after the turn ----
echo c1 >rc
touch -d @1500000000 rc
want=$(fingerprint rc)
brk run -c 'echo c2 > rc' </dev/null
T=$(last_turn_id)
echo c3-later >rc
err=$(brk restore "$T" rc 2>&1 </dev/null)
is "$?" 1 "restore over a path changed after the turn, no terminal, no --force: refused (1)"
is "$(cat rc)" c3-later "refused restore: the later change is untouched"
case $err in *rc*) ok 0 "refused restore names the path" ;; *) ok 1 "refused restore names the path"; echo "#   $err" ;; esac
err=$(brk undo "$T" 2>&1 </dev/null)
is "$?" 1 "undo over a path changed after the turn without --force: refused (1)"
is "$(cat rc)" c3-later "refused undo: the later change is untouched"
brk restore --force "$T" rc </dev/null >/dev/null
is "$?" 0 "restore --force TURN PATH exits 0"
is "$(fingerprint rc)" "$want" "restore --force: the path is as before the turn"
is "$(stat -c %Y rc)" 1500000000 "restore --force: mtime as before the turn"
echo c4-later >rc
brk undo --force "$T" </dev/null >/dev/null
is "$?" 0 "undo --force TURN exits 0"
is "$(fingerprint rc)" "$want" "undo --force: the path is as before the turn"

# ---- the documented option order: options after the operands (README: show TURN [--json],
# restore TURN PATH... [--force], undo [TURN] [--force]) ----
echo e1 >re
brk run -c 'echo e2 > re' </dev/null
T=$(last_turn_id)
echo e3-later >re
brk show "$T" --json 2>/dev/null | json_valid
ok $? "show TURN --json (as documented) prints JSON"
brk restore "$T" re --force </dev/null >/dev/null 2>&1
is "$?" 0 "restore TURN PATH --force (as documented) exits 0"
is "$(cat re)" e1 "restore TURN PATH --force (as documented) restores"
echo e4-later >re
brk undo "$T" --force </dev/null >/dev/null 2>&1
is "$?" 0 "undo TURN --force (as documented) exits 0"
is "$(cat re)" e1 "undo TURN --force (as documented) restores"

# ---- diff ----
printf 'one\ntwo\n' >df
brk run -c 'printf "one\nTHREE\n" > df' </dev/null
T=$(last_turn_id)
d=$(brk diff "$T" df 2>&1)
case $d in *"-two"*"+THREE"*) ok 0 "diff TURN PATH: unified diff of the pre-image against now" ;;
*) ok 1 "diff TURN PATH: unified diff of the pre-image against now"; printf '#   %s\n' "$d" ;; esac

# ---- --json ----
brk log --json | json_valid
ok $? "log --json parses"
brk log --json | "$BRK_PY" -c '
import json,sys
t=json.load(sys.stdin)
assert isinstance(t,list) and t
for x in t: assert x["id"] and x["state"] in ("committed","open","interrupted"), x'
ok $? "log --json: a list of turns with id and state"
for T in $(brk log --json | "$BRK_PY" -c 'import json,sys; print(" ".join(x["id"] for x in json.load(sys.stdin)))'); do
	brk show --json "$T" | json_valid || { echo "#   show --json $T does not parse"; false; } || break
done
ok $? "show --json parses for every turn"
brk run -c 'echo "x\"y\\z" > "q\"uote $(printf "\\t")tab"; rm -f ra' </dev/null
brk show --json last | "$BRK_PY" -c '
import json,sys
d=json.load(sys.stdin)
ps=[p["path"] for p in d["paths"]]
assert any(p.endswith("/q\"uote \ttab") for p in ps), ps
assert any(p.endswith("/ra") for p in ps), ps'
ok $? "show --json: paths with quotes and tabs survive, every touched path listed"

# ---- gc ----
brk turn begin -m "stays open" >/dev/null 2>&1
open_id=$(last_turn_id)
n_before=$(brk log --json | "$BRK_PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')
brk gc >/dev/null 2>&1
is "$?" 0 "gc (default age) exits 0"
n=$(brk log --json | "$BRK_PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')
is "$n" "$n_before" "gc with the default age keeps recent turns"
objs_before=$(find "$(store_roots | head -1)/objects" -type f | wc -l)
[ "$objs_before" -gt 0 ]
ok $? "the store holds content objects before gc ($objs_before)"
sleep 2
brk gc --older-than 1s >/dev/null 2>&1
is "$?" 0 "gc --older-than 1s exits 0"
left=$(brk log --json | "$BRK_PY" -c 'import json,sys; print(" ".join(x["id"]+":"+x["state"] for x in json.load(sys.stdin)))')
is "$left" "$open_id:open" "gc --older-than 1s drops every committed turn, keeps the open one"
objs=$(find "$(store_roots | head -1)/objects" -type f | wc -l)
is "$objs" 0 "gc: unreferenced content objects are removed"
brk turn commit -m closed >/dev/null 2>&1
is "$?" 0 "the open turn survived gc and can be committed"

done_testing
