#!/usr/bin/env bash
# sandbox.copyOnWrite: where brokered may make a mount namespace and an overlay (root, or a user
# namespace of the command's own), the command writes the workspace through an overlay with no
# notification, and the broker merges its changes when it ends: each one decided by the policy, backed up and logged then (phase=merge). The
# result is the native one; undo gives the tree back; a change the policy refuses is left out
# (exit 121) and one that needs approval is a prompt (exit 120); writes outside the workspace fail
# with EROFS; a user or a policy that cannot have the mode keeps the default one and is told why.
. "$(dirname "$0")/../lib.sh"
require_core
need python3

settings() { printf '%s\n' "$1" >"$XDG_CONFIG_HOME/brokered/settings.json"; }
mkdir -p "$XDG_CONFIG_HOME/brokered"
COW='"fileBackup": {"sync": false}, "copyOnWrite": true'
settings "{\"sandbox\": {$COW}}"
# fstype PATH...: the file system type the command sees at each path
fstype() { brk run -- sh -c 'for p; do stat -f -c %T "$p"; done' sh "$@" 2>/dev/null | paste -sd' '; }

# The default mode, as where the overlay cannot be had (BROKERED_PRETEND_MISSING=mountns: as if).
fallback_checks() {
	"$BROKERED" doctor | grep -q '\[MISS\] copy-on-write overlay'
	ok $? "fallback: doctor says the copy-on-write overlay is missing"
	err=$(brk run -- sh -c 'printf x >f' 2>&1)
	ok $? "fallback: the command runs"
	case $err in *"sandbox.copyOnWrite is off for this run: it needs a mount namespace of its own"*) ok 0 "fallback: the run says why copy-on-write is off" ;;
	*) ok 1 "fallback: the run says why copy-on-write is off (got: $err)" ;; esac
	audit_has open "$WS/f" allow
	ok $? "fallback: the write was brokered while the command ran (default mode)"
	rm -f f
}
if ! "$BROKERED" doctor 2>/dev/null | grep -q '\[ ok \] copy-on-write overlay'; then
	fallback_checks
	if [ "${CI:-}" = true ]; then
		ok 1 "CI=true: the copy-on-write overlay must be available (root, or a user namespace)"
	fi
	done_testing
	exit
fi
BROKERED_PRETEND_MISSING=mountns fallback_checks
# Without root the overlay is made in a user namespace: renamed directories are not recorded there
# (no redirect_dir with userxattr), so renaming a directory the workspace had fails with EXDEV, as
# on any overlay without them; mv then copies it.
if [ "$(id -u)" -eq 0 ]; then redirects=1; else
	redirects=0
	"$BROKERED" doctor | grep -q '\[ ok \] copy-on-write overlay.*(in a user namespace)'
	ok $? "doctor: without root the overlay is made in a user namespace"
fi
OVL_XATTRS='^(trusted|user)\.overlay\.'

# ---- the view: the workspace is an overlay, the rest read-only ----
is "$(fstype "$WS" .)" "overlayfs overlayfs" "the command sees the workspace through an overlay"
out=$(brk run -- sh -c 'printf x >"$1/o" 2>&1; echo $?' sh "$OUTSIDE" 2>&1)
case $out in *"Read-only file system"*) ok 0 "a write outside the workspace fails with EROFS" ;;
*) ok 1 "a write outside the workspace fails with EROFS (got: $out)" ;; esac
[ ! -e "$OUTSIDE/o" ]
ok $? "and nothing was written outside"
out=$(brk run -- sh -c 'printf t >"$TMPDIR/t" && cat "$TMPDIR/t" && python3 -c "
from multiprocessing import shared_memory
m = shared_memory.SharedMemory(create=True, size=8); m.buf[0] = 7; print(m.buf[0]); m.close(); m.unlink()"' 2>&1)
is "$out" "t7" "the scratch dir and POSIX shared memory are writable"
cat >"$TEST_DIR/during.sh" <<'EOF'
printf 'during\n' >seen-during
test -e seen-during && echo inside
EOF
out=$(brk run -- sh -c ". '$TEST_DIR/during.sh'; test -e '$WS/seen-during' && echo visible" 2>&1)
is "$out" "inside
visible" "the command sees its own change at once"
is "$(cat seen-during)" during "and the change is in the workspace once merged"

# a user namespace of the command's own gives it nothing: no id map, no mount, nothing outside
if command -v unshare >/dev/null; then
	# A mount in the command's namespace is not seen from here: the command says whether it got one
	# (natively a user gets both, in a user namespace of its own).
	out=$(brk run -- sh -c 'unshare -Urm sh -c "mount -o remount,bind,rw / && echo REMOUNTED && touch \"\$1/root\"" sh "$1"
		unshare -Urm sh -c "mount -t tmpfs none \"\$1\" && echo MOUNTED" sh "$1"
		echo done' sh "$OUTSIDE" 2>&1)
	[ ! -e "$OUTSIDE/root" ]
	ok $? "a user namespace the command makes: nothing written outside"
	case $out in *MOUNTED*) ok 1 "  no remount, no mount (got: $out)" ;; *done*) ok 0 "  no remount, no mount" ;;
	*) ok 1 "  no remount, no mount (the command did not go on: $out)" ;; esac
