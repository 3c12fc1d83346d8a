#!/usr/bin/env bash
# Issue 3: a full store. With the store on a 2 MiB tmpfs, a change whose backup does not fit fails
# cleanly (the command sees an error, the file is untouched) and nothing is lost: undo of the run
# puts back every file that was changed. Needs root (mount); skipped otherwise.
BROKERED_TEST_DURABLE=1
. "$(dirname "$0")/../lib.sh"
require_core
[ "$(id -u)" -eq 0 ] || skip_all "mounting a small tmpfs for the store needs root (uid $(id -u))"
need python3
mount -t tmpfs -o size=2m,mode=0755 brokered-test-store "$XDG_STATE_HOME" 2>/dev/null ||
	skip_all "cannot mount a tmpfs here (mount -t tmpfs failed)"
trap 'cd /; umount -l "$XDG_STATE_HOME" 2>/dev/null; cleanup' EXIT

WSP=$(pwd -P)
head -c $((3 * 1024 * 1024)) /dev/urandom >big
head -c 1000 /dev/urandom >other
touch -d @1500000000 big other
want=$(fingerprint big)
mt=$(stat -c %.9Y big)

for cmd in 'echo x >> big' 'echo x > big' ': > big' 'truncate -s 10 big' 'rm big' 'mv other big' \
	'sed -i s/a/b/ big' 'dd if=/dev/zero of=big bs=1k count=1 conv=notrunc status=none' \
	"$BRK_PY -c 'open(\"big\",\"r+b\").write(b\"x\")'" "perl -e 'unlink(\"big\") or die \"unlink: \$!\\n\"'"; do
	err=$(brk run -c "$cmd" 2>&1 </dev/null)
	rc=$?
	[ "$rc" -ne 0 ]
	ok $? "store full: '$cmd' fails (status $rc)"
	[ -n "$err" ]
	ok $? "store full: '$cmd': the command reports an error"
	[ -n "$err" ] && printf '#   stderr: %s\n' "$(printf '%s' "$err" | head -3)"
	is "$(fingerprint big) $(stat -c %.9Y big)" "$want $mt" "store full: '$cmd': big untouched"
done
[ -e other ]
ok $? "store full: other is still there after the refused rename"

# many files, more than the store can hold: some changes go through (backed up), the rest fail
mkdir many
for i in $(seq 40); do head -c 100000 /dev/urandom >"many/f$i"; printf 'TODO\n' >>"many/f$i"; done
touch -d @1400000000 many/f*
snap0=$(tree_snapshot_full "$WSP")
brk run -c 'for f in many/f*; do sed -i s/TODO/DONE/ "$f"; done; rm -rf many' </dev/null >/dev/null 2>&1
mid=$(tree_snapshot_full "$WSP")
[ "$mid" != "$snap0" ]
ok $? "store filling up: some changes went through"
echo "# store filling up: $(find many -type f 2>/dev/null | wc -l) of 40 files left after rm -rf"
echo "# store: $(df -k "$XDG_STATE_HOME" | tail -1 | awk '{print $3 " KiB used, " $4 " KiB free"}'); objects $(du -sk "$(store_roots | head -1)/objects" | cut -f1) KiB, tmp $(du -sk "$(store_roots | head -1)/tmp" | cut -f1) KiB"
err=$(brk undo </dev/null 2>&1 >/dev/null)
is "$?" 0 "undo of the run that filled the store exits 0 (undo needs no room for content)"
[ -z "$err" ] || printf '#   undo: %s\n' "$err" | head -8
is_snap "$(tree_snapshot_full "$WSP")" "$snap0" "undo: nothing lost, every file as before"

# space freed: the store works again
brk gc --older-than 0s >/dev/null 2>&1
echo y >small
brk run -c 'echo z > small' </dev/null
is "$?" 0 "after gc freed space a change succeeds again"
brk undo </dev/null >/dev/null 2>&1
is "$(cat small)" y "and it is undone"

done_testing
