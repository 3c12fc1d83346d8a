#!/usr/bin/env bash
# Escape suite, ".." and magic links: ws/../outside, deep ../../.., /proc/self/fd/N reopened for
# write, /proc/self/cwd/.., /proc/PID/root, /dev/fd/N, /dev/stdout, fds used as dirfds, and the
# broker's own /proc entries named through paths that are not literally "/proc/self".
HERE=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/../lib.sh"
require_core
. "$HERE/lib-escape.sh"
make_fixtures

X="$OUTSIDE/x"
mkdir -p "$WS/sub/deeper"
ln -s "$OUTSIDE/dir" "$WS/ldir"
echo ws >"$WS/wsfile"
deep=$(printf '../%.0s' $(seq 40))

# ---- .. ----
for p in "../outside/x" "sub/../../outside/x" "sub/deeper/../../../outside/x" "$WS/../outside/x" \
	"$WS/./sub/../../outside/x" "$deep${X#/}" "/$deep${X#/}" "ldir/../x" "./sub/.././../outside/./x"; do
	attempt "dotdot $p: open O_WRONLY|O_TRUNC" 'EACCES' open "$X" -- "$ESC" open "$p" w,trunc pwned
	attempt "dotdot $p: truncate" 'EACCES' truncate "$X" -- "$ESC" truncate "$p" 0
	attempt "dotdot $p: chmod" 'EACCES' chmod "$X" -- "$ESC" chmod "$p" 0777
	attempt "dotdot $p: setxattr" 'EACCES' setxattr "$X" -- "$ESC" setxattr "$p" user.x pwned
done
attempt "dotdot: create ../outside/new" 'EACCES' open "$OUTSIDE/new" -- "$ESC" open ../outside/new w,creat pwned
attempt "dotdot: unlink ../outside/x" 'EACCES' unlink "$X" -- "$ESC" unlink ../outside/x
attempt "dotdot: rename ../outside/x into ws" 'EACCES' rename "$X" -- "$ESC" rename ../outside/x got
attempt "dotdot: rename ws file to ../outside/x" 'EACCES' rename "$X" -- "$ESC" rename wsfile ../outside/x
attempt "dotdot: mkdir ../outside/d" 'EACCES' mkdir "$OUTSIDE/d" -- "$ESC" mkdir ../outside/d
attempt "dotdot: rmdir ../outside/dir (not empty anyway)" 'EACCES|ENOTEMPTY' - - -- "$ESC" rmdir ../outside/dir
attempt "dotdot: chmod the workspace's parent (..)" 'EACCES' chmod "$TEST_DIR" -- "$ESC" chmod .. 0777
attempt "dotdot: chmod ../.. (the parent of the test dir)" 'EACCES' - - -- "$ESC" chmod ../.. 0777
attempt "dotdot: chmod ldir/.. (physical parent, outside)" 'EACCES' chmod "$OUTSIDE" -- "$ESC" chmod ldir/.. 0777
attempt "dotdot: O_TMPFILE in ../outside" 'EACCES' - - -- "$ESC" open ../outside rw,tmpfile