fi

# ---- syncs: the overlay never syncs; what the command synced is on disk once merged ----
# Without it the overlay's unmount synced the whole file system (dd of 256 MiB: 6-18x native).
opts=$(brk run -- awk -v ws="$WS" '$5 == ws && / - overlay /' /proc/self/mountinfo 2>&1)
case $opts in *,volatile* | *,fsync=volatile*) ok 0 "the workspace's overlay is volatile" ;;
*) ok 1 "the workspace's overlay is volatile (got: $opts)" ;; esac
# unwritten FILE: its pages not yet written to disk (dirty or under writeback), by cachestat(2)
unwritten() {
	"$BRK_PY" - "$1" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class Range(ctypes.Structure): _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]
class Stat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("cache", "dirty", "writeback", "evicted", "recent")]
fd, st = os.open(sys.argv[1], os.O_RDONLY), Stat()
if libc.syscall(451, fd, ctypes.byref(Range(0, 0)), ctypes.byref(st), 0) < 0:
    print("cachestat: " + os.strerror(ctypes.get_errno()))
else:
    print(st.dirty + st.writeback)
PY
}
# the run says when it syncs the file system after the merge (its debug log)
synced() { BROKERED_DEBUG=1 brk run -- "$@" 2>&1 | grep -c 'synced (the command asked for it)'; }
is "$(synced sh -c 'printf x >s-sync && sync')" 1 "sync(2): the run syncs the file system after the merge"
is "$(synced "$BRK_PY" -c 'import mmap, os
fd = os.open("s-msync", os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 4096)
m = mmap.mmap(fd, 4096)
m[0] = 7
m.flush()')" 1 "msync(MS_SYNC): the run syncs the file system after the merge"
is "$(synced sh -c 'printf x >s-nosync')" 0 "no sync asked: the run syncs nothing"
# openat2(O_WRONLY | O_CREAT | O_DSYNC): the filter cannot read its flags (6.18's overlay
# writes an O_DSYNC file's data itself, but not the merge's rename of it)
is "$(synced "$BRK_PY" -c 'import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
how = (ctypes.c_uint64 * 3)(os.O_WRONLY | os.O_CREAT | os.O_DSYNC, 0o644, 0)
fd = libc.syscall(437, -100, b"s-openat2", ctypes.byref(how), ctypes.sizeof(how))
assert fd >= 0, os.strerror(ctypes.get_errno())
os.write(fd, bytes(4096))')" 1 "openat2 with O_DSYNC: the run syncs the file system after the merge"
# Linux AIO: an IOCB_CMD_FSYNC the filter cannot see inside io_submit's iocbs
out=$(BROKERED_DEBUG=1 brk run -- "$BRK_PY" -c 'import ctypes, os, platform
nr = {"x86_64": (206, 209, 208), "aarch64": (0, 2, 4)}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open("s-aio", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"aio\n")
ctx = ctypes.c_ulong(0)
assert libc.syscall(nr[0], 1, ctypes.byref(ctx)) == 0, os.strerror(ctypes.get_errno())
iocb = (ctypes.c_uint64 * 8)()  # struct iocb: 64 bytes
iocb[2] = 2 | (fd << 32)  # aio_lio_opcode = IOCB_CMD_FSYNC, aio_fildes
ptrs = (ctypes.c_void_p * 1)(ctypes.addressof(iocb))
assert libc.syscall(nr[1], ctx, 1, ptrs) == 1, os.strerror(ctypes.get_errno())
ev = (ctypes.c_int64 * 4)()
assert libc.syscall(nr[2], ctx, 1, 1, ev, None) == 1 and ev[2] == 0, "no completion"
print("fsync done")' 2>&1)
is "$(printf '%s\n' "$out" | grep -c -e '^fsync done$' -e 'synced (the command asked for it)')" 2 \
	"io_submit (AIO fsync): done, and the run syncs the file system after the merge"
if [ "$(stat -f -c %T "$WS")" = tmpfs ]; then
	ok 0 "# SKIP the workspace is on a tmpfs: nothing is ever written to disk"
elif err=$(unwritten "$TEST_DIR") && [ "${err#cachestat: }" != "$err" ]; then
	ok 0 "# SKIP no cachestat(2) (Linux 6.5) to see what is on disk: ${err#cachestat: }"
else
	for how in conv=fsync conv=fdatasync oflag=dsync oflag=sync; do
		n=$(synced dd if=/dev/zero of="s-$how" bs=64k count=32 "$how" status=none)
		is "$n $(unwritten "s-$how")" "1 0" "dd $how: synced after the merge, on disk when the run returns"
	done
	brk run -- sh -c 'dd if=/dev/zero of=s-syncfs bs=64k count=32 status=none && sync -f .'
	is "$(unwritten s-syncfs)" 0 "sync -f (syncfs): the merged file is on disk when the run returns"
	brk run -- "$BRK_PY" -c 'import os
fd = os.open("s-rwf", os.O_WRONLY | os.O_CREAT, 0o644)
os.pwritev(fd, [bytes(1 << 21)], 0, os.RWF_DSYNC)'
	is "$(unwritten s-rwf)" 0 "pwritev2 with RWF_DSYNC: the merged file is on disk when the run returns"
	# as natively, what nobody asked to sync is left to the kernel's writeback (30 s); the
	# unmount of a plain overlay would have written it
	# (three tries: another test's syncfs of this file system may write it back meanwhile)
	for _ in 1 2 3; do
		brk run -- dd if=/dev/zero of=s-none bs=64k count=32 status=none 2>/dev/null
		n=$(unwritten s-none)
		[ "$n" -gt 0 ] 2>/dev/null && break
	done
	[ "$n" -gt 0 ] 2>/dev/null
	ok $? "dd with no sync: the run did not write it to disk ($n pages still in memory)"
fi
rm -f s-*

# undo_as_fresh SETUP DESC: undo the last run in $TWIN_BRK; it must then be what SETUP makes
undo_as_fresh() {
	(cd "$TWIN_BRK" && "$BROKERED" undo </dev/null >/dev/null 2>&1)
	ok $? "undo of the run ($2)"
	chmod -R u+rwX "$TEST_DIR/fresh" 2>/dev/null # a directory of mode 500 (setup_rmtree)
	rm -rf "$TEST_DIR/fresh" && mkdir -p "$TEST_DIR/fresh" && (cd "$TEST_DIR/fresh" && "$1")
	is_snap "$(tree_snapshot_any "$TWIN_BRK")" "$(tree_snapshot_any "$TEST_DIR/fresh")" "$2"
}

# ---- a workload as natively, and undone ----
setup_work() {
	mkdir -p src/lib old/deep/er keep && printf 'one\ntwo\n' >src/a.txt && printf 'lib\n' >src/lib/l.c
	printf 'x\n' >old/deep/er/f && printf 'k\n' >keep/k && chmod 640 keep/k && ln -s a.txt src/link
	printf 'h\n' >keep/h1 && ln keep/h1 keep/h2 && mkdir -p mv-me/in && printf 'm\n' >mv-me/in/m
	touch -d '2001-02-03 04:05:06' src/a.txt keep/k
}
cat >"$TEST_DIR/work.sh" <<'EOF'
set -e
sed -i 's/two/TWO/' src/a.txt
printf 'new\n' >src/new.txt && mkdir -p gen/a/b && printf 'g\n' >gen/a/b/g && ln -s ../src gen/s
rm -rf old && chmod 600 keep/k && chmod 750 src && touch -d '2002-01-01 00:00:00' keep/h1
mkfifo fifo && mv mv-me moved && mv moved/in/m moved/m2 && rmdir moved/in
rm keep/h2 && ln -s nowhere dangling && printf 'over\n' >over && mv over src/lib/l.c
tar -cf t.tar src gen && mkdir x && tar -xf t.tar -C x && rm t.tar
python3 -c 'import os; os.rename("x/gen", "x/gen2"); os.mkdir("d", 0o700)'
echo done
EOF
twin_check "create, modify, delete, rename trees, chmod, links, fifo, tar" setup_work sh "$TEST_DIR/work.sh"
times() { (cd "$1" && stat -c '%n %Y %h %u:%g' keep/k keep/h1 && stat -c '%n %h %u:%g' src moved x/src/a.txt) 2>&1; }
is "$(times "$TWIN_BRK")" "$(times "$TWIN_NAT")" "mtimes set by the command, owners and link counts as natively"
after=$(tree_snapshot_full "$TWIN_BRK")
log=$(audit_log | grep ' phase=merge ')
case $log in *" op=unlink path=$TWIN_BRK/old/deep/er/f "*" decision=allow "*) ok 0 "the audit log has the merge's deletes" ;;
*) ok 1 "the audit log has the merge's deletes" ;; esac
audit_log | grep ' phase=merge ' | grep -q " op=open path=$TWIN_BRK/src/a.txt .* backup=saved"
ok $? "the modified file was backed up at the merge (backup=saved)"
undo_as_fresh setup_work "undo: the tree is as it was before the run"
[ "$after" != "$(tree_snapshot_full "$TWIN_BRK")" ]
ok $? "(the run had changed it)"
[ -z "$(ls -A "$XDG_STATE_HOME/brokered/cow" 2>/dev/null)" ]
ok $? "no overlay layers are left in the state dir"

