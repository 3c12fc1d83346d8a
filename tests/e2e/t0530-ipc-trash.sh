#!/usr/bin/env bash
# Deleting to the freedesktop.org trash through the broker socket: the file moves to the home trash
# (or $topdir/.Trash-$uid on another file system) with a .trashinfo that other tools read
# (trash-list, gio), the store still records it, and `brokered trash list | restore | empty`
# work on entries made by brokered and by other tools alike.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
. "$here/lib/ipc.sh"
need python3
TRASH="$XDG_DATA_HOME/Trash"
odd=$'odd name %41 \xe9'

printf 'one\n' >"$WS/f"
printf 'odd\n' >"$WS/$odd"
mkdir -p "$WS/d/e"
printf 'deep\n' >"$WS/d/e/x"
check "serve starts with --delete-mode trash" -- start_serve --delete-mode trash

out=$(brk_client json "{\"id\":\"1\",\"operation\":\"delete\",\"path\":\"$WS/f\",\"sessionId\":\"$SID\"}")
ok $? "delete without a deleteMode uses the configured mode (trash)"
check "  the answer is ok" -- grep -q '"ok":true' <<<"$out"
check "  the file left its place" -- test ! -e "$WS/f"
is "$(cat "$TRASH/files/f" 2>/dev/null)" "one" "  it is in the home trash, content intact"
is "$(sed -n 2p "$TRASH/info/f.trashinfo")" "Path=$(python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1], safe="/-_.!~*()'"'"'"))' "$WS/f")" "  its .trashinfo has the percent-encoded path"
check "  and a DeletionDate" -- grep -qE '^DeletionDate=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$' "$TRASH/info/f.trashinfo"
is "$(stat -c %a "$TRASH" "$TRASH/files" "$TRASH/info" | tr '\n' ' ')" "700 700 700 " "  trash directories are 0700"

brk_client delete --trash "$WS/$odd" >/dev/null
ok $? "a name with spaces, % and a non-UTF-8 byte"
check "  Path= is encoded byte by byte" -- grep -q '^Path=.*/odd%20name%20%2541%20%E9$' "$TRASH/info/$odd.trashinfo"
printf 'two\n' >"$WS/f2tmp" && mv "$WS/f2tmp" "$WS/f"
brk_client delete --trash "$WS/f" >/dev/null
ok $? "the same name again"
is "$(cat "$TRASH/files/f.2" 2>/dev/null)" "two" "  becomes f.2, the first entry untouched"
brk_client delete --trash "$WS/d" >/dev/null
is $? 1 "a non-empty directory without -r is refused"
check "  and stays" -- test -f "$WS/d/e/x"
brk_client delete --trash -r "$WS/d" >/dev/null
ok $? "a tree with -r"
is "$(cat "$TRASH/files/d/e/x" 2>/dev/null)" "deep" "  is in the trash whole"
brk_client delete --trash "$OUTSIDE" >/dev/null 2>&1
is $? 1 "trashing outside the workspace is denied"
printf 'plain\n' >"$WS/plain"
mkdir -p "$WS/pd/sub" && printf 'x\n' >"$WS/pd/sub/y"
brk_client delete --unlink "$WS/plain" >/dev/null
ok $? "a delete that names deleteMode unlink, with trash configured"
check "  removes the file" -- test ! -e "$WS/plain"
check "  without trashing it" -- test ! -e "$TRASH/files/plain"
brk_client delete --unlink -r "$WS/pd" >/dev/null
ok $? "  and a tree with -r"
check "  none of whose files is trashed" -- test ! -e "$TRASH/files/y"

list=$(brk trash list)
check "brokered trash list shows the first f" -- grep -qF " $WS/f" <<<"$list"
check "  the odd name, decoded" -- grep -qaF " $WS/$odd" <<<"$list"
check "  the tree" -- grep -qF " $WS/d" <<<"$list"
if command -v trash-list >/dev/null 2>&1; then
	tl=$(trash-list 2>&1)
	check "trash-list (trash-cli) sees brokered's entries" -- grep -qF " $WS/f" <<<"$tl"
	check "  the tree too" -- grep -qF " $WS/d" <<<"$tl"