# ---- magic links to an fd opened read-only ----
for how in r path; do
	for name in /proc/self/fd/ /proc/thread-self/fd/ /dev/fd/ /proc/PID/fd/ /proc/PID/task/PID/fd/ \
		/proc/self/../self/fd/ /proc/./self/fd/ //proc//self//fd// /dev/../proc/self/fd/ \
		"$deep"proc/self/fd/ ../../../../../../../../../../proc/self/fd/; do
		attempt "magic $name%d of an O_${how^^} fd: reopen O_RDWR" 'EACCES|ENOENT|ENXIO|EBADF' - - -- \
			"$ESC" fd "$X" "$how" reopen "$name" rw pwned
		attempt "magic $name%d of an O_${how^^} fd: reopen O_WRONLY|O_TRUNC" 'EACCES|ENOENT|ENXIO|EBADF' - - -- \
			"$ESC" fd "$X" "$how" reopen "$name" w,trunc pwned
	done
	attempt "magic /proc/self/fd/N (O_${how^^}): audit names the real file" 'EACCES' open "$X" -- \
		"$ESC" fd "$X" "$how" reopen /proc/self/fd/ w pwned
	attempt "magic /dev/fd/N (O_${how^^}): O_TRUNC" 'EACCES' open "$X" -- \
		"$ESC" fd "$X" "$how" reopen /dev/fd/ w,trunc
	attempt "magic /proc/self/fd/N of an outside dir (O_${how^^}): create inside" 'EACCES' open "$OUTSIDE/dir/new" -- \
		"$ESC" fd "$OUTSIDE/dir" "$how",directory reopen /proc/self/fd/%d/new w,creat pwned
	attempt "magic /proc/self/fd/N of an outside dir (O_${how^^}): O_TMPFILE" 'EACCES' - - -- \
		"$ESC" fd "$OUTSIDE/dir" "$how",directory reopen /proc/self/fd/ rw,tmpfile
	attempt "outside dir fd (O_${how^^}) as dirfd: openat(fd, y, O_WRONLY)" 'EACCES' open "$OUTSIDE/dir/y" -- \
		"$ESC" fd "$OUTSIDE/dir" "$how",directory at open y w pwned
	attempt "outside dir fd (O_${how^^}) as dirfd: openat(fd, new, O_CREAT)" 'EACCES' open "$OUTSIDE/dir/new" -- \
		"$ESC" fd "$OUTSIDE/dir" "$how",directory at open new w,creat pwned
	attempt "outside dir fd (O_${how^^}) as dirfd: fchmodat(fd, y)" 'EACCES' chmod "$OUTSIDE/dir/y" -- \
		"$ESC" fd "$OUTSIDE/dir" "$how",directory at chmod y 0777
	attempt "outside dir fd (O_${how^^}) as dirfd: unlinkat(fd, y)" 'EACCES' unlink "$OUTSIDE/dir/y" -- \
		"$ESC" fd "$OUTSIDE/dir" "$how",directory at unlink y
	attempt "ws dir fd (O_${how^^}) as dirfd: openat(fd, ../outside/x)" 'EACCES' open "$X" -- \
		"$ESC" fd "$WS" "$how",directory at open ../outside/x w pwned
done
attempt "magic /dev/stdout on an outside file opened read-only" 'EACCES' open "$X" -- "$ESC" fd "$X" r stdout w pwned
attempt "magic /dev/stdout O_APPEND" 'EACCES' open "$X" -- "$ESC" fd "$X" r stdout w,append pwned
attempt "magic /dev/stdout O_TRUNC (nothing written)" 'EACCES' open "$X" -- "$ESC" fd "$X" r stdout w,trunc
attempt "sh: exec 3<file then echo >/dev/fd/3" - open "$X" -- sh -c "exec 3<'$X'; echo pwned >/dev/fd/3"
attempt "sh: exec 3<file then echo >/proc/self/fd/3" - open "$X" -- sh -c "exec 3<'$X'; echo pwned >/proc/self/fd/3"
attempt "sh: read-only stdout then >>/dev/stdout" - open "$X" -- sh -c "exec 1<'$X'; echo pwned >>/dev/stdout"
attempt "read-only fd inherited from outside: >/dev/fd/7" - - - -- sh -c 'echo pwned >/dev/fd/7' 7<"$X"
attempt "read-only fd inherited from outside: truncate /proc/self/fd/7" - - - -- "$ESC" truncate /proc/self/fd/7 0 7<"$X"
attempt "read-only fd inherited from outside: chmod /proc/self/fd/7" - - - -- "$ESC" chmod /proc/self/fd/7 0777 7<"$X"

# ---- whose /proc/self? Every spelling must mean the target's, as the kernel resolves it ----
# The target reopens its own read-only fd of a workspace file for writing (allowed natively and by
# the policy); a broker that resolves the spelling as its own /proc/self reaches one of its own fds.
for name in /proc/self/fd/ /proc/self/../self/fd/ /proc/./self/fd/ /dev/../proc/self/fd/ \
	../../../../../../../../../../proc/self/fd/ /proc/PID/fd/; do
	echo ws >"$WS/wsfile"
	out=$(cd "$WS" && "$BROKERED" run -- "$ESC" fd wsfile r reopen "$name" w,trunc reopened 2>&1)
	is "$out:$(cat "$WS/wsfile")" "ok:reopened" "magic $name%d names the target's own fd (not the broker's)"
