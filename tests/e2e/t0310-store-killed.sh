#!/usr/bin/env bash
# Issue 3: the broker is killed (SIGKILL) while a destructive workload runs. Nothing is lost: `log`
# shows the turn as open/interrupted, `undo ID` puts the tree back as it was before the run, and
# `turn commit --turn ID` commits the interrupted turn (which can then be undone as well).
BROKERED_TEST_DURABLE=1
# Seeds are printed and replay exactly: BROKERED_STORE_SEED_BASE=<seed - 1>, one seed (or round).
# A round's kind (commit before undo or not, the delay before the kill) follows from its seed, so a
# round replayed alone is the round that failed.
. "$(dirname "$0")/../lib.sh"
require_core
need python3 perl

ROUNDS=${BROKERED_STORE_KILL_ROUNDS:-4}
no_nlink() { printf '%s\n' "$1" | sed 's/ nlink=[0-9]*$//'; }
base=${BROKERED_STORE_SEED_BASE:-$((RANDOM * 100))}

# wait_gone MARKER: the killed broker's left-over processes (grandchildren) are gone
wait_gone() {
	local i
	for i in $(seq 100); do no_process_with "$1" && return 0; sleep 0.1; done
	return 1
}

# explain_undo ID DIR WANT GOT: on failure, each path that undo did not put back with the record the
# turn has of it (or none), and the temp files left in the store's tmp/ (a copy whose record was
# never written leaves one: it was waiting for a flush when the broker was killed)
explain_undo() {
	[ "$3" = "$4" ] && return 0
	(cd "$2" && "$BROKERED" show --json "$1") >"$TEST_DIR/show.json" 2>/dev/null
	"$BRK_PY" - "$2" "$3" "$4" "$TEST_DIR/show.json" <<'PYEOF'
import json, re, sys
top, want, got = sys.argv[1], sys.argv[2].split("\n"), sys.argv[3].split("\n")
try:
    recs = {p["path"]: p for p in json.load(open(sys.argv[4]))["paths"]}
except (OSError, ValueError, KeyError):
    recs = {}
rels = set()
for line in set(want) ^ set(got):
    m = re.match(r"(.*?) (?:[FDLS] |ERROR)", line)
    if m:
        rels.add(m.group(1))
for rel in sorted(rels):
    r = recs.get(top + rel[1:])
    what = "no record in the turn" if r is None else "%s, pre-image %s" % (r.get("operation"), r.get("preimage"))
    print("#   %s: %s" % (rel, what))
PYEOF
	local t
	for t in "$XDG_STATE_HOME"/brokered/sessions/*/modify_backup/turns/"$1"; do
		find "$t/../../tmp" -type f -printf '#   left in tmp/: %P (%s bytes)\n' 2>/dev/null
	done
}

# A directory recorded earlier in the turn (chmod), then renamed: the rename copies the files below
# it. The broker is killed right after, with no later change to flush their records: they must be
# written before the rename (seed 310104 lost them: undo left the files deleted).
w="$TEST_DIR/tree"
mkdir -p "$w/d/sub"
echo a >"$w/d/a"
echo b >"$w/d/sub/b"
touch -d @1400000000 "$w/d/a" "$w/d/sub/b"
before=$(tree_snapshot_full "$w")
marker="brokered-kill-tree-$$"
printf '%s\n' 'chmod 700 d' 'mv d e' ': >renamed' "exec -a $marker sleep 30" >"$TEST_DIR/$marker.sh"
(cd "$w" && exec "$BROKERED" run -m tree -- bash "$TEST_DIR/$marker.sh") &
pid=$!
for _ in $(seq 200); do [ -e "$w/renamed" ] && break; sleep 0.05; done
[ -e "$w/e/sub/b" ]
ok $? "tree: the workload renamed the directory"
kill -9 "$pid"
wait "$pid" 2>/dev/null
wait_gone "$marker"
ok $? "tree: no process of the workload is left"
id=$(cd "$w" && last_turn_id)
(cd "$w" && "$BROKERED" turn commit --turn "$id" -m "committed after kill" >/dev/null)
is "$?" 0 "tree: turn commit --turn ID exits 0"
(cd "$w" && "$BROKERED" undo "$id" >/dev/null)
is "$?" 0 "tree: undo ID exits 0"
after=$(tree_snapshot_full "$w")
is_snap "$after" "$before" "tree: after undo: the directory and its files are back"
explain_undo "$id" "$w" "$(no_nlink "$before")" "$(no_nlink "$after")"

for round in $(seq "$ROUNDS"); do
	seed=$((base + round))
	k=$(((seed - 1) % 4 + 1))
	w="$TEST_DIR/w$seed"
	mkdir -p "$w"
	w=$(cd "$w" && pwd -P)
	make_fixture_tree "$w" "$seed"
	before=$(tree_snapshot_full "$w")
	marker="brokered-kill-workload-$seed-$$"
	gen_workload "$w" "$seed" 100 0.02 >"$TEST_DIR/$marker.sh"
	(cd "$w" && exec "$BROKERED" run -m "seed $seed" -- bash "$TEST_DIR/$marker.sh") &
	pid=$!
	# A run's turn exists once it recorded its first change: wait for that, then a bit more,
	# so the kill lands in the middle of the workload whatever the machine's load.
	for _ in $(seq 200); do
		[ -n "$(cd "$w" && last_turn_id 2>/dev/null)" ] && break
		sleep 0.05
	done
	sleep "0.$((1 + k * 2))"
	kill -0 "$pid" 2>/dev/null
	ok $? "seed $seed: workload still running when the broker is killed"
	kill -9 "$pid"
	wait "$pid" 2>/dev/null
	wait_gone "$marker"
	ok $? "seed $seed: no process of the workload is left"
	mid=$(tree_snapshot_full "$w")
	[ "$mid" != "$before" ]
	ok $? "seed $seed: the workload had changed the tree"

	id=$(cd "$w" && last_turn_id)
	[ -n "$id" ]
	ok $? "seed $seed: log lists the killed run's turn"
	st=$(cd "$w" && turn_state "$id")
	case $st in open | interrupted) ok 0 "seed $seed: log shows the turn as open/interrupted ($st)" ;;
	*) ok 1 "seed $seed: log shows the turn as open/interrupted"; echo "#   got: '$st'" ;; esac
	line=$(cd "$w" && "$BROKERED" log | grep -F "$id")
	case $line in *interrupted* | *open*) ok 0 "seed $seed: plain log says open/interrupted" ;;
	*) ok 1 "seed $seed: plain log says open/interrupted"; echo "#   got: $line" ;; esac
	(cd "$w" && "$BROKERED" show --json "$id" | json_valid)
	ok $? "seed $seed: show --json of the interrupted turn parses"

	if [ $((k % 2)) = 0 ]; then
		err=$(cd "$w" && "$BROKERED" turn commit --turn "$id" -m "committed after kill" 2>&1)
		is "$?" 0 "seed $seed: turn commit --turn ID of the interrupted turn exits 0"
		[ -z "$err" ] || printf '#   %s\n' "$err"
		is "$(cd "$w" && turn_state "$id")" committed "seed $seed: the turn is committed now"
		# link counts aside: a file kept by a link just before the kill shares its inode with
		# the store until the commit settles it (store-kept.c, kept_unshare)
		is_snap "$(no_nlink "$(tree_snapshot_full "$w")")" "$(no_nlink "$mid")" \
			"seed $seed: committing changed nothing in the tree"
	fi
	err=$(cd "$w" && "$BROKERED" undo "$id" 2>&1)
	rc=$?
	is "$rc" 0 "seed $seed: undo ID exits 0"
	[ "$rc" = 0 ] || printf '#   %s\n' "$err" | head -20
	after=$(tree_snapshot_full "$w")
	is_snap "$(no_nlink "$after")" "$(no_nlink "$before")" "seed $seed: after undo: the tree is as before the killed run"
	is_snap "$after" "$before" "seed $seed: after undo: link counts as before too"
	explain_undo "$id" "$w" "$(no_nlink "$before")" "$(no_nlink "$after")"
done

done_testing
