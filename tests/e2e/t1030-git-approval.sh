#!/usr/bin/env bash
# Git guard, approval: a block names the file, key and value (--json, exit 120); an unapproved
# attempt is rolled back whole; --approve grants a config key, a hook, a husky-style install
# (hooksPath + hook file); the sandbox.git settings; show marks hooks and config.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
require_core
. "$HERE/lib-git.sh"

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

# inside an explicit turn, a later run sees the turn's records again: what was approved stays
fresh_repo
brk turn begin -m "agent turn" >/dev/null 2>&1
brk run --approve .git/config -c 'git config core.hooksPath .husky' </dev/null >/dev/null 2>&1
is "$?" 0 "explicit turn, run 1: approved core.hooksPath"
brk run -c 'git config user.name later' </dev/null >/dev/null 2>&1
is "$?" 0 "explicit turn, run 2 (an inert change to the same file): no approval needed"
is "$(git config core.hooksPath) $(git config user.name)" ".husky later" "explicit turn: the approved key and the later change are both kept"
brk run -c 'git config core.pager "$PWD/pay.sh"' </dev/null >/dev/null 2>&1
is "$?" 120 "explicit turn, run 3: a new exec-capable key still needs approval"
is "$(git config core.pager)" "" "explicit turn: the unapproved key is rolled back, the approved one kept"
is "$(git config core.hooksPath)" ".husky" "explicit turn: core.hooksPath is still there"
brk turn commit -m "agent turn" >/dev/null 2>&1

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