# ---- the overlay's own attributes stay behind: none reaches the workspace ----
# The overlay marks what it copies up (origin), a directory renamed from the lower layer
# (redirect), one made over a removed one (opaque) and a directory that holds such entries
# (impure); the merge removes them all, from files moved one by one and from new trees moved
# whole (where only a marked directory's files are looked at).
setup_marks() {
	mkdir -p ov/d1/sub ov/d2 && printf 'c\n' >ov/d1/g && printf 'e\n' >ov/d1/sub/h
	for f in f1 f2 f3 f4 f5 inplace; do printf '%s\n' "$f" >"ov/$f"; done
}
cat >"$TEST_DIR/marks.sh" <<'EOF'
set -e
cd ov
printf 'more\n' >>inplace && mkdir -p new/deep/pure && printf 'p\n' >new/deep/pure/p
printf 'x\n' >>f1 && mv f1 new/ && ln f2 new/deep/l2 && mv d1 new/deep/ && chmod 600 f3
mv f3 new/deep/ && rm f4 && printf 'z\n' >f4 && rm -rf d2 && mkdir d2 && printf 'y\n' >d2/y
mkdir new2 && mv f5 new2/ && printf 'in\n' >>new/deep/d1/g
EOF
twin_check "copy-ups, renames, links and new trees in the overlay" setup_marks sh "$TEST_DIR/marks.sh"
marks=$(cd "$TWIN_BRK" && getfattr -R -h -d -m "$OVL_XATTRS" --absolute-names . 2>&1)
is "$marks" "" "no trusted.overlay.* or user.overlay.* attribute on any merged path"
# the same commands in an overlay of our own: its upper layer has such marks to remove
mkdir -p "$TEST_DIR/ovl/l" "$TEST_DIR/ovl/u" "$TEST_DIR/ovl/w" "$TEST_DIR/ovl/m"
(cd "$TEST_DIR/ovl/l" && setup_marks)
if [ $redirects = 1 ]; then
	unshare -m sh -c 'mount -t overlay overlay -o "lowerdir=$1/l,upperdir=$1/u,workdir=$1/w,redirect_dir=on,metacopy=off,index=off" "$1/m" && cd "$1/m" && sh "$2"' sh "$TEST_DIR/ovl" "$TEST_DIR/marks.sh"
