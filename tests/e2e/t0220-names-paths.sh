#!/usr/bin/env bash
# Hostile names and paths inside the workspace (newline, tab, invalid UTF-8, leading dash, spaces
# and =, 200-byte names, paths near PATH_MAX) work and are logged one line each; escapes (symlink
# to outside, .., /proc/self/cwd/.., a directory symlink), also from the static busybox, fail.
. "$(dirname "$0")/../lib.sh"
require_core
WSP=$(pwd -P)
long=$(printf 'n%.0s' $(seq 200))

for name in $'new\nline' $'tab\there' $'bad\xff\xfeutf8' '-leading-dash' 'sp ace=eq"q'"'" "$long"; do
	shown=$(printf '%q' "$name" | cut -c1-40)
	brk run -- sh -c 'echo data > "$1" && cp -- "$1" "$1.c" && mv -- "$1.c" "$1.m" && chmod 600 -- "$1.m" && rm -- "$1"' sh "$name"
	is "$?" 0 "name $shown: create, cp, mv, chmod, rm: exit 0"
	is "$(cat -- "$name.m" 2>&1)" data "name $shown: content of the moved copy"
	is "$(stat -c %a -- "$name.m" 2>&1)" 600 "name $shown: mode"
	test ! -e "$name"
	ok $? "name $shown: removed"
	for op in open rename chmod unlink; do
		p=$name
		[ "$op" = chmod ] && p=$name.m
		[ "$op" = rename ] && p=$name.m
		audit_names "$op" "$WSP/$p" allow
		ok $? "name $shown: audit line op=$op with the escaped real path"
	done
	rm -f -- "$name.m"
done
is "$(audit_log | grep -vc '^ts=')" 0 "audit log: every line is a whole record (no name broke a line)"

# A path near PATH_MAX: 18 levels of 200-byte directories below the workspace
rel=.
for _ in $(seq 18); do rel="$rel/$long"; done
mkdir -p "$rel"
target="$WSP/${rel#./}/f"
brk run -- sh -c 'echo deep > "$1"' sh "$rel/f"
is "$?" 0 "deep path (${#target} bytes absolute): write by relative path, exit 0"
is "$(cat "$rel/f" 2>&1)" deep "deep path: content"
brk run -- sh -c 'cd "$1" && echo deeper > g && mv g h && rm h && mkdir sub && rmdir sub && echo ok' sh "$rel" >/dev/null
is "$?" 0 "deep path: cd there, then create, mv, rm, mkdir, rmdir"
audit_names open "$target" allow
ok $? "deep path: audit line with the whole real path"

# ---- escapes ----
printf 'orig\n' >"$OUTSIDE/x"
O=$(cd "$OUTSIDE" && pwd -P)
ln -s "$O/x" link
ln -s "$O/new" dangling
ln -s "$O" dirlink
mkdir -p sub
printf 'w\n' >w
for sh in sh /bin/busybox; do
	[ -x "$sh" ] || command -v "$sh" >/dev/null || { skip "escapes with $sh" "missing"; continue; }
	run_sh=$sh
	[ "$sh" = /bin/busybox ] && run_sh="/bin/busybox sh"
	for cmd in 'echo a > link' 'echo a >> link' 'echo a > dangling' 'echo a > dirlink/x' 'echo a > dirlink/new2' \
		'echo a > ../outside/x' 'cd sub && echo a > ../../outside/x' 'echo a > /proc/self/cwd/../outside/x' \
		'cp w dirlink/new3' 'mv w dirlink/' 'ln w dirlink/hl' 'truncate -s 0 link' 'chmod 600 link' \
		'touch link' 'rm dirlink/x' 'ln -s /etc/passwd dirlink/sl' 'mkdir dirlink/d'; do
		# shellcheck disable=SC2086
		outside_check "$sh: $cmd" $run_sh -c "$cmd"
	done
done
is "$(cat w)" w "escapes: workspace source file unchanged"
test -L link && test -L dangling && test -L dirlink
ok $? "escapes: the symlinks in the workspace are still there"

done_testing
