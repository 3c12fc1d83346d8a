#!/usr/bin/env bash
# Escape suite, below the file API: io_uring (ENOSYS), a nested seccomp listener (EPERM), mount,
# chroot, unshare + mount, pivot_root, open_by_handle_at (EPERM), TIOCSTI (EPERM), the i386 and x32
# ABIs (ENOSYS or refused), device nodes as root (EPERM).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/../lib.sh"
require_core
. "$HERE/lib-escape.sh"
make_fixtures
K=$ESC_DIR/escape-kernel
[ -x "$K" ] || skip_all "escape-kernel helper not built"
X="$OUTSIDE/x"
mkdir -p "$WS/mnt"

attempt "io_uring_setup" 'ENOSYS' - - -- "$K" io_uring
attempt "seccomp(SET_MODE_FILTER, NEW_LISTENER)" 'EPERM' - - -- "$K" seccomp-listener
attempt "seccomp(SET_MODE_FILTER, NEW_LISTENER|TSYNC)" 'EPERM' - - -- "$K" seccomp-tsync-listener
attempt "mount tmpfs on ws/mnt" 'EPERM' - - -- "$K" mount mnt
attempt "mount tmpfs on an outside dir" 'EPERM' - - -- "$K" mount "$OUTSIDE/dir"
attempt "umount /" 'EPERM' - - -- "$K" umount /
attempt "chroot ws/mnt" 'EPERM' - - -- "$K" chroot mnt
attempt "pivot_root" 'EPERM|EINVAL' - - -- "$K" pivot-root mnt
attempt "unshare(CLONE_NEWUSER|CLONE_NEWNS) then mount" 'EPERM|unshare:EPERM|unshare:EINVAL' - - -- "$K" unshare-mount mnt
if command -v unshare >/dev/null; then
	attempt "unshare -rm sh -c 'mount --bind'" - - - -- unshare -rm sh -c "mount --bind '$WS' '$OUTSIDE/dir' && echo pwned > '$OUTSIDE/dir/y'"
else
	skip "unshare -rm mount --bind" "unshare not installed"
fi
attempt "name_to_handle_at + open_by_handle_at O_WRONLY" 'EPERM|name_to_handle_at:EPERM|name_to_handle_at:EOPNOTSUPP' - - -- \
	"$K" open-by-handle "$X"

# TIOCSTI needs a terminal: run under script(1) when it is there
if command -v script >/dev/null 2>&1; then
	out=$(cd "$WS" && timeout 30 script -qec "'$BROKERED' run -- '$K' tiocsti" /dev/null </dev/null 2>&1 | tr -d '\r')
	case $out in
	*EPERM* | *EIO* | *ENOTTY*) ok 0 "ioctl TIOCSTI on the terminal refused ($(printf '%s' "$out" | tail -n1))" ;;
	*) ok 1 "ioctl TIOCSTI on the terminal refused"; printf '#   got: %q\n' "$out" ;;
	esac
else
	skip "ioctl TIOCSTI" "script(1) not installed (no tty)"
fi
attempt "ioctl TIOCSTI without a terminal" 'EPERM|ENOTTY|EIO' - - -- "$K" tiocsti

# foreign ABIs
# int 0x80 from a 64-bit process needs IA32 emulation (and a hypervisor that passes it on)
bash -c '"$0" int80-getpid; exit $?' "$K" >/dev/null 2>&1
i386_native=$?
if [ "$(uname -m)" = x86_64 ] && [ $i386_native -eq 0 ]; then
	attempt "i386 int 0x80 getpid" 'ENOSYS' - - -- "$K" int80-getpid
	attempt "i386 int 0x80 chmod(outside, 0777)" 'ENOSYS' - - -- "$K" int80-chmod "$X"
	attempt "i386 int 0x80 creat(outside/new)" 'ENOSYS' - - -- "$K" int80-creat "$OUTSIDE/new"
	attempt "i386 int 0x80 creat(ws/new)" 'ENOSYS' - - -- "$K" int80-creat "$WS/new-i386"
	attempt "i386 int 0x80 chmod(.brokered/settings.json)" 'ENOSYS' - - -- "$K" int80-chmod "$WS/.brokered/settings.json"