done
echo ws >"$WS/wsfile"

# ---- /proc/self/cwd, /proc/PID/root, /proc/PID/cwd ----
attempt "magic /proc/self/cwd/../outside/x" 'EACCES' open "$X" -- "$ESC" open /proc/self/cwd/../outside/x w,trunc pwned
attempt "magic /proc/thread-self/cwd/../outside/x: chmod" 'EACCES' chmod "$X" -- "$ESC" chmod /proc/thread-self/cwd/../outside/x 0777
attempt "magic /proc/self/root$X" 'EACCES' open "$X" -- "$ESC" open "/proc/self/root$X" w,trunc pwned
attempt "magic /proc/1/root$X" 'EACCES|ENOENT' - - -- "$ESC" open "/proc/1/root$X" w,trunc pwned
attempt "magic /proc/\$PPID/root$X (the supervisor)" 'EACCES' open "$X" -- \
	sh -c "exec $ESC open /proc/\$PPID/root$X w,trunc pwned"
attempt "magic /proc/\$PPID/cwd/../outside/x (the supervisor's cwd)" 'EACCES' open "$X" -- \
	sh -c "exec $ESC open /proc/\$PPID/cwd/../outside/x w,trunc pwned"
attempt "magic /proc/\$PPID/root: chmod" 'EACCES' chmod "$X" -- sh -c "exec $ESC chmod /proc/\$PPID/root$X 0777"
attempt "magic /proc/self/root/..$X" 'EACCES' utimes "$X" -- "$ESC" utimes "/proc/self/root/..$X"
attempt "magic /proc/self/cwd itself: chmod of the workspace's parent via cwd/.." 'EACCES' chmod "$TEST_DIR" -- \
	"$ESC" chmod /proc/self/cwd/.. 0777

# ---- a read-only fd held by a process outside the sandbox ----
exec 7<"$X"
attempt "magic /proc/<outside process>/fd/7 (the test shell's read-only fd)" 'EACCES|ENOENT' - - -- \
	"$ESC" open /proc/$$/fd/7 w,trunc pwned
attempt "magic /proc/<outside process>/fd/7: chmod" 'EACCES|ENOENT' - - -- "$ESC" chmod /proc/$$/fd/7 0777
exec 7<&-

# ---- the supervisor's own fds: nothing it holds may be written or changed through its /proc ----
state_modes() { find "$XDG_STATE_HOME" -printf '%p %m %U\n' | sort; }
m0=$(state_modes)
before=$(protected_snapshot)
out=$(timeout 50 "$BROKERED" run -- sh -c '
	for n in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do
		for pre in /proc/$PPID/fd /proc/./self/fd /proc/self/../$PPID/fd; do
			'"$ESC"' open $pre/$n w,append pwned
			'"$ESC"' chmod $pre/$n 0777
			'"$ESC"' utimes $pre/$n
			'"$ESC"' truncate $pre/$n 0
		done
	done' 2>&1 </dev/null >/dev/null)
rc=$?
is "$(protected_snapshot)" "$before" "supervisor's /proc/PID/fd/N: protected files unchanged"
m1=$(state_modes)
changed=$(join -j1 <(printf '%s\n' "$m0") <(printf '%s\n' "$m1") | awk '$2 != $4 || $3 != $5')
is "$changed" "" "supervisor's /proc/PID/fd/N: no mode or owner change in the state dir"
ok $([ $rc -lt 128 ] && echo 0 || echo 1) "supervisor's /proc/PID/fd/N: brokered did not crash (status $rc)"
ok $([ -s "$WS/.brokered/settings.json" ] && echo 0 || echo 1) "supervisor's /proc/PID/fd/N: settings intact"

broker_alive "broker still works after the magic-link attempts"
done_testing
