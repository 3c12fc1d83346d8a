#!/usr/bin/env bash
# sandbox.readOnlyMounts: where brokered may make a mount namespace (root, or a user namespace), the command sees every
# mount read-only but its scratch dir, and the files the broker opens for it come from the
# broker's own mounts. fchmod, fchown, futimens and the xattr calls on those need no notification
# (nothing in the audit log), are undone with the file, and the kernel refuses them with EROFS on
# a file the command opened itself. Relative paths, magic links, Unix sockets, access(W_OK) and
# chroot("/") behave as natively; a rule that tells metadata from writes, or a user that cannot
# make the namespace, keeps the default mode. Without root the namespace is made in a user
# namespace of the command's own, where it keeps its uid and gid.
. "$(dirname "$0")/../lib.sh"
require_core
need python3

settings() { printf '%s\n' "$1" >"$XDG_CONFIG_HOME/brokered/settings.json"; }
mkdir -p "$XDG_CONFIG_HOME/brokered"
settings '{"sandbox": {"fileBackup": {"sync": false}, "readOnlyMounts": true}}'

# ro PATH: "ro" or "rw" as statvfs(2) sees PATH's mount
cat >"$TEST_DIR/mnt.py" <<'EOF'
import os, sys
for p in sys.argv[1:]:
    print(p, "ro" if os.statvfs(p).f_flag & os.ST_RDONLY else "rw")
EOF
view() { brk run -- python3 "$TEST_DIR/mnt.py" / "$WS" '$TMPDIR' 2>&1 | sed "s|$WS|WS|"; }

# The default mode, as where the namespace cannot be had (BROKERED_PRETEND_MISSING=mountns: as if).
fallback_checks() {
	"$BROKERED" doctor | grep -q '\[MISS\] read-only mount namespace'
	ok $? "fallback: doctor says the read-only mount namespace is missing"
	out=$(brk run -- python3 "$TEST_DIR/mnt.py" / "$WS" 2>&1)
	is "$(printf '%s\n' "$out" | cut -d' ' -f2 | sort -u)" "rw" "fallback: the command sees its mounts as they are"
	printf 'x\n' >f
	chmod 644 f
	brk run -- python3 -c 'import os; fd = os.open("f", os.O_RDONLY); os.fchmod(fd, 0o600)'
	ok $? "fallback: fchmod on an fd the command opened is brokered"
	is "$(stat -c %a f)" 600 "fallback: the mode changed"
	audit_has chmod "$WS/f" allow
	ok $? "fallback: the audit log has the fchmod"
	rm -f f
}
if ! "$BROKERED" doctor 2>/dev/null | grep -q '\[ ok \] read-only mount namespace'; then
	# No namespace here, not even a user namespace: the setting falls back to the default mode.
	fallback_checks
	if [ "${CI:-}" = true ]; then
		ok 1 "CI=true: the read-only mount namespace must be available (root, or a user namespace)"
	fi
	done_testing
	exit
fi
if [ "$(id -u)" -ne 0 ]; then
	"$BROKERED" doctor | grep -q '\[ ok \] read-only mount namespace.*(in a user namespace)'
	ok $? "doctor: without root the namespace is made in a user namespace"
fi

# ---- the view ----
out=$(cd "$WS" && "$BROKERED" run -- sh -c 'python3 "$1" / "$PWD" "$TMPDIR"' sh "$TEST_DIR/mnt.py" 2>&1)
is "$(printf '%s\n' "$out" | cut -d' ' -f2 | paste -sd' ')" "ro ro rw" "the command sees / and the workspace read-only, its scratch dir writable"
is "$(python3 "$TEST_DIR/mnt.py" / "$WS" | cut -d' ' -f2 | paste -sd' ')" "rw rw" "outside the command nothing changed"

