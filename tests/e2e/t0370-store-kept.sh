#!/usr/bin/env bash
# Issue 14: with fileBackup.sync on, a file that is deleted or renamed over is kept by hard links
# whose name (kept/<turn>/<path>) carries its record, instead of a flush per change; the file
# system's journal orders them before the change. Here the broker is killed (SIGKILL) at a random
# point of rm, sed -i and rename-over workloads; then the manifest records that a power cut could
# have lost (every one a kept name covers) are cut out of the manifest. The next start must rebuild
# them from the kept names, and `undo` must bring every file back: content, mode, mtime.
# As root the store and workspaces live on a journaled ext4 image (loop device): the ordering is
# detected, not assumed. Elsewhere BROKERED_STORE_ASSUME_ORDERED=1 makes the store use kept names on
# whatever file system /tmp is. Seeds are printed: BROKERED_STORE_SEED_BASE=<seed - 1> replays one.
BROKERED_TEST_DURABLE=1
. "$(dirname "$0")/../lib.sh"
require_core
need python3

base=${BROKERED_STORE_SEED_BASE:-$((RANDOM * 100))}
N=${BROKERED_KEPT_FILES:-30}

# mount_image NAME MKFS-OPTIONS...: an ext4 image on a loop device at $TEST_DIR/NAME (root only)
mounts=()
mount_image() {
	local name=$1
	shift
	[ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null 2>&1 && command -v losetup >/dev/null 2>&1 || return 1
	mkdir -p "$TEST_DIR/$name" &&
		truncate -s 128M "$TEST_DIR/$name.img" && mkfs.ext4 -q -F "$@" "$TEST_DIR/$name.img" &&
		mount -o loop "$TEST_DIR/$name.img" "$TEST_DIR/$name" 2>/dev/null || return 1
	mounts+=("$TEST_DIR/$name")
}
trap 'cd /; for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done; cleanup' EXIT

kept_root() { echo "$XDG_STATE_HOME"/brokered/sessions/*/modify_backup/kept; }
# kept_count: kept names of every turn
kept_count() { find "$XDG_STATE_HOME"/brokered/sessions/*/modify_backup/kept -mindepth 2 2>/dev/null | wc -l; }

# fixture DIR SEED: N files with varied content, modes and old mtimes, and N ".new" files
fixture() {
	local d=$1/d i modes=(644 600 640 755 444)
	RANDOM=$2
	mkdir -p "$d"
	for i in $(seq "$N"); do
		{ for _ in $(seq $((RANDOM % 30 + 1))); do echo "line $RANDOM TODO $i"; done; } >"$d/f$i"
		echo "new $i $RANDOM" >"$d/f$i.new"
		chmod "${modes[RANDOM % 5]}" "$d/f$i"
		touch -d "@$((1400000000 + RANDOM * 7))" "$d/f$i" "$d/f$i.new"
	done
	# a name with the bytes the kept names escape
	echo "odd TODO" >"$d/w%2Fx%"
	echo "odd new" >"$d/w%2Fx%.new"
	# directories and symlinks: their records ride on likenesses (mode, owner, mtime, target)
	mkdir -p "$d/sub/deeper" "$d/locked"
	ln -s f1 "$d/sub/short-link"
	ln -s "$(printf 'long/%.0s' $(seq 20))target" "$d/sub/long-link"
	chmod 750 "$d/sub"
	chmod 0 "$d/locked"
	touch -h -d @1300000000 "$d/sub/short-link" "$d/sub/long-link"
	touch -d @1300000000 "$d/sub/deeper" "$d/sub" "$d/locked" "$d"
}

# workload KIND: one change per file, then (killed runs) a wait for the kill
workload() {
	case $1 in
	rm) echo 'rm -f d/w%2Fx%; for i in $(seq '"$N"'); do rm -f d/f$i; done' ;;
	sed) echo 'sed -i s/TODO/DONE/ d/w%2Fx%; for i in $(seq '"$N"'); do sed -i s/TODO/DONE/ d/f$i; done' ;;
	mv) echo 'mv -f d/w%2Fx%.new d/w%2Fx%; for i in $(seq '"$N"'); do mv -f d/f$i.new d/f$i; done' ;;
	tree) echo 'rm -rf d' ;;
	esac
}

