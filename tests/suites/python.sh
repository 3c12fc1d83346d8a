# shellcheck shell=bash
# CPython's own tests of its file system modules (Debian's libpython3.11-testsuite: nothing to
# build): os, posix, shutil, tempfile, pathlib, tarfile, zipfile, glob, ... Each module is a case,
# each unittest test a test case (tests/suites/pyunit.py prints them).
PY_SUITE_DIR=$(dirname "${BASH_SOURCE[0]}")

suite_prepare() {
	python3 -c 'import test.test_shutil' 2>/dev/null || {
		echo "Debian's libpython3.11-testsuite is not installed (scripts/deps.sh test)" >&2
		return 1
	}
}

# The quick subset is one case (one interpreter: importing test.support is most of its time).
PY_QUICK='test_shutil.TestCopy test_shutil.TestCopyTree test_shutil.TestRmTree test_shutil.TestMove
	test_posix.PosixTester test_os.MakedirTests test_os.UtimeTests test_os.RemoveDirsTests
	test_tempfile.TestMkstempInner test_tempfile.TestMkdtemp test_pathlib.PosixPathTest
	test_socket.TestUnixDomain'

suite_cases() {
	if [ -n "${SUITE_QUICK:-}" ]; then
		echo quick
		return
	fi
	printf '%s\n' test_shutil test_tempfile test_posix test_pathlib test_glob test_filecmp test_os \
		test_tarfile test_zipfile test_fileinput test_mailbox test_py_compile test_compileall \
		test_dbm_dumb test_shelve test_genericpath test_posixpath test_socket.TestUnixDomain
}

suite_run() { # suite_run CASE WS
	local names=$1
	[ "$1" != quick ] || names=$PY_QUICK
	# shellcheck disable=SC2086
	cd "$2" && $RUNNER python3 "$(cd "$PY_SUITE_DIR" && pwd)/pyunit.py" $(printf 'test.%s ' $names)
}

suite_parse() { grep -E $'^test\\.[^\t]*\t(pass|fail|skip|xfail|xpass)(\t|$)'; }