# ---- files the broker opened: metadata through the fd, no notification, undone ----
printf 'old\n' >e
chmod 644 e
touch -d '2001-01-01 00:00:00' e
before=$(tree_snapshot_full "$WS")
cat >"$TEST_DIR/meta.py" <<'EOF'
import os
fd = os.open("n", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"new file\n")
os.fchmod(fd, 0o640)
os.fchown(fd, os.getuid(), os.getgid())
os.utime(fd, ns=(1234 * 10**9, 1234 * 10**9))
os.setxattr(fd, "user.k", b"v")
os.close(fd)
fd = os.open("e", os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"changed\n")
os.fchmod(fd, 0o600)
os.utime(fd, ns=(2 * 10**18, 2 * 10**18))
os.close(fd)
try:
    os.fchmod(os.open("n", os.O_WRONLY), 0o4755)
    print("setuid: allowed")
except OSError as e:
    print("setuid:", e.strerror)
EOF
out=$(brk run -- python3 "$TEST_DIR/meta.py" 2>&1)
ok $? "fchmod, fchown, futimens, fsetxattr on files the broker opened work (status)"
is "$out" "setuid: Operation not permitted" "fchmod to a set-ID mode still goes to the broker, which refuses it"
is "$(stat -c '%a %Y' n)" "640 1234" "new file: mode and mtime set through its fd"
is "$(python3 -c 'import os; print(os.getxattr("n", "user.k").decode())' 2>&1)" v "new file: xattr set through its fd"
is "$(cat e; stat -c '%a %Y' e)" "changed
600 2000000000" "existing file: content, mode and mtime changed through its fd"
is "$(audit_log | grep -cE ' op=(chmod|chown|utimes|setxattr) ')" 1 "the audit log has no metadata call but the refused set-ID one"
audit_grep chmod "$WS/n" '' | grep -q " result=EPERM .*rule=setid"
ok $? "the refused fchmod 04755 is in the audit log (result=EPERM, rule=setid)"
brk undo </dev/null >/dev/null 2>&1
ok $? "undo"
is_snap "$(tree_snapshot_full "$WS")" "$before" "undo: the new file is gone, the old one has its content, mode and mtime back"

# ---- files the command opened itself: EROFS, nothing changes ----
printf 'x\n' >mine
printf 'y\n' >"$OUTSIDE/theirs"
cat >"$TEST_DIR/own.py" <<'EOF'
import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    for what, call in (("fchmod", lambda: os.fchmod(fd, 0o600)),
                       ("fchown", lambda: os.fchown(fd, 0, 0)),
                       ("futimens", lambda: os.utime(fd, ns=(5, 5))),
                       ("fsetxattr", lambda: os.setxattr(fd, "user.z", b"1"))):
        try:
            call()
            print(what, "ok")
        except OSError as e:
            print(what, e.strerror)
EOF
before=$(tree_snapshot_full "$WS"; tree_snapshot_full "$OUTSIDE")
out=$(brk run -- python3 "$TEST_DIR/own.py" mine "$OUTSIDE/theirs" 2>&1)
is "$(printf '%s\n' "$out" | sort -u)" "fchmod Read-only file system
fchown Read-only file system
fsetxattr Read-only file system
futimens Read-only file system" "metadata calls on files the command opened itself: EROFS, inside and outside the workspace"
is_snap "$(tree_snapshot_full "$WS"; tree_snapshot_full "$OUTSIDE")" "$before" "and nothing changed"
brk run -- sh -c 'chmod 600 mine && touch -d 2003-03-03 mine'
is "$(stat -c %a mine)" 600 "chmod and touch by path are brokered as always"

# ---- access(W_OK): the answer of the file's own mount, with the command's ids ----
cat >"$TEST_DIR/access.py" <<'EOF'
import os
print(os.access("mine", os.W_OK), os.access(".", os.W_OK | os.X_OK), os.access("nothing", os.W_OK),
      os.access("mine", os.W_OK, effective_ids=True), os.access("link", os.W_OK, follow_symlinks=False),
      os.access("/proc/version", os.W_OK), os.access("mine", os.R_OK))
