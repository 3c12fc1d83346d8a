#!/usr/bin/env bash
# Escape suite, hard links and renames: a second name for a protected inode, renames out of and
# into protected trees (.brokered, ~/.ssh, the state dir), RENAME_EXCHANGE, O_TMPFILE + linkat,
# git hooks installed by renaming or re-pointing .git, and a home directory inside the workspace.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/../lib.sh"
require_core
. "$HERE/lib-escape.sh"
make_fixtures

X="$OUTSIDE/x"
SET="$WS/.brokered/settings.json"
CAN="$XDG_STATE_HOME/brokered/canary"
echo ws >"$WS/wsfile"
mkdir -p "$WS/evil"
echo '{"sandbox":{"enabled":false}}' >"$WS/evil/settings.json"

# ---- hard links ----
for src in "$X" "$HOME/.bashrc" "$HOME/.ssh/id_rsa" "$SET" "$CAN/file" "$OUTSIDE/ro"; do
	attempt "link $src into the workspace" 'EACCES' link "$src" -- "$ESC" link "$src" hl
	attempt "link $src into the workspace, then write the new name" 'ENOENT' - - -- \
		sh -c "$ESC link '$src' hl2; exec $ESC open hl2 w,trunc pwned"
	# (a read-denied file cannot even be opened: prep:EACCES is a refusal too)
	attempt "linkat(fd, \"\", AT_EMPTY_PATH) of a read-only fd of $src" 'EACCES|ENOENT|prep:EACCES' - - -- \
		"$ESC" fd "$src" r linkat-empty hl4
	attempt "linkat(/proc/self/fd/N, AT_SYMLINK_FOLLOW) of a read-only fd of $src" 'EACCES|prep:EACCES' - - -- \
		"$ESC" fd "$src" r linkat-proc hl5
done
attempt "linkat(AT_SYMLINK_FOLLOW) $X into the workspace" 'EACCES' link "$X" -- "$ESC" linkf "$X" hl3
attempt "linkat(fd, \"\", AT_EMPTY_PATH) of a read-only fd: audit" 'EACCES' link "$X" -- "$ESC" fd "$X" r linkat-empty hl4
attempt "linkat(/proc/self/fd/N) of a read-only fd: audit" 'EACCES' link "$X" -- "$ESC" fd "$X" r linkat-proc hl5
attempt "link $X into the scratch dir, then write it" 'EACCES|ENOENT' - - -- \
	sh -c "$ESC link '$X' \"\$TMPDIR/hl\"; exec $ESC open \"\$TMPDIR/hl\" w,trunc pwned"
[ ! -e "$WS/hl" ] && [ ! -e "$WS/hl3" ] && [ ! -e "$WS/hl4" ] && [ ! -e "$WS/hl5" ]
ok $? "no hard link of a protected file appeared in the workspace"
for dst in "$OUTSIDE/new" "$HOME/.ssh/new" "$WS/.brokered/new" "$CAN/new" "$XDG_CONFIG_HOME/brokered/new"; do
	attempt "link a workspace file to $dst" 'EACCES' link "$dst" -- "$ESC" link wsfile "$dst"
	attempt "symlink at $dst" 'EACCES' symlink "$dst" -- "$ESC" symlink /etc/passwd "$dst"
done

# ---- renames out of / into protected trees ----
attempt "rename ws/.brokered away" 'EACCES' rename "$WS/.brokered" -- "$ESC" rename .brokered moved
attempt "rename ws/.brokered/settings.json away" 'EACCES' rename "$SET" -- "$ESC" rename .brokered/settings.json s
attempt "rename a prepared dir over ws/.brokered" 'EACCES' rename "$WS/.brokered" -- "$ESC" rename evil .brokered
attempt "RENAME_EXCHANGE a prepared dir with ws/.brokered" 'EACCES' rename "$WS/.brokered" -- \
	"$ESC" renameat2 evil .brokered exchange
attempt "rename a file onto ws/.brokered/settings.json" 'EACCES' rename "$SET" -- \
	"$ESC" rename evil/settings.json .brokered/settings.json
