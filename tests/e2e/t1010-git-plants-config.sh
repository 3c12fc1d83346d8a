#!/usr/bin/env bash
# Git guard, configuration plants: a sandboxed command sets a key that names a program (fsmonitor,
# textconv, diff command, filters, include.path, includeIf, worktree config, sshCommand, editor,
# aliases, credential helper, gpg.program, core.worktree outside the workspace, .git/config made a
# link to a file the command edits). Each plant is made
# natively first, to show that the user's later git runs the payload (a marker file appears); under
# brokered the marker must not appear and the run must not pass silently.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
require_core
. "$HERE/lib-git.sh"

plant "core.fsmonitor" "" 'git config core.fsmonitor "$PWD/pay.sh"' 'git status'
plant "diff.x.textconv + .gitattributes" "" \
	'git config diff.x.textconv "$PWD/pay.sh" && echo "*.txt diff=x" > .gitattributes' 'echo two >> f.txt; git diff'
plant "diff.x.command + .gitattributes" "" \
	'git config diff.x.command "$PWD/pay.sh" && echo "*.txt diff=x" > .gitattributes' 'echo two >> f.txt; git diff'
plant "filter.x.clean + .gitattributes" "" \
	'git config filter.x.clean "$PWD/pay.sh" && echo "*.txt filter=x" > .gitattributes' 'echo two >> f.txt; git add f.txt'
plant "include.path" "" \
	'printf "[core]\n\tfsmonitor = $PWD/pay.sh\n" > evil.cfg && git config include.path ../evil.cfg' 'git status'
plant "includeIf.gitdir:.path" "" \
	'printf "[core]\n\tfsmonitor = $PWD/pay.sh\n" > evil.cfg && git config "includeIf.gitdir:/.path" ../evil.cfg' 'git status'
plant "extensions.worktreeConfig + config.worktree" "" \
	'git config extensions.worktreeConfig true && git config --worktree core.fsmonitor "$PWD/pay.sh"' 'git status'
plant "core.sshCommand" "" \
	'git config core.sshCommand "$PWD/pay.sh" && git remote add o ssh://host.invalid/r' 'git fetch -q o'
plant "core.editor" "" 'git config core.editor "$PWD/pay.sh"' 'git commit -q --allow-empty'
plant "alias.st = !cmd" "" 'git config alias.st "!$PWD/pay.sh"' 'git st'
plant "credential.helper" "" 'git config credential.helper "!$PWD/pay.sh"' \
	'printf "protocol=https\nhost=example.com\n\n" | git credential fill'
plant "gpg.program + commit.gpgsign" "" \
	'git config gpg.program "$PWD/pay.sh" && git config commit.gpgsign true' "$COMMIT"
plant "core.worktree outside the workspace" "" "git config core.worktree '$OUTSIDE/wt'" \
	"git reset -q --hard; [ -e '$OUTSIDE/wt/f.txt' ] && touch '$MARK'"
plant ".git/config replaced by a hard link to a file the command then edits" "" \
	'cp .git/config x.cfg && rm .git/config && ln x.cfg .git/config && printf "[core]\n\tfsmonitor = $PWD/pay.sh\n" >> x.cfg' 'git status'
plant ".git/config replaced by a symlink to a file the command then edits" "" \
	'cp .git/config x.cfg && rm .git/config && ln -s ../x.cfg .git/config && printf "[core]\n\tfsmonitor = $PWD/pay.sh\n" >> x.cfg' 'git status'
brk run -c 'ln .git/config x.cfg' </dev/null >/dev/null 2>&1
is "$?" 1 "a hard link to .git/config (a second name to edit it through) is refused"

# A key planted in a repository below the workspace that the command then moves away, leaving a
# symlink in its place: the check finds it under the new name, and the roll-back gives the
# repository back whole where it was (its undo once took the paths below the symlink for the moved
# files: it failed with EIO and left an empty directory).
w="$TEST_DIR/moved"
mkdir -p "$w/sub" && (cd "$w/sub" && git init -q . && echo a >f && git add f && git -c user.name=t -c user.email=t@t commit -qm init)
before=$(tree_snapshot_full "$w")
(cd "$w" && brk run -c 'git -C sub config core.fsmonitor "$PWD/pay.sh" && mv sub sub2 && ln -s sub2 sub' </dev/null >/dev/null 2>"$TEST_DIR/moved.err")
is "$?" 120 "a key planted, then the repository moved and a symlink left: a prompt (120)"
grep -q 'sub2/.git/config (git-config: core.fsmonitor=' "$TEST_DIR/moved.err"
ok $? "... naming the key under the repository's new name"
sed 's/^/#   /' "$TEST_DIR/moved.err" | tail -4
is_snap "$(tree_snapshot_full "$w")" "$before" "... rolled back: the repository is back where it was, as it was"

done_testing