EOF
setup_access() { printf 'x\n' >mine && ln -s mine link; }
twin_check "access(W_OK) as root" setup_access python3 "$TEST_DIR/access.py"
if command -v setpriv >/dev/null; then
	twin_check "access(W_OK) as nobody on root's files" setup_access \
		setpriv --reuid=65534 --regid=65534 --clear-groups python3 "$TEST_DIR/access.py"
fi
twin_check "test -w, test -w on a directory, on a missing file" setup_access \
	sh -c 'test -w mine; echo $?; test -w .; echo $?; test -w nothing; echo $?'

# ---- relative paths, magic links, sockets, the scratch dir: as natively ----
setup_rel() { mkdir -p a/b && printf 'one\n' >a/b/f && printf 's/one/two/\n' >a/prog.sed && ln -s b/f a/l; }
cat >"$TEST_DIR/rel.sh" <<'EOF'
set -e
cd a/b
mkdir -p c/d && touch c/d/new && ln -s ../f c/up && mkfifo fifo && mv c/d c/e
printf 'more\n' >>f && sed -i -f ../prog.sed f && cp -p f g && rm c/e/new
exec 3<g
printf 'through fd 3\n' >/proc/self/fd/3
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind("sock"); s.close()'
test -S sock && rm sock
tar --mtime=@0 --owner=0 --group=0 -cf ../t.tar f g && mkdir x && tar xf ../t.tar -C x
install -m 755 f ../installed
t=$(mktemp) && printf 'tmp\n' >"$t" && mv "$t" fromtmp
cd .. && rm -r b/x && echo done
EOF
twin_check "relative paths, /proc/self/fd/N, a socket, tar, sed -i, install, the scratch dir" setup_rel sh "$TEST_DIR/rel.sh"
after=$(tree_snapshot_any "$TWIN_BRK")
(cd "$TWIN_BRK" && "$BROKERED" undo </dev/null >/dev/null 2>&1)
ok $? "undo of that run"
rm -rf "$TEST_DIR/fresh" && mkdir -p "$TEST_DIR/fresh" && (cd "$TEST_DIR/fresh" && setup_rel)
is_snap "$(tree_snapshot_any "$TWIN_BRK")" "$(tree_snapshot_any "$TEST_DIR/fresh")" \
	"undo: the tree is as it was before the run"
[ "$after" != "$(tree_snapshot_any "$TEST_DIR/fresh")" ]
ok $? "(the run had changed it)"

PATH=$PATH:/usr/sbin
if command -v chroot >/dev/null && [ "$(id -u)" -eq 0 ]; then # chroot(2) takes root
	out=$(brk run -- sh -c 'chroot --userspec=nobody / id -u; cd / && chroot . true && echo dot' 2>&1)
	is "$out" "65534
dot" "chroot to / (absolute and relative) is still a no-op that works"
fi

# ---- a rule that tells metadata from writes keeps the default mode ----
settings "{\"sandbox\": {\"fileBackup\": {\"sync\": false}, \"readOnlyMounts\": true, \"fileSafety\": {\"rules\": [{\"path\": \"$WS/locked\", \"access\": \"metadata\", \"decision\": \"deny\"}]}}}"
printf 'l\n' >locked
is "$(brk run -- python3 "$TEST_DIR/mnt.py" / | cut -d' ' -f2)" rw "a metadata-only rule: no read-only mounts"
brk run -- python3 -c 'import os; fd = os.open("locked", os.O_WRONLY); os.fchmod(fd, 0o600)' 2>/dev/null
[ $? -ne 0 ] && [ "$(stat -c %a locked)" != 600 ]
ok $? "a metadata-only rule: fchmod through a write fd is still refused"
settings '{"sandbox": {"fileBackup": {"sync": false}, "readOnlyMounts": false}}'
is "$(brk run -- python3 "$TEST_DIR/mnt.py" / | cut -d' ' -f2)" rw "readOnlyMounts false: no read-only mounts"

BROKERED_PRETEND_MISSING=mountns fallback_checks
done_testing