attempt "mv -T evil .brokered" - - - -- mv -T evil .brokered
attempt "rename the workspace itself" 'EACCES' rename "$WS" -- "$ESC" rename "$WS" "$WS.moved"
attempt "rename ~/.ssh/id_rsa into the workspace" 'EACCES' rename "$HOME/.ssh/id_rsa" -- "$ESC" rename "$HOME/.ssh/id_rsa" k
attempt "rename ~/.ssh away" 'EACCES' rename "$HOME/.ssh" -- "$ESC" rename "$HOME/.ssh" "$HOME/ssh2"
attempt "rename a file onto ~/.ssh/authorized_keys" 'EACCES' rename "$HOME/.ssh/authorized_keys" -- \
	"$ESC" rename wsfile "$HOME/.ssh/authorized_keys"
attempt "rename a file onto ~/.bashrc" 'EACCES' rename "$HOME/.bashrc" -- "$ESC" rename wsfile "$HOME/.bashrc"
attempt "rename a file into the state dir" 'EACCES' rename "$CAN/new" -- "$ESC" rename wsfile "$CAN/new"
attempt "rename a file onto the state canary" 'EACCES' rename "$CAN/file" -- "$ESC" rename wsfile "$CAN/file"
attempt "rename a dir over \$XDG_CONFIG_HOME/brokered" 'EACCES' rename "$XDG_CONFIG_HOME/brokered" -- \
	"$ESC" renameat2 evil "$XDG_CONFIG_HOME/brokered" exchange
attempt "rename the state canary dir away" 'EACCES' rename "$CAN" -- "$ESC" rename "$CAN" "$CAN.moved"
attempt "RENAME_NOREPLACE into outside" 'EACCES' rename "$OUTSIDE/new" -- "$ESC" renameat2 wsfile "$OUTSIDE/new" noreplace
attempt "RENAME_WHITEOUT of an outside file" 'EACCES|EPERM|EINVAL' - - -- "$ESC" renameat2 "$X" got whiteout
for o in "$X" "$HOME/.bashrc" "$HOME/.ssh/id_rsa" "$SET" "$CAN/file"; do
	attempt "RENAME_EXCHANGE ws file <-> $o" 'EACCES' rename "$o" -- "$ESC" renameat2 wsfile "$o" exchange
	attempt "RENAME_EXCHANGE $o <-> ws file" 'EACCES' rename "$o" -- "$ESC" renameat2 "$o" wsfile exchange
done
cat "$WS/wsfile" | grep -qx ws
ok $? "the workspace file is still the workspace's"

# ---- O_TMPFILE + linkat ----
mkdir -p "$WS/sub"
for dst in "$OUTSIDE/tmpnew" "$WS/.brokered/tmpnew" "$HOME/.ssh/tmpnew" "$CAN/tmpnew"; do
	for via in empty proc; do
		attempt "O_TMPFILE in ws/sub, linkat($via) to $dst" 'EACCES' link "$dst" -- "$ESC" tmpfile sub "$dst" $via
		attempt "O_TMPFILE in \$TMPDIR, linkat($via) to $dst" 'EACCES' link "$dst" -- \
			sh -c "exec $ESC tmpfile \"\$TMPDIR\" '$dst' $via"
	done
done
attempt "O_TMPFILE directly in an outside dir" 'prep:EACCES' - - -- "$ESC" tmpfile "$OUTSIDE" ws-tmp empty
attempt "O_TMPFILE directly in ws/.brokered" 'prep:EACCES' - - -- "$ESC" tmpfile "$WS/.brokered" ws-tmp empty
attempt "O_TMPFILE in ~/.ssh" 'prep:EACCES' - - -- "$ESC" tmpfile "$HOME/.ssh" ws-tmp empty
attempt "O_TMPFILE in ws/sub, linkat into the workspace (allowed)" 'ok' - - -- "$ESC" tmpfile sub tmp-ok empty
is "$(cat "$WS/tmp-ok" 2>/dev/null)" tmpfile "O_TMPFILE + linkat in a workspace subdir works"
# not an escape, a false refusal: the workspace root is an ancestor of .brokered
attempt "O_TMPFILE in the workspace root, linkat into the workspace (allowed)" 'ok' - - -- "$ESC" tmpfile . tmp-ok2 empty
is "$(cat "$WS/tmp-ok2" 2>/dev/null)" tmpfile "O_TMPFILE + linkat in the workspace root works"

broker_alive "broker still works after the link and rename attempts"
done_testing
