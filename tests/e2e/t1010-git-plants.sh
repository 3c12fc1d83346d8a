#!/usr/bin/env bash
# A sandboxed command plants something that would make the user's own, later, unsandboxed git run a
# program (hooks, hooksPath, fsmonitor, textconv, filters, includes, worktree config, sshCommand,
# editor, aliases, credential helpers, gpg.program, gitfiles and renamed directories pointing at a
# crafted gitdir, a planted bare repository, core.worktree outside the workspace, a submodule's
# config, an included file, a file under an existing hooksPath). Each plant is first made natively,
# to show that the user's git then runs the payload (the marker file appears); under brokered the
# marker must not appear. Then approved plants work: --rollback + --approve, and the settings keys.
. "$(dirname "$0")/../lib.sh"
require_core
need git

export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
export GIT_CONFIG_COUNT=2 GIT_CONFIG_KEY_0=protocol.file.allow GIT_CONFIG_VALUE_0=always
export GIT_CONFIG_KEY_1=init.defaultBranch GIT_CONFIG_VALUE_1=main
unset GIT_EDITOR EDITOR VISUAL GIT_PAGER PAGER GIT_SSH GIT_SSH_COMMAND GIT_ASKPASS SSH_ASKPASS

MARK="$TEST_DIR/PWNED"
LIB="$OUTSIDE/lib"
git init -q "$LIB" && echo lib >"$LIB/lib.txt" && git -C "$LIB" add lib.txt && git -C "$LIB" commit -qm lib
mkdir -p "$OUTSIDE/wt"
chmod -R go+rwX "$OUTSIDE"

# The payload the sandboxed command writes: a program that leaves the marker.
PAY='printf "#!/bin/sh\ntouch '"$MARK"'\ncat >/dev/null 2>&1 </dev/null\n" > pay.sh && chmod +x pay.sh'

