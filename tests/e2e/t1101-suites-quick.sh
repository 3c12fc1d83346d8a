#!/usr/bin/env bash
# The transparency harness's quick subset in the default run: CPython's own tests of os, posix,
# shutil, tempfile and pathlib (Debian's libpython3.11-testsuite, nothing to build) natively and
# under brokered, compared test case by test case (tests/suites/run.sh --quick python). Every
# difference not documented in tests/suites/policy.txt is a failure; the full harness with git's,
# tar's and rsync's suites is `make check-suites`.
. "$(dirname "$0")/../lib.sh"
require_core
python3 -c 'import test.test_shutil' 2>/dev/null || {
	[ "${CI:-}" = true ] && { echo "not ok 1 - libpython3.11-testsuite missing (scripts/deps.sh test)" && echo 1..1 && exit 1; }
	skip_all "libpython3.11-testsuite not installed"
}
suites=$(cd "$(dirname "$0")/../suites" && pwd)

TMPDIR=$TEST_DIR bash "$suites/run.sh" --quick --jobs 2 python >"$TEST_DIR/out" 2>&1
st=$?
grep -E '^(not ok|ok) - ' "$TEST_DIR/out" | sed 's/^/# /'
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$TEST_DIR/out")
is "$st" 0 "the harness passes ($summary)"
grep -q '^not ok - ' "$TEST_DIR/out"
[ $? -ne 0 ]
ok $? "no test case differs from native without a documented reason"
n=$(sed -nE 's/^# python: ([0-9]+) cases, ([0-9]+) identical.*/\1/p' "$TEST_DIR/out")
[ "${n:-0}" -ge 200 ]
ok $? "the suite really ran: ${n:-0} test cases compared (at least 200)"
same=$(sed -nE 's/^# python: [0-9]+ cases, ([0-9]+) identical.*/\1/p' "$TEST_DIR/out")
[ "${same:-0}" -ge $((${n:-0} - 5)) ]
ok $? "nearly all identical: ${same:-0} of ${n:-0}"
[ "$st" -eq 0 ] || tail -n 20 "$TEST_DIR/out" | sed 's/^/#   /'
done_testing
