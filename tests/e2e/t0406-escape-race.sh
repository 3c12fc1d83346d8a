#!/usr/bin/env bash
# Escape suite, races: a thread rewriting the path buffer (or openat2's open_how) after the
# notification, a thread swapping a symlink or a directory between a workspace target and an
# outside one while another thread writes through it. Nothing outside may ever change.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/../lib.sh"
require_core
. "$HERE/lib-escape.sh"
make_fixtures
RACE=$ESC_DIR/escape-race
[ -x "$RACE" ] || skip_all "escape-race helper not built"
N=${ESCAPE_RACE_N:-10000}   # the brief: 10k iterations for the main path flip
M=${ESCAPE_RACE_M:-1500}    # the other variants

X="$OUTSIDE/x"
echo ws >"$WS/ok"
mkdir -p "$WS/d"
echo ws >"$WS/d/y"

# race_attempt DESC CMD...: run it, then the protected files are unchanged, nothing new outside,
# brokered neither crashed nor hung, and the helper finished.
race_attempt() {
	local desc=$1 before after out rc
	shift
	before=$(protected_snapshot)
	out=$(cd "$WS" && timeout 55 "$BROKERED" run -- "$@" 2>"$TEST_DIR/race.err" </dev/null)
	rc=$?
	after=$(protected_snapshot)
	if [ "$after" = "$before" ]; then
		ok 0 "$desc: protected files unchanged"
	else
		ok 1 "$desc: protected files unchanged"
		snap_changes "$before" "$after"
	fi
	case $out in
	done*) ok 0 "$desc: finished ($out)" ;;
	*)
		ok 1 "$desc: finished (brokered status $rc)"
		sed 's/^/#   stderr: /' "$TEST_DIR/race.err" | head -5
		;;
	esac
}

# The path buffer flips between a workspace name and an outside one (relative and absolute), and
# between a scratch name (which the broker may hand back to the kernel) and an outside one.
race_attempt "flip open ok <-> ../outside/x ($N)" "$RACE" flip open ok ../outside/x "$N"
for op in trunc chmod truncate utimes setxattr; do
	race_attempt "flip $op ok <-> ../outside/x ($M)" "$RACE" flip $op ok ../outside/x "$M"
done
race_attempt "flip open ok <-> ../outside/new ($M)" "$RACE" flip open ok ../outside/new "$M"
[ ! -e "$OUTSIDE/new" ]
ok $? "flip open: ../outside/new was never created"
race_attempt "flip open ok <-> .brokered/new ($M)" "$RACE" flip open ok .brokered/new "$M"
[ ! -e "$WS/.brokered/new" ]
ok $? "flip open: .brokered/new was never created"
race_attempt "flip trunc ok <-> ~/.bashrc ($M)" "$RACE" flip trunc ok "$HOME/.bashrc" "$M"
# Scratch names: an allowed-by-Landlock decision continues in the kernel, which reads the path again.
race_attempt "flip open \$TMPDIR/s <-> ../outside/x ($N)" sh -c "exec '$RACE' flip open \"\$TMPDIR/s\" ../outside/x $N"
for op in trunc truncate chmod setxattr utimes; do
	race_attempt "flip $op \$TMPDIR/s <-> ../outside/x ($M)" \
		sh -c "exec '$RACE' flip $op \"\$TMPDIR/s\" ../outside/x $M"
done
race_attempt "flip trunc \$TMPDIR/s <-> .brokered/settings.json ($M)" \
	sh -c "exec '$RACE' flip trunc \"\$TMPDIR/s\" .brokered/settings.json $M"
race_attempt "flip rename \$TMPDIR/src -> \$TMPDIR/d <-> ../outside/x ($M)" \
	sh -c "exec '$RACE' flip rename \"\$TMPDIR/dst\" ../outside/x $M"
race_attempt "flip link \$TMPDIR/src -> \$TMPDIR/l <-> ../outside/newlink ($M)" \
	sh -c "exec '$RACE' flip link \"\$TMPDIR/l\" ../outside/newlink $M"
[ ! -e "$OUTSIDE/newlink" ]
ok $? "flip link: nothing linked outside"
race_attempt "flip /dev/null <-> ../outside/x ($M)" "$RACE" flip trunc /dev/null ../outside/x "$M"

# openat2: how.flags read by the supervisor as O_RDONLY, then flipped to O_WRONLY|O_TRUNC
out=$(cd "$WS" && timeout 55 "$BROKERED" run -- "$RACE" how ../outside/x "$M" 2>/dev/null)
is "$(fingerprint "$X")" "F 644 $(printf 'outside secret\n' | sha256sum | cut -d' ' -f1)" "openat2 how.flags flip: outside file unchanged"
case $out in
*successes=[0-9][0-9][0-9][0-9][0-9][0-9][0-9]*) ok 1 "openat2 how.flags flip: never a writable fd ($out)" ;;
done*) ok 0 "openat2 how.flags flip: never a writable fd" ;;
*) ok 1 "openat2 how.flags flip: finished ($out)" ;;
esac

# A symlink swapped between a workspace file and an outside file while another thread writes it.
for op in trunc open chmod truncate utimes setxattr; do
	rm -f "$WS/link" "$WS/link.swap"
	ln -s ok "$WS/link"
	race_attempt "swap symlink ok <-> $X, $op ($M)" "$RACE" swap $op link ok "$X" "$M"
done
rm -f "$WS/link" "$WS/link.swap"
ln -s ok "$WS/link"
race_attempt "swap symlink ok <-> ~/.bashrc, trunc ($M)" "$RACE" swap trunc link ok "$HOME/.bashrc" "$M"
rm -f "$WS/link" "$WS/link.swap"
ln -s ok "$WS/link"
race_attempt "swap symlink ok <-> .brokered/settings.json, trunc ($M)" "$RACE" swap trunc link ok "$WS/.brokered/settings.json" "$M"

# A directory component swapped for a symlink to an outside directory.
rm -f "$WS/d.swap"
race_attempt "swap directory d <-> symlink to $OUTSIDE/dir, open d/y O_TRUNC ($M)" \
	"$RACE" dirswap d d "$OUTSIDE/dir" "$M"

broker_alive "broker still works after the races"
done_testing
