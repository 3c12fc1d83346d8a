#!/usr/bin/env bash
# Escape suite, fd-form metadata calls (Landlock does not cover them: the broker must refuse):
# fchmod, fchown, futimens, fsetxattr, fremovexattr, their *at(AT_EMPTY_PATH) and NULL-path forms,
# and inode-flag ioctls, on fds of protected files opened read-only or O_PATH.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/../lib.sh"
require_core
. "$HERE/lib-escape.sh"
make_fixtures

X="$OUTSIDE/x"
U=$(id -u) G=$(id -g)
for f in "$X" "$OUTSIDE/dir" "$HOME/.bashrc" "$WS/.brokered/settings.json" "$XDG_CONFIG_HOME/brokered/settings.json"; do
	for how in r path; do
		o=$how
		[ -d "$f" ] && o=$how,directory
		attempt "fchmod on an O_${how^^} fd of $f" 'EACCES|EBADF' chmod "$f" -- "$ESC" fd "$f" $o fchmod 0777
		attempt "fchown on an O_${how^^} fd of $f" 'EACCES|EBADF|EPERM' chown "$f" -- "$ESC" fd "$f" $o fchown "$U" "$G"
		attempt "futimens on an O_${how^^} fd of $f" 'EACCES|EBADF' utimes "$f" -- "$ESC" fd "$f" $o futimens
		attempt "fsetxattr user.x on an O_${how^^} fd of $f" 'EACCES|EBADF' setxattr "$f" -- "$ESC" fd "$f" $o fsetxattr user.x pwned
		attempt "fremovexattr on an O_${how^^} fd of $f" 'EACCES|EBADF|ENODATA' - - -- "$ESC" fd "$f" $o fremovexattr user.x
		attempt "fchmodat2(fd, \"\", AT_EMPTY_PATH) on an O_${how^^} fd of $f" 'EACCES' chmod "$f" -- "$ESC" fd "$f" $o fchmodat-empty 0777
		attempt "fchownat(fd, \"\", AT_EMPTY_PATH) on an O_${how^^} fd of $f" 'EACCES|EPERM' chown "$f" -- "$ESC" fd "$f" $o fchownat-empty "$U" "$G"
		attempt "utimensat(fd, \"\", AT_EMPTY_PATH) on an O_${how^^} fd of $f" 'EACCES' utimes "$f" -- "$ESC" fd "$f" $o utimensat-empty
		attempt "futimesat(fd, NULL) on an O_${how^^} fd of $f" 'EACCES|EBADF' utimes "$f" -- "$ESC" fd "$f" $o futimesat-null
		attempt "setxattrat(fd, \"\", AT_EMPTY_PATH) on an O_${how^^} fd of $f" 'EACCES|ENOSYS' - - -- "$ESC" fd "$f" $o setxattrat-empty user.x pwned
		attempt "ftruncate on an O_${how^^} fd of $f" 'EBADF|EINVAL|EISDIR' - - -- "$ESC" fd "$f" $o ftruncate 0
		attempt "write on an O_${how^^} fd of $f" 'EBADF|EISDIR' - - -- "$ESC" fd "$f" $o write pwned
	done
done
# inode flags and the inode generation through a read-only fd (owner or CAP_FOWNER suffices natively)
for op in "setflags 0x40" "setflags32 0x40" "setflags 0x4000" "setversion 7"; do
	attempt "ioctl $op on a read-only fd of $X" 'EPERM|EACCES|ENOTTY|EOPNOTSUPP|EINVAL' - - -- "$ESC" fd "$X" r $op
done
attempt "chattr +d (nodump) on $X" - - - -- chattr +d "$X"
attempt "chattr +A (noatime) on $X" - - - -- chattr +A "$X"

# fchmodat2 with a NULL path and no AT_EMPTY_PATH: the kernel answers EFAULT; the broker must not crash
echo ws >"$WS/wsfile"
for f in "$WS/wsfile" "$X"; do
	attempt "fchmodat2(fd, NULL, mode, 0) on a read-only fd of $f" 'EFAULT|EACCES|EINVAL' - - -- \
		"$ESC" fd "$f" r fchmodat2-null 0600
