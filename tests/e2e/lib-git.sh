# shellcheck shell=bash
# Shared set-up of the git guard tests (tests/e2e/t10*-git-*.sh), sourced after ../lib.sh: the
# user's own git environment, a library repository outside the workspace, fresh repositories, the
# payload a sandboxed command writes, and plant(): a plant natively, then under brokered.
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
	cd "$WS" && rm -rf repo evil evil.git evilc g2 inc.cfg && rm -f "$MARK" && rm -rf "$OUTSIDE/wt"/* &&
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