else
	unshare -U -m -r sh -c 'mount -t overlay overlay -o "lowerdir=$1/l,upperdir=$1/u,workdir=$1/w,userxattr,metacopy=off,index=off" "$1/m" && cd "$1/m" && sh "$2"' sh "$TEST_DIR/ovl" "$TEST_DIR/marks.sh"
fi
marked=$(cd "$TEST_DIR/ovl/u" && getfattr -R -h -m "$OVL_XATTRS(origin|redirect|opaque)" --absolute-names . 2>/dev/null | grep -c '^# file:')
[ "$marked" -ge 2 ]
ok $? "(an overlay marks such paths in its upper layer: $marked here)"
chmod -R u+rwx "$TEST_DIR/ovl" 2>/dev/null

# ---- git: a repository made, committed, branched, a directory moved ----
if command -v git >/dev/null; then
	setup_git() { mkdir -p pkg && printf 'v1\n' >pkg/m.c; }
	cat >"$TEST_DIR/git.sh" <<'EOF'
set -e
export GIT_AUTHOR_DATE='2001-01-01T00:00:00Z' GIT_COMMITTER_DATE='2001-01-01T00:00:00Z'
git init -q -b main . && git add -A && git -c user.name=t -c user.email=t@e commit -qm one
git checkout -qb topic
if [ -n "${GIT_MV_FILE:-}" ]; then mkdir lib && git mv pkg/m.c lib/m.c; else git mv pkg lib; fi
printf 'v2\n' >lib/m.c
git -c user.name=t -c user.email=t@e commit -qam two && git checkout -q main && git log --oneline | wc -l
rm .git/index # a cache of inode numbers and times, never the same twice
EOF
	if [ $redirects = 0 ]; then # a file moved instead of the directory the workspace had
		export GIT_MV_FILE=1
		mkdir -p pkg && printf 'v1\n' >pkg/m.c
		out=$(brk run -- sh -c 'git init -q . && git add -A && git mv pkg lib' 2>&1)
		case $out in *"Invalid cross-device link"*) ok 0 "without root: git mv of a directory the workspace had fails with EXDEV" ;;
		*) ok 1 "without root: git mv of a directory the workspace had fails with EXDEV (got: $out)" ;; esac
		[ -f pkg/m.c ] && [ ! -e lib ]
		ok $? "  and leaves it where it was"
		rm -rf .git pkg
	fi
	twin_check "git init, commit, branch, git mv, checkout" setup_git sh "$TEST_DIR/git.sh"
	unset GIT_MV_FILE
	is "$(git -C "$TWIN_BRK" log --format=%H topic)" "$(git -C "$TWIN_NAT" log --format=%H topic)" \
		"the user's git reads the same history"
	# git at work on a repository the workspace had: what it rewrites, moves and links is
	# copied up by the overlay (and marked there), and merged back without the marks
	setup_repo() {
		export GIT_AUTHOR_DATE='2001-01-01T00:00:00Z' GIT_COMMITTER_DATE='2001-01-01T00:00:00Z'
		mkdir -p src/basic doc && printf 'a\n' >src/basic/a.c && printf 'm\n' >src/main.c
		printf 'r\n' >README && git init -q -b main . && git add -A &&
			git -c user.name=t -c user.email=t@e commit -qm one
	}
	cat >"$TEST_DIR/git-repo.sh" <<'EOF'