else
	skip "i386 int 0x80" "int 0x80 does not work natively here (status $i386_native: no IA32 emulation)"
fi
if [ "$(uname -m)" = x86_64 ]; then
	attempt "x32 chmod(outside, 0777)" 'ENOSYS|EPERM|EACCES' - - -- "$K" x32-chmod "$X"
	attempt "x32 creat(outside/new)" 'ENOSYS|EPERM|EACCES' - - -- "$K" x32-creat "$OUTSIDE/new"
	attempt "x32 open(outside, O_WRONLY|O_TRUNC)" 'ENOSYS|EPERM|EACCES' - - -- "$K" x32-open "$X"
	attempt "x32 chmod(.brokered/settings.json)" 'ENOSYS|EPERM|EACCES' - - -- "$K" x32-chmod "$WS/.brokered/settings.json"
	[ ! -e "$OUTSIDE/new" ] && [ ! -e "$WS/new-i386" ]
	ok $? "foreign ABIs: nothing created"
else
	skip "i386 and x32 ABIs" "not x86_64"
fi

# device nodes
if is_root; then
	attempt "mknod a char device (1,3) in the workspace" 'EPERM' - - -- "$ESC" mknod null c 1 3
	attempt "mknod a block device in the workspace" 'EPERM' - - -- "$ESC" mknod blk b 8 0
	attempt "mknod a char device in \$TMPDIR" 'EPERM' - - -- sh -c "exec $ESC mknod \"\$TMPDIR/null\" c 1 3"
	attempt "mknod a char device (1,1 = /dev/mem) outside" 'EPERM|EACCES' - - -- "$ESC" mknod "$OUTSIDE/mem" c 1 1
	[ ! -e "$WS/null" ] && [ ! -e "$WS/blk" ] && [ ! -e "$OUTSIDE/mem" ]
	ok $? "no device node was created"
else
	for d in "char device in the workspace" "block device in the workspace" "char device in \$TMPDIR" "char device outside" "no device node"; do
		skip "mknod $d" "needs root (CAP_MKNOD); an unprivileged user gets EPERM natively"
	done
fi
attempt "mknod a FIFO in the workspace (allowed)" 'ok' - - -- "$ESC" mknod wsfifo p
attempt "mknod a FIFO outside" 'EACCES' mknod "$OUTSIDE/newfifo" -- "$ESC" mknod "$OUTSIDE/newfifo" p

# Truncation whatever the open's access mode (Landlock does not handle TRUNCATE: the filter sends
# every O_TRUNC and truncate(2) to the broker): refused outside, backed up in the workspace
attempt "open(outside, O_RDONLY|O_TRUNC)" 'EACCES' open "$X" -- "$ESC" open "$X" r,trunc
attempt "an O_PATH fd of outside reopened by /dev/fd with O_RDONLY|O_TRUNC" 'EACCES' open "$X" -- \
	"$ESC" fd "$X" path reopen /dev/fd/ r,trunc
attempt "truncate(outside)" 'EACCES' truncate "$X" -- "$ESC" truncate "$X" 0
attempt "ftruncate on a read-only fd of outside" 'EINVAL|EBADF' - - -- "$ESC" fd "$X" r ftruncate 0
printf 'keep me\n' >"$WS/tr"
attempt "open(workspace file, O_RDONLY|O_TRUNC) (allowed)" - - - -- "$ESC" open tr r,trunc
is "$(stat -c %s "$WS/tr")" 0 "O_RDONLY|O_TRUNC on a workspace file truncated it, as natively"
(cd "$WS" && "$BROKERED" undo </dev/null >/dev/null 2>&1)
is "$(cat "$WS/tr")" "keep me" "... and undo brings its content back (it was backed up first)"
broker_alive "broker still works after the syscall attempts"
done_testing