else
	skip "trash-list sees brokered's entries" "trash-cli not installed"
fi
if command -v gio >/dev/null 2>&1 && gl=$(timeout 10 gio trash --list 2>&1) && ! grep -q "not supported" <<<"$gl"; then
	check "gio trash --list sees brokered's entries" -- grep -qF "$WS/f" <<<"$gl"
else
	skip "gio trash --list sees brokered's entries" "gio without a trash backend (gvfs)"
fi

# The store recorded the pre-images: the trash is a move, and the turn can undo it.
audit="$XDG_STATE_HOME/brokered/sessions/$SID/audit.log"
check "audit: the trash move is a policy-checked host operation with its backup" -- grep -q "phase=ipc-host-op .*path=$WS/d .*decision=allow .*syscall=ipc-trash .*backup=saved" "$audit"

# restore: the newest entry of a path; never over an existing file.
brk trash restore "$WS/f" >/dev/null
ok $? "trash restore PATH"
is "$(cat "$WS/f")" "two" "  brings back the newest entry of that path"
brk trash restore "$WS/f" >/dev/null 2>&1
is $? 1 "restore over an existing file is refused"
is "$(cat "$WS/f")" "two" "  and changes nothing"
rm "$WS/f"
brk trash restore "$WS/f" >/dev/null
is "$(cat "$WS/f")" "one" "the older entry comes back next"
brk trash restore --to "$WS/elsewhere" "$WS/d" >/dev/null
is "$(cat "$WS/elsewhere/e/x" 2>/dev/null)" "deep" "restore --to another place"

# Other tools' entries, the other way round.
if command -v trash-put >/dev/null 2>&1; then
	printf 'by trash-cli\n' >"$WS/other-tool"
	trash-put "$WS/other-tool"
	check "an entry made by trash-put is listed" -- grep -qF " $WS/other-tool" <<<"$(brk trash list)"
	brk trash restore "$WS/other-tool" >/dev/null
	is "$(cat "$WS/other-tool" 2>/dev/null)" "by trash-cli" "  and restored by brokered"
else
	skip "entries made by trash-put" "trash-cli not installed"
fi

# Another file system: $topdir/.Trash-$uid.
shm=/dev/shm
if [ -d "$shm" ] && [ -w "$shm" ] && [ "$(stat -c %d "$shm")" != "$(stat -c %d "$XDG_DATA_HOME")" ] &&
	[ ! -e "$shm/.Trash-$(id -u)" ]; then
	other=$(mktemp -d "$shm/brokered-trash-test.XXXXXX")
	printf 'on tmpfs\n' >"$other/t"
	stop_serve
	mkdir -p "$WS/.brokered"
	printf '{"sandbox":{"fileSafety":{"allowlist":["%s"]}}}\n' "$other" >"$WS/.brokered/settings.json"
	start_serve --delete-mode trash
	brk_client delete "$other/t" >/dev/null
	ok $? "a file on another file system"
	is "$(cat "$shm/.Trash-$(id -u)/files/t" 2>/dev/null)" "on tmpfs" "  goes to \$topdir/.Trash-\$uid"
	is "$(sed -n 2p "$shm/.Trash-$(id -u)/info/t.trashinfo")" "Path=${other#"$shm"/}/t" "  with a path relative to \$topdir"
	is "$(stat -c %a "$shm/.Trash-$(id -u)")" 700 "  the directory is 0700"
	check "  brokered trash list finds it with its absolute path" -- grep -qF " $other/t" <<<"$(brk trash list)"
	brk trash restore "$other/t" >/dev/null
	is "$(cat "$other/t" 2>/dev/null)" "on tmpfs" "  and restores it"
	rm -rf "$other" "$shm/.Trash-$(id -u)"
else
	skip "a file on another file system goes to \$topdir/.Trash-\$uid" "no separate writable tmpfs (or its trash exists)"
fi

brk trash empty
ok $? "trash empty"
is "$(brk trash list)" "" "  the trash is empty"
is "$(ls -A "$TRASH/files" "$TRASH/info" | grep -v ':$' | grep -c .)" 0 "  files/ and info/ hold nothing"

stop_serve
is "$SERVE_STATUS" 0 "serve exits 0"
done_testing