done
n0=$(audit_log | grep -c 'syscall=fchmodat2')
out=$(cd "$WS" && timeout 50 "$BROKERED" run -- sh -c "$ESC fd wsfile r fchmodat2-null 0600; $ESC open after w,creat alive; cat after" 2>/dev/null)
rc=$?
is "$rc:$(printf '%s' "$out" | tail -n1)" "0:alive" "fchmodat2(fd, NULL): a later write in the same run still works"
n1=$(audit_log | grep -c 'syscall=fchmodat2')
ok $([ "$n1" -gt "$n0" ] && echo 0 || echo 1) "fchmodat2(fd, NULL): the refusal is in the audit log (and the run's log is not lost)"

# the same fd calls on a workspace file are allowed (and backed up)
attempt "fchmod on a read-only fd of a workspace file (allowed)" 'ok' - - -- "$ESC" fd wsfile r fchmod 0600
is "$(stat -c %a "$WS/wsfile")" 600 "fchmod on a workspace file took effect"
# an O_PATH fd of a symlink: the broker backs a symlink up and changes it by its name, which such an
# fd does not have, so these are refused (never done unbacked)
ln -s wsfile "$WS/wslink"
c0=$(stat -c %z "$WS/wslink")
for op in "fchownat-empty $U $G" "utimensat-empty" "fchmodat-empty 0600" "futimens"; do
	attempt "${op%% *} on an O_PATH fd of a workspace symlink (refused)" 'EOPNOTSUPP|EBADF' - - -- \
		"$ESC" fd wslink path,nofollow $op
done
is "$(stat -c %z "$WS/wslink")" "$c0" "the symlink was not changed through its fd"
attempt "touch -h on a workspace symlink by name (allowed)" - - - -- touch -h -d '2002-01-01 00:00:00 UTC' wslink
is "$(stat -c %Y "$WS/wslink")" 1009843200 "touch -h by name changed the symlink's mtime"
# fd calls on files the command created: decided on where each file is at the time (the broker
# knows the files it made without asking /proc, until a rename or unlink moves a path)
if command -v python3 >/dev/null 2>&1; then
	cat >"$OUTSIDE/made.py" <<'PY'
import os
fd = os.open("made", os.O_CREAT | os.O_WRONLY, 0o644)
os.fchmod(fd, 0o600)
os.setxattr(fd, "user.k", b"v")
os.utime(fd, (1000000000, 1000000000))
os.rename("made", "moved")
os.fchmod(fd, 0o640)
fd2 = os.open("gone", os.O_CREAT | os.O_WRONLY, 0o644)
os.unlink("gone")
os.fchmod(fd2, 0o600)
fd3 = os.open("dir/inner", os.O_CREAT | os.O_WRONLY, 0o644)
os.rename("dir", "dir2")
os.fchmod(fd3, 0o604)
s = os.stat("moved")
print(oct(s.st_mode & 0o777), os.getxattr("moved", "user.k").decode(), int(s.st_mtime),
      oct(os.stat("dir2/inner").st_mode & 0o777))
PY
	mkdir "$WS/dir"
	n0=$(audit_log | wc -l)
	is "$(brk run -- python3 "$OUTSIDE/made.py" 2>&1 </dev/null)" "0o640 v 1000000000 0o604" \
		"fd calls on created files: mode, xattr and times as natively, after a rename and an unlink"
	is "$(audit_log | tail -n +$((n0 + 1)) | grep 'phase=notify-op' | grep -E 'syscall=(fchmod|fsetxattr|utimensat)' |
		sed -E 's/.* op=([a-z]+) .*normalisedPath=([^ ]*) .*/\1 \2/; s/.* op=([a-z]+) .*rule=unnamed.*/\1 unnamed/')" \
		"chmod $WS/made
setxattr $WS/made
utimes $WS/made
chmod $WS/moved
chmod unnamed
chmod $WS/dir2/inner" "fd calls on created files: each decided and logged on the file's path at the time"
else
	skip "fd calls on created files" "python3 not installed"
fi
broker_alive "broker still works after the fd metadata attempts"
done_testing
