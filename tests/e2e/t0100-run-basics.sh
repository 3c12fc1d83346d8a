#!/usr/bin/env bash
# brokered run / run -c / sh -c / brokered-sh: the command line contract of issue 2 — the three
# ways in, argv and stdio pass-through, exit status, /dev/null and /dev/stdout, TMPDIR, reads.
. "$(dirname "$0")/../lib.sh"
require_core

BRK_SH="$(dirname "$BROKERED")/brokered-sh"
WSP=$(pwd -P)

# ---- the three ways in ----
brk run -c 'echo x > f'
is "$?" 0 "run -c: exit 0"
is "$(cat f 2>&1)" x "run -c: 'echo x > f' wrote f"
audit_names open "$WSP/f" allow
ok $? "run -c: audit line op=open for the real path of f"

out=$(brk sh -c 'echo y > g; cat g')
is "$?" 0 "sh -c: exit 0"
is "$out" y "sh -c: stdout of the command"
is "$(cat g 2>&1)" y "sh -c: g written"

if [ -x "$BRK_SH" ]; then
	out=$("$BRK_SH" -c 'echo z > h; cat h')
	is "$?" 0 "brokered-sh -c: exit 0"
	is "$out" z "brokered-sh -c: stdout"
	is "$(cat h 2>&1)" z "brokered-sh -c: h written"
	out=$("$BRK_SH" -c 'printf "%s|" "$0" "$@"' zero one 'two words')
	is "$out" "zero|one|two words|" "brokered-sh -c STRING ARG0 ARGS: \$0 and \$@ as with sh -c"
else
	skip "brokered-sh -c" "no brokered-sh next to $BROKERED"
fi
out=$(brk sh -c 'printf "%s|" "$0" "$@"' zero one 'two words')
is "$out" "zero|one|two words|" "sh -c STRING ARG0 ARGS: \$0 and \$@ as with sh -c"

# ---- argv and stdio ----
out=$(brk run -- printf '%s|' 'a b' '' 'c*' '$HOME' "-n")
is "$out" 'a b||c*|$HOME|-n|' "run --: argv passed verbatim (spaces, empty, glob, \$, leading dash)"
out=$(printf 'from-stdin\n' | brk run -- cat)
is "$out" from-stdin "run --: stdin reaches the command"
out=$(brk run -- sh -c 'echo to-err >&2' 2>&1 >/dev/null)
is "$out" to-err "run --: stderr of the command is passed through unchanged"
out=$(brk run -- echo hi)
is "$out" hi "run --: stdout belongs to the command (nothing else on it)"

# ---- exit status ----
brk run -- sh -c 'exit 3'
is "$?" 3 "run --: exit 3 passed through"
brk run -c 'exit 3'
is "$?" 3 "run -c: exit 3 passed through"
brk sh -c 'exit 3'
is "$?" 3 "sh -c: exit 3 passed through"
brk run -- false
is "$?" 1 "run -- false: 1"

err=$(brk run -- brokered-e2e-no-such-program 2>&1)
is "$?" 127 "run --: missing program gives 127"
case $err in *brokered-e2e-no-such-program*) ok 0 "run --: missing program is named on stderr" ;;
*) ok 1 "run --: missing program is named on stderr"; printf '#   stderr: %s\n' "$err" ;; esac
brk run -c 'brokered-e2e-no-such-program' 2>/dev/null
is "$?" 127 "run -c: missing program gives 127 (as sh)"
brk sh -c 'brokered-e2e-no-such-program' 2>/dev/null
is "$?" 127 "sh -c: missing program gives 127 (as sh)"

printf '#!/bin/sh\necho should-not-run\n' >noexec.sh
chmod 644 noexec.sh
out=$(brk run -- ./noexec.sh 2>/dev/null)
is "$?" 126 "run --: non-executable file gives 126"
is "$out" "" "run --: non-executable file did not run"
brk run -- "$OUTSIDE" 2>/dev/null
is "$?" 126 "run --: a directory as program gives 126"
brk run -c ./noexec.sh 2>/dev/null
is "$?" 126 "run -c: non-executable file gives 126 (as sh)"

out=$(brk run --workspace "$TEST_DIR/no-such-dir" -- sh -c 'echo ran' 2>"$TEST_DIR/err")
is "$?" 125 "run --workspace MISSING: 125"
is "$out" "" "run --workspace MISSING: the command did not run"
grep -q '^brokered:' "$TEST_DIR/err"
ok $? "run --workspace MISSING: message on stderr prefixed brokered:"
brk run --brokered-e2e-bogus-option -- true 2>/dev/null
is "$?" 125 "run with an unknown option: 125"

brk run -- sh -c 'kill -TERM $$'
is "$?" 143 "run --: command killed by SIGTERM gives 128+15"
brk run -- sh -c 'kill -KILL $$'
is "$?" 137 "run --: command killed by SIGKILL gives 128+9"
brk run -c 'kill -TERM $$'
is "$?" 143 "run -c: shell killed by SIGTERM gives 128+15"

