#!/usr/bin/env bash
# Escape suite, set-user-ID and set-group-ID files: they outlive the sandbox (a root-run command
# could leave a root-owned setuid program for anyone to run). chmod that adds the bits is refused
# (EPERM), new files lose them, directories keep set-group-ID; sandbox.allowSetid lets them through.
. "$(dirname "$0")/../lib.sh"
require_core

printf 'x\n' >f
cp /bin/true prog
mkdir d
brk run -c 'chmod 4755 f' 2>err </dev/null
ok $(($? == 0)) "chmod 4755 fails"
grep -q 'Operation not permitted' err
ok $? "  with 'Operation not permitted'"
is "$(stat -c %a f)" 644 "  the mode is unchanged"
audit_grep chmod "$WS/f" '' | grep -q " result=EPERM .*rule=setid"
ok $? "  the audit log has the refusal (result=EPERM, rule=setid)"
brk run -c 'chmod g+s prog' 2>/dev/null </dev/null
ok $(($? == 0)) "chmod g+s on an executable fails"
is "$(stat -c %a prog)" 755 "  mode unchanged"
brk run -c 'chmod g+s d' </dev/null
ok $? "chmod g+s on a directory works"
is "$(stat -c %a d)" 2755 "  the directory is set-group-ID"
brk run -c 'install -m 4755 prog p2' 2>/dev/null </dev/null
ok $(($? == 0)) "install -m 4755 fails (its fchmod is refused)"
case $(stat -c %a p2 2>/dev/null) in 4*) ok 1 "  no setuid file left" ;; *) ok 0 "  no setuid file left" ;; esac
brk run -- python3 -c 'import os; os.close(os.open("c", os.O_CREAT | os.O_WRONLY, 0o6755))' </dev/null
ok $? "open(O_CREAT, 06755) succeeds"
is "$(stat -c %a c)" 755 "  without the set-ID bits"
brk run -- python3 -c 'import os; os.mknod("n", 0o104755)' </dev/null
ok $? "mknod(S_IFREG|04755) succeeds"
is "$(stat -c %a n)" 755 "  without the set-ID bits"
brk run -- python3 -c '
import os
fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o755)
try:
    os.fchmod(fd, 0o4755)
except PermissionError:
    print("refused")' >out </dev/null
is "$(cat out)" refused "fchmod 04755 on an O_TMPFILE file is refused"

# A file that is set-ID already may keep its bits, and lose them.
chmod 4755 prog 2>/dev/null
if [ "$(stat -c %a prog)" = 4755 ]; then
	brk run -c 'chmod 4711 prog' </dev/null
	ok $? "chmod of a file that is setuid already, keeping the bit, works"
	brk run -c 'chmod u-s prog' </dev/null
	ok $? "chmod u-s works"
	is "$(stat -c %a prog)" 711 "  the bit is gone"
else
	skip "setuid already" "this file system does not keep setuid bits"
	skip "chmod u-s" "same"
	skip "mode" "same"
fi

# sandbox.allowSetid lets them through.
mkdir -p .brokered
echo '{"sandbox.allowSetid": true}' >.brokered/settings.json
brk run -c 'chmod 4755 f' </dev/null
ok $? "with sandbox.allowSetid, chmod 4755 works"
is "$(stat -c %a f)" 4755 "  the file is setuid"
brk run -- python3 -c 'import os; os.close(os.open("c2", os.O_CREAT | os.O_WRONLY, 0o2755))' </dev/null
is "$(stat -c %a c2)" 2755 "  and a new file keeps set-group-ID"
done_testing
