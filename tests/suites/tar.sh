# shellcheck shell=bash
# GNU tar's own test suite (Autotest, tests/testsuite): archives created, extracted, updated and
# deleted with every kind of file, modes, links, sparse files, xattrs. Built once from Debian's
# source package; a case is a range of test numbers, each test a test case. Autotest's scratch
# directories (testsuite.dir) go into the workspace.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
TAR_SRC=$BROKERED_SUITES_CACHE/tar

suite_prepare() {
	deb_source tar "$TAR_SRC" &&
		build_once "$TAR_SRC" sh -c 'FORCE_UNSAFE_CONFIGURE=1 ./configure --disable-nls -q &&
			make -j2 && make -C tests testsuite'
}

# Ranges of 25 tests; the quick subset is the first ones (creation, extraction, options).
suite_cases() {
	local n
	n=$(cd "$TAR_SRC/tests" && ./testsuite --list | grep -cE '^ *[0-9]+:')
	[ -z "${SUITE_QUICK:-}" ] || n=50
	seq 1 25 "$n" | while read -r i; do echo "$i-$((i + 24 > n ? n : i + 24))"; done
}

suite_run() { # suite_run CASE WS
	cd "$TAR_SRC/tests" && $RUNNER ./testsuite -C "$2" "$1" AUTOTEST_PATH="$TAR_SRC/src:$TAR_SRC/tests"
}

# "  12: tar version                              ok" (or "skipped (file.at:N)", "FAILED (...)",
# "expected failure", "UNEXPECTED PASS").
suite_parse() {
	sed -nE \
		-e 's/^ *([0-9]+): (.*[^ ]) +ok$/\1\tpass\t\2/p' \
		-e 's/^ *([0-9]+): (.*[^ ]) +skipped \(.*$/\1\tskip\t\2/p' \
		-e 's/^ *([0-9]+): (.*[^ ]) +FAILED \(.*$/\1\tfail\t\2/p' \
		-e 's/^ *([0-9]+): (.*[^ ]) +expected failure.*$/\1\txfail\t\2/p' \
		-e 's/^ *([0-9]+): (.*[^ ]) +UNEXPECTED PASS.*$/\1\txpass\t\2/p'
}
