#!/usr/bin/env bash
# Escape suite, protections that hang on names: git hooks installed by renaming or re-pointing the
# hooks directory or .git itself; secrets whose parent directory is renamed when the workspace is the
# home directory; a home (or XDG_CONFIG_HOME) reached through a symlink.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/../lib.sh"
require_core
. "$HERE/lib-escape.sh"
make_fixtures
OLDROOTS=("${PROTECTED_ROOTS[@]}")

# ---- git hooks: never writable from inside, however the hooks directory is reached ----
GIT_HOOK_FIXTURE() {
	rm -rf "$WS/.git" "$WS/realgit" "$WS/g" "$WS/evilhooks"
	mkdir -p "$WS/.git/hooks" "$WS/.git/objects" "$WS/.git/refs" "$WS/evilhooks"
	echo 'ref: refs/heads/main' >"$WS/.git/HEAD"
	printf '[core]\n\trepositoryformatversion = 0\n' >"$WS/.git/config"
	printf '#!/bin/sh\necho original\n' >"$WS/.git/hooks/post-checkout"
	printf '#!/bin/sh\n' >"$WS/.git/hooks/pre-commit.sample"
	printf '#!/bin/sh\necho evil\n' >"$WS/evilhooks/pre-commit"
	chmod +x "$WS/.git/hooks/post-checkout" "$WS/evilhooks/pre-commit"
}
# The hooks git would run: the hooks dir of the git dir that $WS/.git names (a dir or a gitdir: file).
effective_hooks() {
	local gd=$WS/.git
	if [ -f "$gd" ]; then
		gd=$(sed -n 's/^gitdir: //p' "$gd")
		case $gd in /*) ;; *) gd=$WS/$gd ;; esac
	fi
	(cd "$gd/hooks" 2>/dev/null && for f in *; do
		[ -f "$f" ] && case $f in *.sample) ;; *) printf '%s:%s\n' "$f" "$(sha256sum <"$f" | cut -c1-12)" ;; esac
	done)
}
hook_attempt() { # hook_attempt DESC SHELL-SNIPPET
	GIT_HOOK_FIXTURE
	local before after
	before=$(effective_hooks)
	(cd "$WS" && timeout 50 "$BROKERED" run -- sh -c "$2" >/dev/null 2>&1 </dev/null)
	after=$(effective_hooks)
	# Hooks may be deleted (that runs no code, and undo brings them back); none may be added
	# or changed: every hook git would run afterwards is one that was there, unchanged.
	local extra
	extra=$(comm -13 <(printf '%s\n' "$before" | sort) <(printf '%s\n' "$after" | sed '/^$/d' | sort))
	is "$extra" "" "git hooks: $1: no hook added or changed"
}
hook_attempt "write .git/hooks/pre-commit" 'printf "#!/bin/sh\necho evil\n" > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit'
hook_attempt "overwrite an existing hook" 'echo "echo evil" >> .git/hooks/post-checkout'
hook_attempt "rename a prepared hook into .git/hooks" 'mv evilhooks/pre-commit .git/hooks/pre-commit'
hook_attempt "link a prepared hook into .git/hooks" 'ln evilhooks/pre-commit .git/hooks/pre-commit'
hook_attempt "pre-commit.sample renamed to pre-commit" 'cat evilhooks/pre-commit > .git/hooks/pre-commit.sample; mv .git/hooks/pre-commit.sample .git/hooks/pre-commit'
hook_attempt "replace .git/hooks by a prepared dir (rm -r, mv)" 'rm -rf .git/hooks && mv evilhooks .git/hooks'
hook_attempt "RENAME_EXCHANGE a prepared dir with .git/hooks" "$ESC renameat2 evilhooks .git/hooks exchange"
hook_attempt "replace .git/hooks by a symlink" 'rm -rf .git/hooks && ln -s ../evilhooks .git/hooks'
hook_attempt "rename .git away, write the hook, rename it back" 'mv .git g && cat evilhooks/pre-commit > g/hooks/pre-commit && chmod +x g/hooks/pre-commit && mv g .git'
hook_attempt "edit an existing hook while .git is renamed away" 'mv .git g && echo "echo evil" >> g/hooks/post-checkout && mv g .git'
hook_attempt "replace .git by a gitdir: file naming another dir" 'mv .git realgit && cp evilhooks/pre-commit realgit/hooks/pre-commit && echo "gitdir: realgit" > .git'
hook_attempt "replace .git by a symlink to a prepared git dir" 'cp -r .git g && cp evilhooks/pre-commit g/hooks/ && rm -rf .git && ln -s g .git'
rm -rf "$WS/.git" "$WS/realgit" "$WS/g" "$WS/evilhooks"

# ---- the home directory as the workspace: secrets' and settings' parents ----
OLDWS=$WS
WS=$HOME
PROTECTED_ROOTS=("$HOME/.ssh" "$HOME/.bashrc" "$HOME/.config/brokered" "$HOME/.docker" "$HOME/.cargo" "$HOME/.gem" \
	"$HOME/.local/share/keyrings" "$OUTSIDE" "$XDG_STATE_HOME/brokered/canary")
mkdir -p "$HOME/.cargo" "$HOME/.local/share/keyrings" "$HOME/.gem"
echo 'token = "secret"' >"$HOME/.cargo/credentials"
echo 'keyring' >"$HOME/.local/share/keyrings/login.keyring"
echo 'gem' >"$HOME/.gem/credentials"
touch -d '2001-02-03 04:05:06' "$HOME/.cargo" "$HOME/.cargo/credentials" "$HOME/.local" "$HOME/.local/share" \
	"$HOME/.local/share/keyrings" "$HOME/.local/share/keyrings/login.keyring" "$HOME/.gem" "$HOME/.gem/credentials"
attempt "ws=~: write ~/.bashrc" 'EACCES' open "$HOME/.bashrc" -- "$ESC" open .bashrc w,append pwned
attempt "ws=~: rename ~/.ssh away" 'EACCES' rename "$HOME/.ssh" -- "$ESC" rename .ssh s
attempt "ws=~: rename ~/.config away (holds ~/.config/brokered)" 'EACCES' rename "$HOME/.config" -- "$ESC" rename .config c
attempt "ws=~: rename the home dir itself" 'EACCES' rename "$HOME" -- "$ESC" rename "$HOME" "$HOME.moved"
for sec in .docker/config.json .cargo/credentials .gem/credentials .local/share/keyrings/login.keyring; do
	top=${sec%%/*}
	attempt "ws=~: write ~/$sec" 'EACCES' open "$HOME/$sec" -- "$ESC" open "$sec" w,trunc pwned
	attempt "ws=~: rename ~/$top away, write $sec there, rename back" - - - -- \
		sh -c "mv $top moved && echo pwned > moved/${sec#*/}; mv moved $top"
	rm -rf "$HOME/moved"
	attempt "ws=~: RENAME_EXCHANGE a prepared ~/$top" - - - -- \
		sh -c "mkdir -p prep/$(dirname "${sec#*/}") && echo pwned > prep/${sec#*/} && $ESC renameat2 prep $top exchange"
	rm -rf "$HOME/prep"
done
rm -rf "$HOME/moved" "$HOME/prep"
WS=$OLDWS
PROTECTED_ROOTS=("${OLDROOTS[@]}")

# ---- a home directory reached through a symlink (HOME=/home/u, real /var/home/u) ----
mkdir -p "$TEST_DIR/var"
REALHOME="$WS/realhome"
mkdir -p "$REALHOME/.ssh" "$REALHOME/.config/brokered"
echo 'alias ls=ls' >"$REALHOME/.bashrc"
echo 'key' >"$REALHOME/.ssh/id_rsa"
echo '{}' >"$REALHOME/.config/brokered/settings.json"
ln -s "$REALHOME" "$TEST_DIR/homelink"
OLDHOME=$HOME
export HOME="$TEST_DIR/homelink"
PROTECTED_ROOTS=("$REALHOME/.bashrc" "$REALHOME/.ssh" "$REALHOME/.config/brokered")
attempt "HOME via a symlink, run in the real home: write ~/.bashrc" 'EACCES' - - -- \
	sh -c "cd '$REALHOME' && exec $ESC open .bashrc w,append pwned"
attempt "HOME via a symlink, run in the real home: write ~/.ssh/id_rsa" 'EACCES' - - -- \
	sh -c "cd '$REALHOME' && exec $ESC open .ssh/id_rsa w,trunc pwned"
attempt "HOME via a symlink, run in the real home: write ~/.config/brokered/settings.json" 'EACCES' - - -- \
	sh -c "cd '$REALHOME' && exec $ESC open .config/brokered/settings.json w,trunc pwned"
OLDWS=$WS
WS=$REALHOME
attempt "HOME via a symlink, workspace = the real home: write ~/.bashrc" 'EACCES' - - -- "$ESC" open .bashrc w,append pwned
attempt "HOME via a symlink, workspace = the real home: write ~/.ssh/id_rsa" 'EACCES' - - -- "$ESC" open .ssh/id_rsa w,trunc pwned
attempt "HOME via a symlink, workspace = the real home: write ~/.config/brokered/settings.json" 'EACCES' - - -- \
	"$ESC" open .config/brokered/settings.json w,trunc pwned
WS=$OLDWS
export HOME=$OLDHOME
PROTECTED_ROOTS=("${OLDROOTS[@]}")

# ---- XDG_CONFIG_HOME through a symlink into the workspace ----
mkdir -p "$WS/realcfg/brokered"
echo '{}' >"$WS/realcfg/brokered/settings.json"
ln -s "$WS/realcfg" "$TEST_DIR/cfglink"
OLDCFG=$XDG_CONFIG_HOME
export XDG_CONFIG_HOME="$TEST_DIR/cfglink"
PROTECTED_ROOTS=("$WS/realcfg/brokered")
attempt "XDG_CONFIG_HOME via a symlink into the workspace: write brokered/settings.json" 'EACCES' - - -- \
	"$ESC" open realcfg/brokered/settings.json w,trunc '{"sandbox":{"enabled":false}}'
export XDG_CONFIG_HOME=$OLDCFG
PROTECTED_ROOTS=("${OLDROOTS[@]}")

broker_alive "broker still works after the attempts"
done_testing
