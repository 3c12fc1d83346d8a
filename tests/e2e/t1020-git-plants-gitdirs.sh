#!/usr/bin/env bash
# Git guard, hook and gitdir plants: hooks in .git/hooks, core.hooksPath, a submodule's config, a
# file an existing include.path pulls in, a hook under an existing hooksPath, a gitfile to a crafted
# gitdir, a crafted directory renamed to .git or into .git/modules, a submodule's git directory
# made its .git around a hook, a linked work tree's commondir, a planted bare repository. Each
# plant natively runs the payload at the user's next git command; under brokered it must not.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
require_core
. "$HERE/lib-git.sh"

plant "hook in .git/hooks" "" "$HOOK > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit" "$COMMIT"
plant "core.hooksPath" "" "mkdir h && $HOOK > h/pre-commit && chmod +x h/pre-commit && git config core.hooksPath h" "$COMMIT"
plant "a submodule's config (.git/modules/lib/config)" sub \
	'git -C lib config core.fsmonitor "$PWD/pay.sh"' 'git -C lib status'
plant "a file an existing include.path pulls in" inc \
	'printf "[core]\n\tfsmonitor = $PWD/pay.sh\n" >> ../inc.cfg' 'git status'
plant "a second name of an included file, then edited" inc \
	'ln ../inc.cfg other.cfg && printf "[core]\n\tfsmonitor = $PWD/pay.sh\n" >> other.cfg' 'git status'
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
plant "a hook in a submodule's git directory, which then becomes its .git" sub \
	"$HOOK > .git/modules/lib/hooks/pre-commit && chmod +x .git/modules/lib/hooks/pre-commit && rm lib/.git && mv .git/modules/lib lib/.git && (cd lib && GIT_WORK_TREE=. git config --unset core.worktree)" \
	"cd lib && $COMMIT"
plant "a submodule's git directory made its .git, then a hook added" sub \
	"rm lib/.git && mv .git/modules/lib lib/.git && (cd lib && GIT_WORK_TREE=. git config --unset core.worktree) && $HOOK > lib/.git/hooks/pre-commit && chmod +x lib/.git/hooks/pre-commit" \
	"cd lib && $COMMIT"
plant "a linked work tree's commondir pointing at a crafted directory" "" \
	"git worktree add -q w2 && cp -r .git ../evilc && rm ../evilc/HEAD && git config -f ../evilc/config core.fsmonitor \"\$PWD/pay.sh\" && echo \"\$PWD/../evilc\" > .git/worktrees/w2/commondir" \
	"cd w2 && git status"
plant "a planted bare repository" "" \
	"git init -q --bare ../evil.git && $HOOK > ../evil.git/hooks/pre-receive && chmod +x ../evil.git/hooks/pre-receive" \
	'git push -q ../evil.git HEAD:refs/heads/x'

done_testing