# ---- --workspace ----
mkdir -p "$TEST_DIR/ws2"
(cd "$OUTSIDE" && "$BROKERED" run --workspace "$TEST_DIR/ws2" -- sh -c 'echo w > "$0"/f' "$TEST_DIR/ws2")
is "$?" 0 "run --workspace DIR from elsewhere: exit 0"
is "$(cat "$TEST_DIR/ws2/f" 2>&1)" w "run --workspace DIR: DIR is writable"
(cd "$TEST_DIR/ws2" && "$BROKERED" run --workspace "$TEST_DIR/ws2" -- sh -c 'echo w > "$0"/f2' "$WS" 2>/dev/null)
ok $((! $?)) "run --workspace DIR: the current directory is not writable when it is not DIR"
test ! -e "$WS/f2"
ok $? "run --workspace DIR: no file created in the old cwd"

# ---- device nodes ----
brk run -c 'echo x > /dev/null && echo ok'
is "$?" 0 "write to /dev/null: exit 0"
out=$(brk run -c 'echo via-stdout > /dev/stdout')
is "$?" 0 "write to /dev/stdout (a pipe): exit 0"
is "$out" via-stdout "write to /dev/stdout (a pipe): output arrives"
out=$(brk run -c 'echo via-stderr > /dev/stderr' 2>&1)
is "$out" via-stderr "write to /dev/stderr: output arrives"
brk run -c 'echo into-file > /dev/stdout' >captured.txt
is "$?" 0 "write to /dev/stdout (a workspace file): exit 0"
is "$(cat captured.txt)" into-file "write to /dev/stdout (a workspace file): content"
out=$(brk run -- dd if=/dev/zero of=/dev/null bs=1k count=4 2>&1)
is "$?" 0 "dd of=/dev/null: exit 0"

# ---- TMPDIR ----
out=$(brk run -c 'echo t > "$TMPDIR/x" && mkdir "$TMPDIR/d" && echo u > "$TMPDIR/d/y" && cat "$TMPDIR/x" "$TMPDIR/d/y" && echo "$TMPDIR"')
is "$?" 0 "TMPDIR: writable inside the run"
tmp=$(printf '%s\n' "$out" | tail -1)
is "$(printf '%s\n' "$out" | head -2 | tr '\n' ' ')" "t u " "TMPDIR: files written there read back"
case $tmp in /*) ok 0 "TMPDIR is an absolute path ($tmp)" ;; *) ok 1 "TMPDIR is an absolute path: $tmp" ;; esac
case $tmp/ in "$WSP"/*) ok 1 "TMPDIR is outside the workspace" ;; *) ok 0 "TMPDIR is outside the workspace" ;; esac
test -n "$tmp" && test ! -e "$tmp"
ok $? "TMPDIR: removed after the run"
out2=$(brk run -c 'echo "$TMPDIR"')
test "$out2" != "$tmp"
ok $? "TMPDIR: a fresh one per run"
is "$(tree_snapshot "$WSP" | grep -c '/x\b\|/d\b')" 0 "TMPDIR: nothing of it landed in the workspace"

# ---- reads anywhere ----
is "$(brk run -- cat /etc/passwd | sha256sum)" "$(sha256sum </etc/passwd)" "read /etc/passwd"
is "$(brk run -- ls / | sort)" "$(ls / | sort)" "list /"
printf 'secret-ish\n' >"$OUTSIDE/r"
is "$(brk run -- cat "$OUTSIDE/r")" secret-ish "read a file outside the workspace"
is "$(brk run -- sh -c 'head -1 /proc/self/status')" "$(sh -c 'head -1 /proc/self/status')" "read /proc/self"
brk run -- sh -c 'exec 3<"$0" && cat <&3 >/dev/null' "$OUTSIDE/r"
is "$?" 0 "open outside file read-only through a shell redirection"

# doctor reports kcmp as the kernel answers the same call (x86_64 312, aarch64 272; KCMP_VM = 1)
if command -v python3 >/dev/null 2>&1; then
	want=$(python3 -c 'import ctypes, os
nr = {"x86_64": 312, "aarch64": 272}.get(os.uname().machine)
p = os.getpid()
libc = ctypes.CDLL(None, use_errno=True)
print("-" if nr is None else " ok " if libc.syscall(nr, p, p, 1, 0, 0) == 0 else "MISS")')
	if [ "$want" != - ]; then
		"$BROKERED" doctor 2>/dev/null | grep -qF "[$want] kcmp"
		ok $? "doctor: kcmp is [$want], as the kernel answers"
	else
		skip "doctor: kcmp" "no syscall number for $(uname -m) here"
	fi
else
	skip "doctor: kcmp" "python3 not installed"
fi

done_testing