# fresh_repo [sub]: the user's own repository (made natively), with a commit; "sub" adds a submodule
fresh_repo() {
	cd "$WS" && rm -rf repo evil evil.git g2 inc.cfg && rm -f "$MARK" && rm -rf "$OUTSIDE/wt"/* &&
		git init -q repo && cd repo && echo one >f.txt && git add f.txt && git commit -qm one || return 1
	if [ "${1:-}" = sub ]; then
		git submodule add -q "$LIB" lib && git commit -qm sub || return 1
	fi
	if [ "${1:-}" = inc ]; then
		git config include.path ../../inc.cfg && touch "$WS/inc.cfg"
	fi
	if [ "${1:-}" = husky ]; then
		mkdir .husky && git config core.hooksPath .husky
	fi
	return 0
}

# plant DESC SETUP PLANT USER: PLANT natively must make USER run the payload; under brokered not.
plant() {
	local desc=$1 setup=$2 script=$3 user=$4
	fresh_repo "$setup" || { ok 1 "$desc: set-up"; return; }
	sh -c "$PAY; $script" >/dev/null 2>&1
	sh -c "$user" >/dev/null 2>&1 </dev/null
	[ -e "$MARK" ]
	ok $? "$desc: natively, the user's git runs the payload"

	fresh_repo "$setup" || { ok 1 "$desc: set-up"; return; }
	brk run --workspace "$WS" --json -c "$PAY; $script" </dev/null >/dev/null 2>"$TEST_DIR/err"
	local st=$?
	sh -c "$user" >/dev/null 2>&1 </dev/null
	[ ! -e "$MARK" ]
	ok $? "$desc: under brokered, the user's later git runs no payload"
	[ -e "$MARK" ] && sed 's/^/#   /' "$TEST_DIR/err" | tail -8
	[ "$st" != 0 ]
	ok $? "$desc: the run did not pass silently (status $st)"
}

COMMIT='git commit -q --allow-empty -m x'
HOOK='printf "#!/bin/sh\ntouch '"$MARK"'\n"'
plant "hook in .git/hooks" "" "$HOOK > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit" "$COMMIT"
plant "core.hooksPath" "" "mkdir h && $HOOK > h/pre-commit && chmod +x h/pre-commit && git config core.hooksPath h" "$COMMIT"
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
plant "a submodule's config (.git/modules/lib/config)" sub \
	'git -C lib config core.fsmonitor "$PWD/pay.sh"' 'git -C lib status'
plant "a file an existing include.path pulls in" inc \
	'printf "[core]\n\tfsmonitor = $PWD/pay.sh\n" >> ../inc.cfg' 'git status'
plant "a hook under an existing core.hooksPath" husky \
	"$HOOK > .husky/pre-commit && chmod +x .husky/pre-commit" "$COMMIT"
plant "gitfile to a crafted gitdir" "" \
	"cp -r .git ../evil && $HOOK > ../evil/hooks/pre-commit && chmod +x ../evil/hooks/pre-commit && rm -rf .git && echo 'gitdir: ../evil' > .git" \
	"$COMMIT"
plant "a crafted directory renamed to .git" "" \
	"cp -r .git ../g2 && $HOOK > ../g2/hooks/pre-commit && chmod +x ../g2/hooks/pre-commit && rm -rf .git && mv ../g2 .git" \
	"$COMMIT"
plant "a hook in a gitdir renamed into .git/modules" "" \
	"cp -r .git ../g2 && $HOOK > ../g2/hooks/pre-commit && chmod +x ../g2/hooks/pre-commit && mkdir -p .git/modules && mv ../g2 .git/modules/x && mkdir x && echo 'gitdir: ../.git/modules/x' > x/.git" \
	"cd x && $COMMIT"
plant "a planted bare repository" "" \
	"git init -q --bare ../evil.git && $HOOK > ../evil.git/hooks/pre-receive && chmod +x ../evil.git/hooks/pre-receive" \
	'git push -q ../evil.git HEAD:refs/heads/x'

# ---- what the blocks look like, and rollback of what was not approved ----
fresh_repo
cp .git/config "$TEST_DIR/config.before"
brk run --json -c "$PAY"'; git config user.name someone; git config core.fsmonitor "$PWD/pay.sh"' </dev/null >/dev/null 2>"$TEST_DIR/err"
is "$?" 120 "json: exit 120 for an exec-capable key"
report=$(grep '^{' "$TEST_DIR/err" | tail -1)
is "$(printf '%s' "$report" | python3 -c 'import json,sys; a=json.load(sys.stdin)["approvalNeeded"][0]; print(a["path"], a["rule"])')" \
	"$WS/repo/.git/config git-config: core.fsmonitor=$WS/repo/pay.sh" "json: the block names the file, the key and the value"
cmp -s .git/config "$TEST_DIR/config.before"
ok $? "the unapproved config is rolled back to its pre-image (the inert key with it)"
grep -q -- "the attempt was rolled back" "$TEST_DIR/err"
ok $? "the message says the attempt was rolled back"
[ ! -e pay.sh ]
ok $? "the whole attempt was rolled back (the payload it wrote is gone)"

# ---- approved plants work ----
brk run --approve .git/config -c "$PAY"'; git config core.fsmonitor "$PWD/pay.sh"' </dev/null >/dev/null 2>&1
is "$?" 0 "approved (--approve .git/config): exit 0"
is "$(git config core.fsmonitor)" "$WS/repo/pay.sh" "approved: the key is kept"
git status >/dev/null 2>&1
[ -e "$MARK" ]
ok $? "approved: the user's git runs the approved fsmonitor"

fresh_repo
brk run --approve .git/hooks/pre-commit -c "$HOOK > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit" </dev/null >/dev/null 2>&1
is "$?" 0 "approved hook (--approve .git/hooks/pre-commit): exit 0"
$COMMIT >/dev/null 2>&1
[ -e "$MARK" ]
ok $? "approved hook: the user's commit runs it"

# husky's way: core.hooksPath plus a hook file in the tracked directory, both approved
fresh_repo
HUSKY="mkdir -p .husky && $HOOK > .husky/pre-commit && chmod +x .husky/pre-commit && git config core.hooksPath .husky"
brk run --json -c "$HUSKY" </dev/null >/dev/null 2>"$TEST_DIR/err"
is "$?" 120 "husky-style install: needs approval"
is "$(grep '^{' "$TEST_DIR/err" | tail -1 | python3 -c 'import json,sys; print(" ".join(sorted(a["path"] for a in json.load(sys.stdin)["approvalNeeded"])))')" \
	"$WS/repo/.git/config $WS/repo/.husky/pre-commit" "husky-style install: both the config and the hook are blocks"
brk run --approve .git/config --approve .husky -c "$HUSKY" </dev/null >/dev/null 2>&1
is "$?" 0 "husky-style install approved: exit 0"
$COMMIT >/dev/null 2>&1
[ -e "$MARK" ]
ok $? "husky-style install approved: the user's commit runs the hook"

# settings: the workspace allows exec config and hooks
fresh_repo
mkdir -p .brokered
echo '{"sandbox": {"git": {"allowExecConfig": true, "allowHooks": true}}}' >.brokered/settings.json
brk run -c "$PAY"'; git config core.fsmonitor "$PWD/pay.sh"; '"$HOOK > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit" </dev/null >/dev/null 2>&1
is "$?" 0 "sandbox.git.allowExecConfig and allowHooks: no approval needed"
git status >/dev/null 2>&1
[ -e "$MARK" ]
ok $? "sandbox.git.allowExecConfig: the user's git runs the fsmonitor"

# show marks the hook and the config
brk show last | grep -q '\.git/hooks/pre-commit  \[git-hook\]'
ok $? "show marks a hook as git-hook"
cd "$WS" || exit 1

done_testing
