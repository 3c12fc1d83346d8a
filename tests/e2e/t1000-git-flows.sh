#!/usr/bin/env bash
# Everyday git flows under `brokered run` in a fresh workspace: worktrees, submodules (add, update,
# clone --recurse-submodules from a local path, checkout --recurse-submodules, rm, mv), git clean
# next to nested repositories, and inert configuration (init, clone, remote add, config user.name,
# branch) — none of them needs an approval, and a turn's git changes are marked by show/log.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
require_core
. "$HERE/lib-git.sh"

# brun DESC SCRIPT: run SCRIPT under brokered (no terminal); exit 0 and no approval needed
brun() {
	local desc=$1
	shift
	brk run --json -c "set -e; $1" </dev/null >"$TEST_DIR/out" 2>"$TEST_DIR/err"
	local st=$?
	is "$st" 0 "$desc: exit 0"
	[ "$st" = 0 ] || sed 's/^/#   /' "$TEST_DIR/err" | tail -15
	grep '^{' "$TEST_DIR/err" | tail -1 | grep -q '"approvalNeeded":\[\]'
	ok $? "$desc: no approval needed"
}

# the upstream library (lib-git.sh), at a known version
echo 'lib v1' >"$LIB/lib.txt" && git -C "$LIB" commit -qam v1

brun "init, commit, remote add, config user.name, branch" \
	'git init -q app && cd app && echo hi > a.txt && git add a.txt && git commit -qm one &&
	 git remote add origin https://example.com/app.git && git config user.name someone &&
	 git branch feature && git config branch.feature.description "a feature"'
is "$(git -C app config user.name)" someone "inert keys were kept"

brun "git worktree add inside the workspace" 'cd app && git worktree add -q ../wt -b wtbranch'
is "$(sed -n 's/^gitdir: //p' wt/.git)" "$WS/app/.git/worktrees/wt" "the worktree's .git is a gitfile into .git/worktrees"
is "$(git -C wt rev-parse --abbrev-ref HEAD)" wtbranch "the worktree works for the user's git"
brun "commit in the worktree, then worktree remove" \
	'cd wt && echo w > w.txt && git add w.txt && git commit -qm w && cd ../app && git worktree remove ../wt'
[ ! -e wt ] && git -C app rev-parse -q --verify wtbranch >/dev/null
ok $? "worktree removed, its branch kept"

brun "git submodule add from a local path" "cd app && git submodule add -q '$LIB' lib && git commit -qm 'add lib'"
is "$(cat app/lib/lib.txt)" "lib v1" "submodule checked out"
is "$(sed -n 's/^gitdir: //p' app/lib/.git)" "../.git/modules/lib" "the submodule's .git is a gitfile into .git/modules"
is "$(git -C app/lib log --format=%s -1)" v1 "the user's git works in the submodule"

echo 'lib v2' >"$LIB/lib.txt" && git -C "$LIB" commit -qam v2
brun "git submodule update --remote" 'cd app && git submodule update -q --remote lib && git commit -qam "lib v2"'
is "$(cat app/lib/lib.txt)" "lib v2" "submodule updated"

brun "git clone --recurse-submodules from a local path" "git clone -q --recurse-submodules app clone"
is "$(cat clone/lib/lib.txt)" "lib v2" "the clone's submodule is checked out"
is "$(git -C clone/lib rev-parse --git-dir)" "$WS/clone/.git/modules/lib" "the clone's submodule uses .git/modules"

brun "git checkout --recurse-submodules" \
	'cd clone && git checkout -q --recurse-submodules HEAD~1 && git checkout -q --recurse-submodules main'
is "$(cat clone/lib/lib.txt)" "lib v2" "checkout --recurse-submodules went back and forth"

brun "git mv of a submodule" 'cd clone && mkdir vendor && git mv lib vendor/lib && git commit -qm "move lib"'
is "$(cat clone/vendor/lib/lib.txt)" "lib v2" "moved submodule is checked out"
git -C clone/vendor/lib status --porcelain >/dev/null 2>&1
ok $? "the user's git works in the moved submodule (core.worktree and gitfile rewritten)"

brun "git rm of a submodule" 'cd clone && git rm -q vendor/lib && git commit -qm "drop lib"'
[ ! -e clone/vendor/lib ]
ok $? "submodule removed"

brun "a submodule whose .git is a directory, absorbed (git submodule absorbgitdirs)" \
	'cd app/lib && rm .git && mv ../.git/modules/lib .git && GIT_WORK_TREE=. git config --unset core.worktree &&
	 cd .. && git submodule absorbgitdirs'
is "$(sed -n 's/^gitdir: //p' app/lib/.git)" "../.git/modules/lib" "absorbed: the submodule's .git is a gitfile again"
is "$(git -C app/lib log --format=%s -1)" v2 "the user's git works in the absorbed submodule"
brun "git rm of a submodule whose .git is a directory (git absorbs it first)" \
	'cd app/lib && rm .git && mv ../.git/modules/lib .git && GIT_WORK_TREE=. git config --unset core.worktree &&
	 cd .. && git rm -q lib && git commit -qm "drop lib"'
[ ! -e app/lib ] && [ -d app/.git/modules/lib ]
ok $? "git rm removed the submodule and kept its git directory in .git/modules"

mkdir -p app/nested && git -C app/nested init -q && echo x >app/nested/x && echo junk >app/junk
brun "git clean -ffdx next to a nested repository" 'cd app && git clean -q -ffdx'
[ ! -e app/nested ] && [ ! -e app/junk ] && [ -e app/a.txt ]
ok $? "git clean removed the nested repository and the junk, kept tracked files"

# the user's own git is fine afterwards: fsck in every repository the runs touched
git -C app fsck --no-progress >"$TEST_DIR/fsck" 2>&1 && git -C clone fsck --no-progress >>"$TEST_DIR/fsck" 2>&1
ok $? "git fsck passes in app and clone" || sed "s/^/#   /" "$TEST_DIR/fsck"

# show and log mark what a turn changed in git's configuration
brk run -c 'cd app && git config user.email x@example.com' </dev/null >/dev/null 2>&1
brk show last | grep -q "app/.git/config  \[git-config\]"
ok $? "show marks .git/config as git-config"
brk log | head -1 | grep -q '\[git-config\]'
ok $? "log marks the turn as changing git-config"
brk log --json | grep -q '"git":"git-config"'
ok $? "log --json has \"git\": \"git-config\""

done_testing
