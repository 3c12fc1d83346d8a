#!/usr/bin/env bash
# Issue 3: the cases the random workloads of t0300/t0310 found, each pinned down on its own:
# directories locked against their owner, hard links (made in the turn, and link identity across
# an undo of an undo), a tree renamed onto a directory the turn removed, a symlink to a directory
# replaced by the directory, renames the kernel refuses.
# After every undo the workspace is exactly as before (tree_snapshot_full: contents, modes, mtimes,
# link counts); as the unprivileged user the permission cases are real (root bypasses them).
BROKERED_TEST_DURABLE=1
. "$(dirname "$0")/../lib.sh"
require_core
need python3

# case_undo NAME SCRIPT [SETUP]: fresh fixture (then SETUP, natively), run SCRIPT under brokered,
# undo, compare; then undo the undo and compare with the workload's result.
case_undo() {
	local name=$1 script=$2 setup=${3:-} w before mid after redo
	w="$TEST_DIR/c-$name"
	mkdir -p "$w"
	w=$(cd "$w" && pwd -P)
	make_fixture_tree "$w" 7
	[ -z "$setup" ] || (cd "$w" && sh -c "$setup")
	before=$(tree_snapshot_full "$w")
	(cd "$w" && "$BROKERED" run -m "$name" -c "$script" </dev/null >/dev/null 2>"$TEST_DIR/$name.err")
	is "$?" 0 "$name: the run exits 0"
	sed 's/^/#   /' "$TEST_DIR/$name.err"
	mid=$(tree_snapshot_full "$w")
	[ "$mid" != "$before" ]
	ok $? "$name: the run changed the tree"
	is "$(cd "$w" && turn_state "$(last_turn_id)")" committed "$name: the run's turn is committed"
	out=$(cd "$w" && "$BROKERED" undo 2>&1 </dev/null)
	is "$?" 0 "$name: undo exits 0"
	[ -z "$out" ] || printf '#   %s\n' "$out" | grep -v '^#   undo of' | head -5
	after=$(tree_snapshot_full "$w")
	is_snap "$after" "$before" "$name: after undo the tree is as before (modes, mtimes, link counts)"
	(cd "$w" && "$BROKERED" undo >/dev/null 2>&1 </dev/null)
	is "$?" 0 "$name: undo of the undo exits 0"
	redo=$(tree_snapshot_full "$w")
	is_snap "$redo" "$mid" "$name: undo of the undo gives the run's result back (links too)"
}

# A directory made unsearchable and unwritable for its owner, with changes inside it before.
case_undo lock-dir 'echo more >> src/f1.txt && rm src/f2.txt && echo new > src/n.txt && chmod 444 src'
case_undo lock-nested 'rm -f data/deep/er/est/f1.txt && chmod 000 data/deep/er/est && chmod 500 data/deep'
# Read-only (r-x) once filled: nothing inside fails to be seen, the removal and creation fail to
# be made without the write right, which undo gives back for the moment.
case_undo lock-readonly 'echo new > src/n.txt && rm src/f2.txt && echo more >> src/f1.txt && chmod 555 src'
case_undo lock-then-rm 'mkdir -p x/y && echo a > x/y/f && chmod 555 x/y && echo b >> data/f1.txt && chmod 0 x'

# A hard link made in the turn, then the file changed through the new name: the source is restored.
case_undo link-write 'ln src/f1.txt n1 && echo through-link >> n1 && chmod 700 n1'
case_undo link-touch "ln data/f2.txt data/n2 && touch -d @1000 data/n2 && $BRK_PY -c 'import os; os.truncate(\"data/n2\", 3)'"
# A name of a hard-linked pair removed by undo, linked back by the undo of the undo.
case_undo link-pair 'ln src/f3.txt src/n3 && ln src/n3 docs/n3b && rm src/f3.txt'

# Two names of one inode before the turn, changed in place through one: undo gives both back.
case_undo link-preexisting 'echo appended >> src/f1.txt && chmod 600 src/f1.txt' 'ln src/f1.txt docs/f1-link'
case_undo link-preexisting-rm 'echo appended >> src/f1.txt && rm docs/f1-link' 'ln src/f1.txt docs/f1-link'