set -e
export GIT_AUTHOR_DATE='2001-01-01T00:00:00Z' GIT_COMMITTER_DATE='2001-01-01T00:00:00Z'
g() { git -c user.name=t -c user.email=t@e "$@"; }
g checkout -qb work && g mv "${GIT_MV_SRC:-src/basic}" src/base && printf 'more\n' >>README
g stash -q && g stash pop -q && g commit -qam moved && g checkout -q main
printf 'main\n' >>src/main.c && g commit -qam main && g merge -q --no-edit work
mkdir -p doc/deep && ln src/main.c doc/deep/main-link && mv src/base doc/deep/ && g gc -q
g log --oneline | wc -l
rm .git/index # a cache of inode numbers and times, never the same twice
EOF
	[ $redirects = 1 ] || export GIT_MV_SRC=src/basic/a.c # without root: a file, not a directory
	twin_check "git on a repository the workspace had: branch, mv, stash, merge, gc" setup_repo \
		sh "$TEST_DIR/git-repo.sh"
	unset GIT_MV_SRC
	is "$(git -C "$TWIN_BRK" log --format=%H main)" "$(git -C "$TWIN_NAT" log --format=%H main)" \
		"  the user's git reads the same history"
	marks=$(cd "$TWIN_BRK" && getfattr -R -h -d -m "$OVL_XATTRS" --absolute-names . 2>&1)
	is "$marks" "" "  no overlay attribute left by git's changes (git's objects are read-only)"
fi

# ---- the policy at the merge: refused, prompted, set-ID ----
printf 'mine\n' >kept
out=$(brk run -- sh -c 'mkdir -p .brokered && printf x >.brokered/settings.json; printf y >allowed; printf z >kept' 2>&1)
is "$?" 121 "a change the policy refuses: exit 121 though the command succeeded"
[ ! -e .brokered/settings.json ] && [ "$(cat allowed)" = y ] && [ "$(cat kept)" = z ]
ok $? "the refused change is left out, the others are merged"
case $out in *"refused by the policy and not merged"*"$WS/.brokered"*) ok 0 "the run names what it left out" ;;
*) ok 1 "the run names what it left out (got: $out)" ;; esac
audit_log | grep ' phase=merge ' | grep -q " path=$WS/.brokered .*decision=deny"
ok $? "the refusal is in the audit log (phase=merge, decision=deny)"
out=$(brk run --json -- sh -c 'mkdir -p .brokered/x' 2>&1 >/dev/null | tail -1)
is "$(printf '%s' "$out" | "$BRK_PY" -c 'import json, sys; r = json.load(sys.stdin); print(r["exitStatus"], r["commandExitStatus"], r["notMerged"])')" \
	"121 0 ['$WS/.brokered']" "--json: exitStatus 121, the command's 0, notMerged names the path"

mkdir -p repo/.git/hooks
brk run -- sh -c 'printf "#!/bin/sh\n" >repo/.git/hooks/pre-commit && chmod +x repo/.git/hooks/pre-commit' \
	</dev/null >/dev/null 2>&1
is "$?" 120 "a hook written by the command needs approval: exit 120"
[ ! -e repo/.git/hooks/pre-commit ]
ok $? "and it is not in the workspace"

printf '#!/bin/sh\n' >prog
brk run -- sh -c 'chmod 4755 prog && cp prog prog2 && chmod 2755 prog2' >/dev/null 2>&1
is "$(stat -c %a prog prog2 | paste -sd' ')" "755 755" "set-ID bits are dropped at the merge (sandbox.allowSetid off)"

# ---- directories the command left without write or search rights for their owner ----
# Without root the merge has to open them up to fill them (and sets their modes last).
setup_perm() { mkdir -p docs && printf 'd\n' >docs/d; }
twin_check "a directory filled, then made read-only; a new tree made read-only" setup_perm \
	sh -c 'printf n >docs/n && chmod 555 docs && mkdir -p new/in && printf x >new/in/f && chmod 500 new/in && chmod 555 new'
undo_as_fresh setup_perm "undo of the read-only directories"
chmod -R u+rwx "$TEST_DIR/twin" "$TEST_DIR/fresh"
rm -rf docs

