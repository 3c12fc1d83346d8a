# shellcheck shell=bash
# git's own test scripts (t/) for the commands a coding agent uses on a repository: worktree,
# submodule, checkout/switch/restore, rm, mv, add, clean, stash, am, merge. Built once from
# Debian's source package (the version of the installed git) with the test helpers; each script
# is a case, each of its tests (TAP) a test case. Trash directories go into the workspace.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
GIT_SRC=$BROKERED_SUITES_CACHE/git

suite_prepare() {
	deb_source git "$GIT_SRC" &&
		build_once "$GIT_SRC" make -j2 NO_CURL=1 NO_EXPAT=1 NO_GETTEXT=1 NO_TCLTK=1 NO_PYTHON=1 all
}

suite_cases() {
	local quick='t2060-switch t3600-rm t7001-mv t7300-clean'
	if [ -n "${SUITE_QUICK:-}" ]; then
		printf '%s\n' $quick
		return
	fi
	(cd "$GIT_SRC/t" && ls -- t24??-worktree*.sh t74??-submodule*.sh t20??-checkout*.sh \
		t2060-switch.sh t207?-restore*.sh t3600-rm.sh t7001-mv.sh t3700-add.sh t7300-clean.sh \
		t390?-stash*.sh t415?-am*.sh t76??-merge*.sh) | sed 's/\.sh$//'
}

suite_run() { # suite_run CASE WS
	cd "$GIT_SRC/t" &&
		TEST_OUTPUT_DIRECTORY=$2 $RUNNER sh "$1.sh" --root="$2"
}

# TAP: "ok N - desc", "not ok N - desc", "... # skip reason", "... # TODO known breakage".
suite_parse() {
	sed -nE \
		-e 's/^ok ([0-9]+) # skip (.*)$/\1\tskip\t\2/p' \
		-e 's/^not ok ([0-9]+) - (.*) # TODO .*$/\1\txfail\t\2/p' \
		-e 's/^ok ([0-9]+) - (.*) # TODO .*$/\1\txpass\t\2/p' \
		-e '/ # (skip|TODO)/!s/^ok ([0-9]+) - (.*)$/\1\tpass\t\2/p' \
		-e '/ # TODO/!s/^not ok ([0-9]+) - (.*)$/\1\tfail\t\2/p'
}
