#!/usr/bin/env bash
# Differences from native found by running real programs' own test suites (tests/suites/): each
# case runs natively and under brokered in twin workspaces and must give the same status, output
# and files. The target's umask on every creating call (mkdir, mknod/mkfifo, open O_CREAT,
# symlink, O_TMPFILE + linkat, setgid directories), lsetxattr/lremovexattr on a symlink,
# `chroot --userspec=U / cmd` (and nothing but a chroot to "/"), and ModifyBackup's reference
# field name `targetPath`.
. "$(dirname "$0")/../lib.sh"
require_core
need python3 setfattr getfattr
PATH=$PATH:/usr/sbin # chroot, for the unprivileged user too
need chroot

# ---- umask: every creating call, three umasks, as native ----
cat >"$TEST_DIR/create.py" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
os.umask(int(sys.argv[1], 8))
os.mkdir("d")
os.mkdir("d7", 0o750)
os.mkfifo("p")
os.mknod("n", 0o666)
os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o666))
os.close(os.open("x", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o777))
os.symlink("f", "l")
fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o666)
os.write(fd, b"tmp\n")
# linkat(AT_FDCWD, "/proc/self/fd/N", AT_FDCWD, "t", AT_SYMLINK_FOLLOW): how libc names it
if libc.linkat(-100, b"/proc/self/fd/%d" % fd, -100, b"t", 0x400) != 0:
    sys.exit("linkat: errno %d" % ctypes.get_errno())
os.mkdir("g")
os.chmod("g", 0o2775)
os.mkdir("g/sub")
os.close(os.open("g/file", os.O_WRONLY | os.O_CREAT, 0o666))
for n in sorted(os.listdir(".")) + ["g/sub", "g/file"]:
    print(n, "%o" % (os.lstat(n).st_mode & 0o7777))
EOF
for um in 000 027 077; do
	twin_check "umask $um: mkdir, mknod, mkfifo, open O_CREAT, symlink, O_TMPFILE+linkat, setgid dir" \
		true python3 "$TEST_DIR/create.py" $um
done
twin_check "umask 0; mkdir -p a/b; touch a/b/f (the shell's own calls)" true \
	sh -c 'umask 0; mkdir -p a/b && touch a/b/f && mkfifo a/p && ln -s f a/l'

# ---- xattrs on a symlink: set and remove on the link itself, never on its target ----
xsetup() { ln -s f l && ln -s nowhere dangling && printf 'f\n' >f; }
xattrs() { (cd "$1" && getfattr -h -d -m - --absolute-names l dangling f 2>/dev/null); }
if [ "$(id -u)" -eq 0 ]; then
	twin_check "lsetxattr trusted.* on symlinks" xsetup \
		sh -c 'setfattr -h -n trusted.t -v 1 l && setfattr -h -n trusted.u -v 2 dangling && setfattr -h -n trusted.v -v 3 l'
	x=$(xattrs "$TWIN_BRK")
	is "$x" "$(xattrs "$TWIN_NAT")" "lsetxattr: the links carry the attributes as natively"
	printf '%s\n' "$x" | grep -q 'trusted.u="2"'
	ok $? "lsetxattr: a dangling link got its attribute"
	xsetup_t() { xsetup && setfattr -h -n trusted.t -v 1 l; }
	twin_check "lremovexattr trusted.* on a symlink" xsetup_t setfattr -h -x trusted.t l
	is "$(xattrs "$TWIN_BRK")" "$(xattrs "$TWIN_NAT")" "lremovexattr: attribute gone from the link as natively"
fi
# user.* on a symlink: the kernel refuses it (EPERM) natively; the file it points to is untouched.
twin_check "lsetxattr user.* on a symlink is refused as natively" xsetup setfattr -h -n user.a -v 1 l
is "$(xattrs "$TWIN_BRK")" "$(xattrs "$TWIN_NAT")" "user.* on a symlink: nothing set anywhere, as natively"
twin_check "setxattr user.* through a symlink sets it on the target" xsetup setfattr -n user.a -v 1 l
is "$(xattrs "$TWIN_BRK")" "$(xattrs "$TWIN_NAT")" "setxattr through a symlink: the target carries it, as natively"

# ---- chroot: "/" (how test suites drop privileges) works, nothing else ----
if [ "$(id -u)" -eq 0 ]; then
	nobody=$(id -u nobody)
	out=$(brk run -- chroot --userspec=nobody:nogroup / id -u 2>&1)
	is "$out" "$nobody" "chroot --userspec=nobody / id -u runs the command as nobody"
	out=$(cd / && "$BROKERED" run --workspace "$WS" -- chroot . true 2>&1)
	ok $? "chroot . with the cwd at / works ($out)"
	ln -s / "$WS/rootlink"
	brk run -- chroot rootlink true
	ok $? "chroot through a symlink to / works"
	mkdir -p "$WS/jail"
	err=$(brk run -- chroot "$WS/jail" /bin/true 2>&1)
	[ $? -ne 0 ] && [[ $err == *"Operation not permitted"* ]]
	ok $? "chroot to any other directory is refused (EPERM): $err"
	err=$(brk run -- chroot /proc/self/root /bin/true 2>&1)
	[ $? -ne 0 ] && [[ $err == *"Operation not permitted"* ]]
	ok $? "chroot through a magic link is refused"
	err=$(brk run -- chroot "$WS/missing" /bin/true 2>&1)
	[ $? -ne 0 ]
	ok $? "chroot to a missing directory fails"
else
	# An unprivileged chroot fails natively (EPERM); the same under brokered, even to "/".
	twin_check "unprivileged chroot / fails as natively" true chroot / true
	n=$(cat "$TEST_DIR"/twin/$_twin/native.err)
	b=$(cat "$TEST_DIR"/twin/$_twin/brokered.err)
	is "$b" "$n" "unprivileged chroot /: same error text as natively"
fi

# ---- ModifyBackup with the reference's field name targetPath ----
printf 'before\n' >"$WS/tool-file"
# shellcheck disable=SC2016
export BRK_BIN=$BROKERED
brk run -c '"$BRK_BIN" client json "{\"command\":\"ModifyBackup\",\"targetPath\":\"$BROKERED_WORKSPACE/tool-file\",\"sessionId\":\"$BROKERED_SESSION_ID\"}" >"$TMPDIR/ans" &&
	cat "$TMPDIR/ans" >&2 && grep -q "\"ok\":true" "$TMPDIR/ans"' 2>"$TEST_DIR/mb.err"
ok $? "ModifyBackup {targetPath} is accepted"
printf 'written by the tool itself\n' >"$WS/tool-file" # the agent's own Write tool, outside
brk show last | grep -q "tool-file"
ok $? "the turn records tool-file"
brk undo --force last >/dev/null 2>&1
is "$(cat "$WS/tool-file")" "before" "undo puts tool-file back from the backup ModifyBackup took"
brk run -c '"$BRK_BIN" client json "{\"command\":\"ModifyBackup\",\"targetPath\":\"relative\",\"sessionId\":\"$BROKERED_SESSION_ID\"}"' \
	>"$TEST_DIR/mb2.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "targetPath must be an absolute path" "$TEST_DIR/mb2.out"
ok $? "a relative targetPath is refused with a clear error (status $rc)"

done_testing