# ---- renamed directories: swapped, moved onto a removed one, nested ----
if [ $redirects = 0 ]; then
	mkdir -p sw1 && printf 1 >sw1/f
	out=$(brk run -- python3 -c 'import os
try:
    os.rename("sw1", "sw3")
except OSError as e:
    print(e.strerror)
os.mkdir("n"); os.rename("n", "n2"); print(os.path.isdir("n2"), os.path.isdir("sw1"))' 2>&1)
	is "$out" "Invalid cross-device link
True True" "without root: rename(2) of a directory the workspace had: EXDEV; of a new one: done"
	out=$(brk run -- sh -c 'mv sw1 sw3 && cat sw3/f' 2>&1)
	is "$out$(cat sw3/f)" 11 "  mv copies it instead, and the copy is merged"
	rm -rf sw1 sw3 n2
fi
[ $redirects = 1 ] && mkdir -p sw1 sw2 docs src/in old/in && printf 1 >sw1/f && printf 2 >sw2/f && printf d >docs/d &&
	printf s >src/in/s && printf o >old/in/f
before=$(tree_snapshot_any "$WS")
brk run -- sh -c 'python3 -c "import os; os.rename(\"sw1\", \"t\"); os.rename(\"sw2\", \"sw1\"); os.rename(\"t\", \"sw2\")" &&
	rm -rf docs && mv src docs && mv docs/in docs/out &&
	mkdir -p new/deeper && python3 -c "import os; os.rename(\"old\", \"new/deeper/old\")" && printf g >new/deeper/old/in/g' \
	>/dev/null 2>&1
if [ $redirects = 1 ]; then
	ok $? "directories swapped, moved onto a removed one, moved again, moved into new ones: merged"
	is "$(cat sw1/f sw2/f docs/out/s new/deeper/old/in/f new/deeper/old/in/g; ls docs | paste -sd' ')" "21sogout" \
		"each is where the command left it, with what it held"
	[ ! -e old ] && [ ! -e src ]
	ok $? "and gone from where it was"
	brk undo </dev/null >/dev/null 2>&1
	is_snap "$(tree_snapshot_any "$WS")" "$before" "undo puts them back"
fi
[ -z "$(ls -A "$XDG_STATE_HOME/brokered/cow" 2>/dev/null)" ]
ok $? "no overlay layers are left in the state dir"

# ---- directories renamed in chains and cycles: each as native, and undone ----
# The merge renames them before anything else; a destination the workspace still has may be the
# source of another rename (a rotation found by t0300, seed 3118405: the merge failed, 125; a chain
# merged silently wrong, with one tree's files left only in the store).
setup_renames() {
	mkdir -p a/sub b c d/e && printf A >a/fa && printf S >a/sub/fs && printf B >b/fb &&
		printf C >c/fc && printf E >d/e/fe
}
while IFS='|' read -r desc cmd; do
	twin_check "$desc" setup_renames sh -c "$cmd"
	(cd "$TWIN_BRK" && "$BROKERED" undo </dev/null >/dev/null 2>&1)
	ok $? "$desc: undo exits 0"
	(cd "$TEST_DIR" && rm -rf undone && mkdir undone && cd undone && setup_renames)
	is "$(tree_snapshot_any "$TWIN_BRK")" "$(tree_snapshot_any "$TEST_DIR/undone")" "$desc: undo puts it back"
done <<'EOF_RENAMES'
a chain (b moved away, a takes its name)|mv b c2 && mv a b
a rotation (b moved into a, a takes its name)|mv b a/sub/x && mv a b
a swap through a temporary name|mv a t && mv b a && mv t b
a cycle of three|mv a t && mv b a && mv c b && mv t c
a cycle of four|mv a t && mv b a && mv c b && mv d c && mv t d
a nested chain of three|mv a b/in && mv b c/in && mv c a
a rotation, then a move into the moved tree|mv b a/x && mv a b && mv c b/x/y
onto a removed directory, then a chain|rm -rf c && mv a c && mv b a
a rename onto a FIFO that fails (a redirect naming itself)|mkfifo p; mv a p 2>/dev/null; mv a/sub s && mv s a/sub
into a directory made again|rm -rf a && mkdir -p a/p && mv b a/p/q
a directory made again, its old child moved back into it|mv a/sub s && rm -rf a && mkdir a && mv s a/sub
a child takes its parent's place|mv a/sub s && mv a/fa f && rm -rf a && mv s a && mv f a/fa
a directory moved into itself made again|mv a x && mkdir -p a/y && mv x a/y/z
a chain into a directory made again|rm -rf b && mkdir b && mv a b/a && mv c a
EOF_RENAMES
twin_check "a directory moved away and back" setup_renames sh -c 'mv a x && mv x a'
# A directory that becomes the child of its former child: not merged (125), nothing lost.
(cd "$TEST_DIR" && rm -rf swapdown && mkdir swapdown && cd swapdown && setup_renames)
swapdown=$(cd "$TEST_DIR/swapdown" && pwd -P)
before=$(tree_snapshot_any "$swapdown")
(cd "$swapdown" && "$BROKERED" run -- sh -c 'mv a/sub o && mv a t && mv o a && mv t a/t' </dev/null >/dev/null 2>"$TEST_DIR/swapdown.err")
st=$?
if [ $redirects = 1 ]; then
	is "$st" 125 "a directory that becomes the child of its former child: not merged (125)"
	grep -q 'Failed to merge some of the command.s changes' "$TEST_DIR/swapdown.err"
	ok $? "... and it says so"
else # mv copied the trees: nothing for the merge to refuse
	is "$st" 0 "without root: a directory that becomes the child of its former child, by copies: merged"
fi
[ -z "$(cd "$swapdown" && ls -A | grep brokered-merge)" ]
ok $? "... no name of the merge's own is left in the workspace"
(cd "$swapdown" && "$BROKERED" undo </dev/null >/dev/null 2>&1)
is_snap "$(tree_snapshot_any "$swapdown")" "$before" "... and undo puts the tree back"
rm -rf "$XDG_STATE_HOME"/brokered/cow/run-*

# ---- a removed tree kept whole: one rename into the store, every path recorded ----
setup_rmtree() {
	mkdir -p tree/a/b tree/empty tree/locked/in shared && printf 'one\n' >tree/a/f
	printf 'two\n' >tree/a/b/g && chmod 600 tree/a/b/g && ln -s f tree/a/link && mkfifo tree/fifo
	printf 'in\n' >tree/locked/in/x && chmod 500 tree/locked/in && touch -d '2001-02-03 04:05:06' tree/a/f
	printf 'h\n' >shared/h && ln shared/h outside-name && printf 's\n' >shared/s
}
twin_check "rm -rf of trees" setup_rmtree sh -c 'chmod 700 tree/locked/in && rm -rf tree shared'
turn=$(cd "$TWIN_BRK" && last_turn_id)
trees=$(ls "$XDG_STATE_HOME"/brokered/sessions/*/modify_backup/turns/"$turn"/trees 2>/dev/null | wc -l)
is "$trees" 1 "the tree went into the store whole; the one with a file of two names path by path"
is "$(audit_log | grep ' phase=merge ' | grep -c " op=unlink path=$TWIN_BRK/tree[/ ].*decision=allow .*backup=saved")" 11 \
	"every path of the kept tree is logged as removed and backed up"
(cd "$TWIN_BRK" && "$BROKERED" diff "$turn" -- tree/a/b/g 2>&1 | grep -qx -- '-two')
ok $? "diff shows a kept tree's file as it was"
undo_as_fresh setup_rmtree "undo: every path of both trees is back, with its mode and content"
is "$(cd "$TWIN_BRK" && stat -c '%n %a %Y' tree/a/f && stat -c '%n %a' tree/a/b/g tree/locked/in)" \
	"tree/a/f 644 $(date -d '2001-02-03 04:05:06' +%s)
tree/a/b/g 600
tree/locked/in 500" "undo: the modes and mtimes the tree had"
# a kept file changed in the store since (not the inode recorded): undo refuses to restore it
(cd "$TWIN_BRK" && "$BROKERED" run -- sh -c 'chmod 700 tree/locked/in && rm -rf tree' </dev/null >/dev/null 2>&1)
turn=$(cd "$TWIN_BRK" && last_turn_id)
printf 'tampered\n' >"$(ls -d "$XDG_STATE_HOME"/brokered/sessions/*/modify_backup/turns/"$turn"/trees/*)/a/f"
(cd "$TWIN_BRK" && "$BROKERED" undo </dev/null >/dev/null 2>&1)
[ "$?" -ne 0 ] && [ ! -e "$TWIN_BRK/tree/a/f" ] && [ "$(cat "$TWIN_BRK/tree/a/b/g")" = two ]
ok $? "undo restores the rest, not a kept file that changed since, and fails"

# ---- a replaced file kept by a move: the file itself goes into the store (no copy, no hash) ----
setup_edit() {
	for i in 1 2 3; do printf 'v1 %s\n' "$i" >"e$i"; done
	chmod 600 e2 && touch -d '2001-02-03 04:05:06' e3 && printf 'v1 h\n' >h && ln h h-too
	stat -c %i e1 >"../$(basename "$PWD").e1-inode"
}
twin_check "sed -i over files" setup_edit sh -c 'sed -i s/v1/v2/ e1 e2 e3 h'
turn=$(cd "$TWIN_BRK" && last_turn_id)
manifest=$(ls "$XDG_STATE_HOME"/brokered/sessions/*/modify_backup/turns/"$turn"/manifest)
kept=$(ls -d "${manifest%/manifest}"/trees/f* 2>/dev/null)
is "$(cd "$kept$TWIN_BRK" 2>/dev/null && stat -c '%n %a %s' e1 e2 e3 && cat e1)" "e1 644 5
e2 600 5
e3 644 5
v1 1" "the replaced files are in the store's file tree at their paths, with their modes"
is "$(stat -c %Y "$kept$TWIN_BRK/e3" 2>/dev/null)" "$(date -d '2001-02-03 04:05:06' +%s)" "... and mtimes"
is "$(grep " p=$TWIN_BRK/e[123] .* kt=f[^ ]* ka=0 " "$manifest" | grep -vc ' h=')" 3 "... each recorded with its tree, no hash"
[ ! -e "$kept$TWIN_BRK/h" ] && grep -q " p=$TWIN_BRK/h h=[0-9a-f]\{64\} " "$manifest"
ok $? "a file with two names is kept by its content (the store must not share it)"
is "$(stat -c %i "$kept$TWIN_BRK/e1" 2>/dev/null)" "$(cat "$TWIN_BRK/../brokered.e1-inode")" \
	"the store holds the very inode that was replaced"
(cd "$TWIN_BRK" && "$BROKERED" diff "$turn" -- e1 2>&1 | grep -qx -- '-v1 1')
ok $? "diff shows a file kept by a move as it was"
undo_as_fresh setup_edit "undo: every file back, with its mode and mtime"

# ---- the broker killed in the middle of the merge: what it merged is undone ----
k="$TEST_DIR/killed"
mkdir -p "$k" && k=$(cd "$k" && pwd -P)
for d in $(seq 1 30); do mkdir -p "$k/big/d$d" && for f in $(seq 1 100); do printf '%s\n' "$d.$f" >"$k/big/d$d/f$f"; done; done
mkdir -p "$k/edit" && for f in $(seq 1 200); do printf 'v1 %s\n' "$f" >"$k/edit/e$f"; done
before=$(tree_snapshot_full "$k")
cat >"$TEST_DIR/killer.py" <<'EOF'
import os, signal, subprocess, sys
top, brokered = sys.argv[1], sys.argv[2]
p = subprocess.Popen([brokered, "run", "--", "sh", "-c", "sed -i s/v1/v2/ edit/* && rm -rf big"], cwd=top,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
# the merge has begun once a file of the tree is gone from the workspace itself (from any of its
# directories: the merge removes them in the order the directory lists them)
big = [os.path.join(top, "big", d) for d in os.listdir(os.path.join(top, "big"))]
def whole():
    try:
        return sum(len(os.listdir(d)) for d in big) == 100 * len(big)
    except FileNotFoundError:
        return False
while p.poll() is None and whole():
    pass
killed = p.poll() is None
if killed:
    os.kill(p.pid, signal.SIGKILL)
p.wait()
print("killed" if killed else "finished")
EOF
out=$("$BRK_PY" "$TEST_DIR/killer.py" "$k" "$BROKERED")
is "$out" killed "the broker was killed while it merged"
[ "$(tree_snapshot_full "$k")" != "$before" ]
ok $? "(the merge had changed the workspace)"
id=$(cd "$k" && last_turn_id)
(cd "$k" && "$BROKERED" turn commit --turn "$id" -m "committed after kill" >/dev/null 2>&1)
is "$?" 0 "the interrupted turn commits"
(cd "$k" && "$BROKERED" undo "$id" </dev/null >/dev/null 2>&1)
is "$?" 0 "and undoes"
no_nlink() { printf '%s\n' "$1" | sed 's/ nlink=[0-9]*$//'; }
is_snap "$(no_nlink "$(tree_snapshot_full "$k")")" "$(no_nlink "$before")" \
	"undo after the kill: every file is back as it was"
# the killed run's layers stay until gc takes them (its process is gone); a live run's stay
layers=$(ls -d "$XDG_STATE_HOME"/brokered/cow/run-* 2>/dev/null | wc -l)
is "$layers" 1 "the killed run left its overlay layers in the state dir"
mkdir -p "$XDG_STATE_HOME/brokered/cow/run-$$-live"
touch -d '2 days ago' "$XDG_STATE_HOME"/brokered/cow/run-*
out=$(cd "$k" && "$BROKERED" gc --older-than 1d --json 2>&1)
is "$(printf '%s' "$out" | "$BRK_PY" -c 'import json, sys; print(json.load(sys.stdin)["copyOnWriteLayersRemoved"])')" 1 \
	"gc --older-than 1d removes the layers of the run that is gone"
is "$(cd "$XDG_STATE_HOME/brokered/cow" && ls)" "run-$$-live" "and keeps those of a live process"
rm -rf "$XDG_STATE_HOME/brokered/cow"

# ---- fallbacks: a rule that allows writes outside the workspace ----
settings "{\"sandbox\": {$COW, \"fileSafety\": {\"rules\": [{\"path\": \"$OUTSIDE/w\", \"access\": \"write\", \"decision\": \"allow\"}]}}}"
out=$(brk run -- sh -c 'printf w >"$1/w"' sh "$OUTSIDE" 2>&1)
ok $? "a rule allowing writes outside the workspace: the write works"
case $out in *"sandbox.copyOnWrite is off for this run: a rule allows writes outside the workspace"*) ok 0 "and the run says why copy-on-write is off" ;;
*) ok 1 "and the run says why copy-on-write is off (got: $out)" ;; esac
settings "{\"sandbox\": {$COW}}"
BROKERED_PRETEND_MISSING=overlay "$BROKERED" doctor | grep -q '\[MISS\] copy-on-write overlay'
ok $? "doctor says MISS without an overlay"

done_testing
