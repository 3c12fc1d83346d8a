#!/usr/bin/env bash
# Raw system calls that plain tools rarely make (tests/helpers/rawsys.c): openat2, renameat2
# RENAME_EXCHANGE / RENAME_NOREPLACE, O_TMPFILE + linkat, fchmod/fchown/futimens on fds, user.*
# xattrs, mknod FIFO, a FIFO written and read — same result as natively inside the workspace,
# EACCES and nothing changed outside (chmod and friends are not covered by Landlock: the broker
# must refuse them itself).
. "$(dirname "$0")/../lib.sh"
require_core
H=$(helpers_dir) || skip_all "no helpers directory (make helpers)"
RAW=$H/rawsys
[ -x "$RAW" ] || skip_all "rawsys helper not built (make helpers)"

fixture() {
	printf 'aaa\n' >a
	printf 'bbb\n' >b
	chmod 640 b
	mkdir d
}

while IFS='~' read -r name ops rel args; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086
	twin_check "rawsys $name" fixture "$RAW" $args
	is "$(stat -c %a "$TWIN_BRK")" "$(stat -c %a "$TWIN_NAT")" "rawsys $name: mode of the workspace root as native"
	if [ "$rel" != - ]; then
		real=$TWIN_BRK/$rel
		[ "$rel" = . ] && real=$TWIN_BRK
		audit_names "$ops" "$real" allow
		ok $? "rawsys $name: audit line op=$ops names the real path of $rel"
	fi
done <<'EOF2'
openat2-new~open~n~openat2 n
openat2-over~open~a~openat2 a
exchange~rename~b~exchange a b
exchange-dir~rename~d~exchange a d
exchange-missing~rename~-~exchange a missing
noreplace-new~rename~c~noreplace a c
noreplace-exists~rename~-~noreplace a b
tmpfile-link~link|open~t~tmpfile . t
tmpfile-subdir~link|open~d/t~tmpfile d d/t
chmod-ws-root~chmod~.~chmod . 750
chmod~chmod~a~chmod a 600
fchmod~chmod~a~fchmod a 604
fchmod-dir~chmod~d~fchmod d 700
fchown~chown~a~fchown a
mkfifo~mknod~p~mkfifo p
fifo-rw~mknod~p~fifo p
pwrite~open~a~pwrite a 1 ZZ
EOF2

# futimens: the mtime is what was asked for
twin_check "rawsys futimens" fixture "$RAW" futimens a 1000000000
is "$(stat -c %Y "$TWIN_BRK/a")" 1000000000 "futimens on an fd: mtime set"
audit_names utimes "$TWIN_BRK/a" allow
ok $? "futimens: audit line op=utimes names the real path"

# user.* xattrs (supported by the file system of $TEST_DIR?)
if "$RAW" setxattr "$OUTSIDE" user.brokered-probe 1 >/dev/null 2>&1; then
	"$RAW" removexattr "$OUTSIDE" user.brokered-probe >/dev/null
	printf 'x\n' >xa
	out=$(brk run -- "$RAW" setxattr xa user.test hello 2>&1)
	is "$out" ok "setxattr user.* in the workspace: ok"
	is "$("$RAW" getxattr xa user.test 2>&1)" hello "setxattr user.*: value set"
	audit_names setxattr "$(pwd -P)/xa" allow
	ok $? "setxattr: audit line names the real path"
	out=$(brk run -- "$RAW" fsetxattr xa user.other on-fd 2>&1)
	is "$out" ok "fsetxattr on an fd in the workspace: ok"
	is "$("$RAW" getxattr xa user.other 2>&1)" on-fd "fsetxattr: value set"
	out=$(brk run -- "$RAW" removexattr xa user.test 2>&1)
	is "$out" ok "removexattr in the workspace: ok"
	"$RAW" getxattr xa user.test >/dev/null 2>&1
	ok $((! $?)) "removexattr: attribute gone"
	audit_names removexattr "$(pwd -P)/xa" allow
	ok $? "removexattr: audit line names the real path"
	printf 'o\n' >"$OUTSIDE/xo"
	"$RAW" setxattr "$OUTSIDE/xo" user.keep orig >/dev/null
	outside_check "setxattr user.* outside" "$RAW" setxattr "$OUTSIDE/xo" user.test evil
	outside_check "fsetxattr outside" "$RAW" fsetxattr "$OUTSIDE/xo" user.test evil
	outside_check "removexattr outside" "$RAW" removexattr "$OUTSIDE/xo" user.keep
	is "$("$RAW" getxattr "$OUTSIDE/xo" user.keep 2>&1)" orig "xattrs outside: unchanged"
	"$RAW" getxattr "$OUTSIDE/xo" user.test >/dev/null 2>&1
	ok $((! $?)) "xattrs outside: none added"
else
	skip "user.* xattrs" "not supported by the file system of $TEST_DIR"
fi

# ---- outside: every one refused with EACCES, nothing changed ----
(cd "$OUTSIDE" && printf 'aaa\n' >a && printf 'bbb\n' >b && mkdir -p d && touch -d @1000000000 a)
O=$(cd "$OUTSIDE" && pwd -P)
printf 'w\n' >wsfile
for args in "openat2 $O/a" "openat2 $O/new" "exchange $O/a $O/b" "noreplace $O/a $O/c" \
	"exchange wsfile $O/a" "noreplace wsfile $O/moved" "tmpfile $O t" "tmpfile . $O/t" \
	"chmod $O/a 777" "chmod $O/d 700" "fchmod $O/a 777" "fchown $O/a" "futimens $O/a 5" \
	"mkfifo $O/p" "pwrite $O/a 0 ZZ"; do
	# shellcheck disable=SC2086
	outside_check "rawsys ${args//$O/\$OUTSIDE}" "$RAW" $args
done
is "$(cat wsfile)" w "workspace file used as a rename partner: unchanged"
brk run -- "$RAW" chmod "$O/a" 777 2>"$TEST_DIR/err" >/dev/null
grep -q EACCES "$TEST_DIR/err"
ok $? "chmod outside: the error is EACCES exactly ($(cat "$TEST_DIR/err"))"
is "$(stat -c %a "$O/a")" "$(stat -c %a "$O/a")" "chmod outside: mode unchanged"

done_testing
