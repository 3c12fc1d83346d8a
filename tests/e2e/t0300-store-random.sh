#!/usr/bin/env bash
# Issue 3: random destructive workloads (every operation, by shell builtins, coreutils, a static
# busybox, python and perl) under `brokered run`; `brokered undo` puts the workspace back exactly as
# it was (file set, types, contents, modes, symlink targets, mtimes and link counts of files).
BROKERED_TEST_DURABLE=1
# Seeds are printed and replay exactly: BROKERED_STORE_SEED_BASE=<seed - 1>, one seed (or round).
. "$(dirname "$0")/../lib.sh"
require_core
need python3 perl

# Six seeds as root in the default mode (release and sanitizer builds); three in the runs that
# tests/run.sh adds (readOnlyMounts, copyOnWrite, the unprivileged user): the same workloads through
# the same store, in another mode.
if [ -z "${BROKERED_TEST_FULL:-}" ] &&
	{ [ -n "${BROKERED_TEST_READ_ONLY_MOUNTS:-}${BROKERED_TEST_COPY_ON_WRITE:-}" ] || [ "$(id -u)" -ne 0 ]; }; then
	SEEDS=${BROKERED_STORE_SEEDS:-3}
else
	SEEDS=${BROKERED_STORE_SEEDS:-6}
fi
NOPS=${BROKERED_STORE_NOPS:-40}
[ -x /bin/busybox ] || echo "# /bin/busybox missing (busybox-static): its operations use coreutils instead"

no_nlink() { printf '%s\n' "$1" | sed 's/ nlink=[0-9]*$//'; }

base=${BROKERED_STORE_SEED_BASE:-$((RANDOM * 100))} # replay: BROKERED_STORE_SEED_BASE=<seed - 1> BROKERED_STORE_SEEDS=1
for k in $(seq "$SEEDS"); do
	seed=$((base + k))
	w="$TEST_DIR/w$seed"
	mkdir -p "$w"
	w=$(cd "$w" && pwd -P)
	make_fixture_tree "$w" "$seed"
	before=$(tree_snapshot_full "$w")
	gen_workload "$w" "$seed" "$NOPS" >"$TEST_DIR/work-$seed.sh"
	(cd "$w" && "$BROKERED" run -m "seed $seed" -- bash "$TEST_DIR/work-$seed.sh")
	is "$?" 0 "seed $seed: workload ran (exit 0)"
	mid=$(tree_snapshot_full "$w")
	[ "$mid" != "$before" ]
	ok $? "seed $seed: the workload changed the tree"
	id=$(cd "$w" && last_turn_id)
	is "$(cd "$w" && turn_state "$id")" committed "seed $seed: the run's turn is committed"
	err=$(cd "$w" && "$BROKERED" undo 2>&1)
	rc=$?
	is "$rc" 0 "seed $seed: undo exits 0"
	[ "$rc" = 0 ] || printf '#   %s\n' "$err" | head -20
	after=$(tree_snapshot_full "$w")
	is_snap "$(no_nlink "$after")" "$(no_nlink "$before")" "seed $seed: after undo: same file set, types, contents, modes, symlinks, mtimes"
	[ "$(no_nlink "$after")" = "$(no_nlink "$before")" ] || sed 's/^/#   | /' "$TEST_DIR/work-$seed.sh" | head -60
	is_snap "$after" "$before" "seed $seed: after undo: link counts as before too (nothing hard-linked into the store)"
	# undo of the undo gives the workload's result again
	(cd "$w" && "$BROKERED" undo >/dev/null 2>&1)
	is "$?" 0 "seed $seed: undo of the undo exits 0"
	redo=$(tree_snapshot_full "$w")
	is_snap "$(no_nlink "$redo")" "$(no_nlink "$mid")" "seed $seed: undo of the undo puts the workload's result back"
	is_snap "$redo" "$mid" "seed $seed: undo of the undo: hard links the workload made are links again (link counts)"
done

done_testing