# A tree renamed onto a directory the turn removed: what it brought is removed by undo.
case_undo rename-onto-removed 'rm -rf docs && mv src docs/'
case_undo rename-exchange "$BRK_PY -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, b\"src\", -100, b\"data\", 2) != 0:
    raise OSError(ctypes.get_errno(), \"renameat2\")
'"

# A symlink to a directory replaced by that directory (t0300 seed 1453506): undo brings the symlink
# back; the undo of the undo must not take the paths below it for the files the symlink leads to
# (it did: they were left out, and the directory came back empty, exit 0).
case_undo symlink-to-dir-replaced 'rm src/link-to-dir && chmod 700 data/deep && mv data src/link-to-dir'
# ... and a path recorded below a directory that is a symlink now (the tree changed there): undo
# does not follow it.
case_undo dir-replaced-by-symlink 'mv data data.old && ln -s data.old data && echo x >> data/f1.txt'

# Concurrent processes in one run: their pre-images share flushes (group commit); every change is
# still backed up before it lands.
case_undo parallel 'for d in src src/lib src/app data; do
	( for f in "$d"/f*.txt; do echo par >> "$f"; done; sed -i s/line/LINE/ "$d"/f*.txt; rm -f "$d"/f1.txt; chmod 600 "$d"/f2.txt ) &
done; wait'

# The same, killed (SIGKILL) in the middle: undo of the interrupted turn gives the tree back.
w="$TEST_DIR/killed-parallel"
mkdir -p "$w/many"
w=$(cd "$w" && pwd -P)
for i in $(seq 300); do echo "v$i" >"$w/many/f$i"; done
touch -d @1500000000 "$w"/many/f*
before=$(tree_snapshot_full "$w")
# (its orphans, left when the broker dies, fail with ENOSYS: fail closed)
(cd "$w" && exec "$BROKERED" run -- sh -c 'for p in 1 2 3 4; do
	( for f in many/f*; do echo "$p" >> "$f"; done; rm -f many/f*"$p" ) &
done; wait' >/dev/null 2>&1) &
pid=$!
for _ in $(seq 200); do [ -n "$(cd "$w" && last_turn_id 2>/dev/null)" ] && break; sleep 0.05; done
sleep 0.3
kill -9 "$pid"
wait "$pid" 2>/dev/null
for _ in $(seq 100); do pgrep -f "many/f\*" >/dev/null || break; sleep 0.1; done
id=$(cd "$w" && last_turn_id)
(cd "$w" && "$BROKERED" undo "$id" >/dev/null 2>&1 </dev/null)
is "$?" 0 "killed parallel run: undo of its turn exits 0"
is_snap "$(tree_snapshot_full "$w")" "$before" "killed parallel run: after undo the tree is as before"

# A file deleted while a process outside the sandbox still writes to it (a server's log): the
# store keeps a copy, not the inode that goes on changing, and undo gives the content back.
w="$TEST_DIR/open-writer"
mkdir -p "$w"
w=$(cd "$w" && pwd -P)
echo original >"$w/log.txt"
exec 7>>"$w/log.txt"
(cd "$w" && "$BROKERED" run -- rm log.txt)
is "$?" 0 "rm of a file open for writing elsewhere exits 0"
echo "written after the rm" >&7
exec 7>&-
(cd "$w" && "$BROKERED" undo >/dev/null 2>&1 </dev/null)
is "$?" 0 "undo exits 0"
is "$(cat "$w/log.txt" 2>&1)" original "undo restored the content as it was when deleted"

# Renames the kernel refuses leave no record that undo would act on.
w="$TEST_DIR/refused"
mkdir -p "$w"
w=$(cd "$w" && pwd -P)
make_fixture_tree "$w" 8
before=$(tree_snapshot_full "$w")
err=$(cd "$w" && "$BROKERED" run -- mv -T data/deep/er/est data/deep 2>&1)
[ $? -ne 0 ]
ok $? "rename of a directory onto a non-empty one fails"
case $err in *"not empty"* | *"Directory not empty"*) ok 0 "it says: Directory not empty" ;;
*) ok 1 "it says: Directory not empty"; echo "#   got: $err" ;; esac
err=$(cd "$w" && "$BROKERED" run -- "$BRK_PY" -c 'import os; os.rename("data", "data/deep/into")' 2>&1)
case $err in *"Invalid argument"*) ok 0 "rename of a directory into its own subtree: EINVAL" ;;
*) ok 1 "rename of a directory into its own subtree: EINVAL"; echo "#   got: $err" ;; esac
(cd "$w" && "$BROKERED" run -- sh -c 'echo x >> f1.txt')
(cd "$w" && "$BROKERED" undo >/dev/null 2>&1 </dev/null)
is "$?" 0 "undo after the refused renames exits 0"
is_snap "$(tree_snapshot_full "$w")" "$before" "the refused renames recorded nothing that undo would remove"

done_testing