# cut_kept_records TURN [objects]: drop every manifest line whose path has a kept name (what a
# power cut can lose: those records were never flushed), and with "objects" the objects/ links of
# the kept files too (never flushed without a journal); print how many records were dropped
cut_kept_records() {
	"$BRK_PY" - "$1" "$(kept_root)" "${2:-}" <<'PYEOF'
import os, re, sys
turn, kept, objects = sys.argv[1], sys.argv[2], sys.argv[3]
names = os.listdir(os.path.join(kept, turn))
paths, inodes = set(), set()
for n in names:
    p = b"/" + os.fsencode(n).replace(b"%2F", b"/").replace(b"%25", b"%")
    paths.add(p)
    st = os.lstat(os.path.join(kept, turn, n))
    if os.path.isfile(os.path.join(kept, turn, n)) and not os.path.islink(os.path.join(kept, turn, n)):
        inodes.add(st.st_ino)
if objects:
    odir = os.path.join(os.path.dirname(kept), "objects")
    for root, dirs, files in os.walk(odir):
        for f in files:
            if os.lstat(os.path.join(root, f)).st_ino in inodes:
                os.unlink(os.path.join(root, f))
man = os.path.join(os.path.dirname(kept), "turns", turn, "manifest")
data = open(man, "rb").read()
out, dropped = [], 0
for line in data.split(b"\n"):
    m = re.search(rb" p=(\S+)", line)
    p = None
    if m:
        p = re.sub(rb"\\x([0-9a-fA-F]{2})", lambda x: bytes([int(x.group(1), 16)]), m.group(1))
    if p in paths:
        dropped += 1
        continue
    out.append(line)
open(man, "wb").write(b"\n".join(out))
print(dropped)
PYEOF
}

# changed_kept_paths TURN: the paths of the turn's kept names whose file is no longer at its path
changed_kept_paths() {
	"$BRK_PY" - "$(kept_root)/$1" <<'PYEOF'
import os, sys
kdir = sys.argv[1]
for n in sorted(os.listdir(kdir)):
    p = "/" + n.replace("%2F", "/").replace("%25", "%")
    k = os.lstat(os.path.join(kdir, n))
    try:
        st = os.lstat(p)
        if (st.st_dev, st.st_ino) == (k.st_dev, k.st_ino):
            continue
    except FileNotFoundError:
        pass
    print(p)
PYEOF
}

# manifest_has_all TURN PATH...: every path has a record in the turn's manifest
manifest_has_all() {
	local turn=$1
	shift
	"$BRK_PY" - "$(kept_root)/../turns/$turn/manifest" "$@" <<'PYEOF'
import re, sys
data = open(sys.argv[1], "rb").read()
have = set()
for line in data.split(b"\n"):
    m = re.search(rb" p=(\S+)", line)
    if m:
        have.add(re.sub(rb"\\x([0-9a-fA-F]{2})", lambda x: bytes([int(x.group(1), 16)]), m.group(1)))
missing = [p for p in sys.argv[2:] if p.encode() not in have]
print(" ".join(missing))
sys.exit(1 if missing else 0)
PYEOF
}

k=0
# rounds TOP CUT KIND...: killed and completed runs of each workload with the store on TOP
rounds() {
local top=$1 cut=$2 kind mode
shift 2
for kind in "$@"; do
	for mode in killed completed; do
		k=$((k + 1))
		seed=$((base + k))
		w="$top/w$seed"
		export XDG_STATE_HOME="$top/state$seed" # one store per round: kept_root is its own
		mkdir -p "$XDG_STATE_HOME"
		fixture "$w" "$seed"
		w=$(cd "$w" && pwd -P)
		before=$(tree_snapshot_full "$w")
		marker="brokered-kept-$kind-$seed-$$"
		if [ $mode = killed ]; then
			{ workload $kind; echo 'exec sleep 600'; } >"$TEST_DIR/$marker.sh"
		else
			workload $kind >"$TEST_DIR/$marker.sh"
		fi
		(cd "$w" && exec "$BROKERED" run -m "$kind $seed" -- bash "$TEST_DIR/$marker.sh" 2>/dev/null) &
		pid=$!
		if [ $mode = completed ]; then
			wait "$pid"
			is "$?" 0 "seed $seed ($kind): the run exits 0"
			is "$(kept_count)" 0 "seed $seed ($kind): no kept name is left after the commit"
			id=$(cd "$w" && last_turn_id)
			is "$(cd "$w" && turn_state "$id")" committed "seed $seed ($kind): the turn is committed"
		else
			# kill once at least `want` files were kept (1..N, from the seed): a point of the
			# workload chosen by the count of changes, not by time
			RANDOM=$seed
			want=$((RANDOM % N + 1))
			for _ in $(seq 3000); do
				if [ $kind = tree ]; then
					[ -e "$w/d" ] || break # the whole tree is gone: everything kept
				else
					[ "$(kept_count)" -ge "$want" ] && break
				fi
				sleep 0.01
			done
			got=$(kept_count)
			[ "$got" -ge "$want" ]
			ok $? "seed $seed ($kind): $want changes made without a flush each, kept by name ($got)"
			kill -9 "$pid"
			wait "$pid" 2>/dev/null
			for _ in $(seq 100); do no_process_with "$marker" && break; sleep 0.1; done
			id=$(ls "$(kept_root)")
			[ -n "$id" ] && [ "$(echo "$id" | wc -l)" = 1 ]
			ok $? "seed $seed ($kind): one turn has kept names after the kill ($id)"
			# the paths whose change happened: a kept file still at its path (killed between
			# the link and the change) was not changed and needs no record
			mapfile -t kept_paths < <(changed_kept_paths "$id")
			dropped=$(cut_kept_records "$id" "$cut")
			[ "${dropped:-0}" -ge 1 ]
			ok $? "seed $seed ($kind): the power cut is simulated: $dropped unflushed records cut"
			state=$(cd "$w" && turn_state "$id")
			case $state in open | interrupted) ok 0 "seed $seed ($kind): the turn is $state" ;;
			*) ok 1 "seed $seed ($kind): the turn is open/interrupted (got '$state')" ;; esac
			[ ! -e "$(kept_root)/$id" ]
			ok $? "seed $seed ($kind): the next start settled the kept names"
			missing=$(manifest_has_all "$id" "${kept_paths[@]}")
			ok $? "seed $seed ($kind): the manifest has every kept path again"
			[ -z "$missing" ] || echo "#   missing: $missing"
		fi
		err=$(cd "$w" && "$BROKERED" undo "$id" 2>&1)
		rc=$?
		is "$rc" 0 "seed $seed ($kind): undo exits 0"
		[ "$rc" = 0 ] || printf '#   %s\n' "$err" | head -20
		after=$(tree_snapshot_full "$w")
		is_snap "$after" "$before" "seed $seed ($kind, $mode): after undo every file is back (content, mode, mtime, links)"
	done
done
}

if mount_image journal -O ^fast_commit; then
	echo "# a journaled ext4 image: kept names ride on its ordering, no flush"
	rounds "$TEST_DIR/journal" "" rm sed mv tree
else
	echo "# no loop device here: the store assumes an ordered file system"
	export BROKERED_STORE_ASSUME_ORDERED=1
	rounds "$TEST_DIR" "" rm sed mv tree
	unset BROKERED_STORE_ASSUME_ORDERED
fi
if mount_image nojournal -O ^has_journal; then
	echo "# an ext4 image without a journal: a kept name is written out by one directory fsync"
	rounds "$TEST_DIR/nojournal" objects rm sed tree
else
	skip "rounds on ext4 without a journal" "needs root and a loop device"
fi
top=$TEST_DIR

# A path too long for one kept name is flushed as before, and comes back too.
w="$top/long"
long=$(printf 'x%.0s' $(seq 200))
mkdir -p "$w/$long/$long"
echo deep >"$w/$long/$long/file"
before=$(tree_snapshot_full "$w")
(cd "$w" && "$BROKERED" run -- rm -rf "$long")
is "$?" 0 "a tree with paths longer than a file name is removed"
(cd "$w" && "$BROKERED" undo >/dev/null 2>&1)
is_snap "$(tree_snapshot_full "$w")" "$before" "... and undo brings it back"

done_testing
