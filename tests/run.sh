#!/usr/bin/env bash
# Run every test: unit tests of both builds, then the end-to-end scripts against the release and
# the sanitizer build, as the invoking user and (when that is root) as an unprivileged user, and
# some of them again, as root and as that user, with sandbox.readOnlyMounts or sandbox.copyOnWrite.
# Prints TAP per script and a final "N passed, N failed, N skipped" line; exits non-zero on failure.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1

pass=0 fail=0 skipped=0
failed_names=()
TEST_USER=${BROKERED_TEST_USER:-brokered-test}
log_dir=$(mktemp -d /tmp/brokered-tests.XXXXXX)
chmod 755 "$log_dir"

# tally NAME FILE: count TAP lines of one script's output
tally() {
	local name=$1 out=$2 st=$3
	local p f s
	p=$(grep -cE '^ok [0-9]+' "$out" | head -1)
	s=$(grep -cE '^ok [0-9]+ .*# SKIP' "$out" | head -1)
	# TAP: a failing "# TODO" test is a known gap, not a failure
	f=$(grep -E '^not ok [0-9]+' "$out" | grep -cv '# TODO' | head -1)
	p=$((p - s))
	if grep -qE '^1\.\.0 # SKIP' "$out"; then s=$((s + 1)); fi
	if [ "$st" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed or exited non-zero without a failing line
		echo "not ok - $name exited with status $st" >>"$out"
	fi
	# The TAP plan must be there, once, and match the results: a script that stops early (an
	# `exit 0` in the middle, a `set -e` abort) must not pass on the checks it ran so far.
	local plans planned ran
	plans=$(grep -cE '^1\.\.[0-9]+' "$out" | head -1)
	planned=$(grep -oE '^1\.\.[0-9]+' "$out" | head -1)
	planned=${planned#1..}
	ran=$(grep -cE '^(not )?ok [0-9]+' "$out" | head -1)
	if [ "$plans" -ne 1 ] || [ "${planned:-x}" != "$ran" ]; then
		f=$((f + 1))
		echo "not ok - $name: TAP plan '1..${planned:-?}' (${plans} plan lines) does not match the $ran results" >>"$out"
	fi
	pass=$((pass + p)) fail=$((fail + f)) skipped=$((skipped + s))
	if [ "$f" -gt 0 ]; then
		failed_names+=("$name")
		echo "FAIL $name"
		sed 's/^/    /' "$out" | grep -vE '^    ok ' | tail -40
	else
		printf 'ok   %s (%d passed%s)\n' "$name" "$p" "$([ "$s" -gt 0 ] && echo ", $s skipped")"
	fi
}

run_one() { # run_one NAME OUTFILE COMMAND...
	local name=$1 out=$2 t0 st
	shift 2
	t0=$(date +%s)
	timeout 600 "$@" >"$out" 2>&1 </dev/null
	st=$?
	tally "$name [$(($(date +%s) - t0))s]" "$out" $st
}

echo "== unit tests"
for t in build/unit/test-* build-san/unit/test-*; do
	[ -x "$t" ] || continue
	run_one "$t" "$log_dir/$(echo "$t" | tr / _).log" "$t"
done

# Unprivileged user for the sandbox tests (root hides permission bugs).
as_user=
if [ "$(id -u)" -eq 0 ]; then
	if ! id "$TEST_USER" >/dev/null 2>&1; then
		useradd --system --create-home --shell /bin/bash "$TEST_USER" >/dev/null 2>&1 ||
			useradd -r -m -s /bin/bash "$TEST_USER"
	fi
	if id "$TEST_USER" >/dev/null 2>&1; then
		as_user=$TEST_USER
	elif [ "${CI:-}" = true ]; then
		echo "not ok - could not create the unprivileged test user"
		fail=$((fail + 1))
	fi
fi

# A copy of what the tests need, readable by the unprivileged user wherever the clone lives.
stage=$(mktemp -d /tmp/brokered-stage.XXXXXX)
mkdir -p "$stage/build" "$stage/build-san"
cp -a tests "$stage/"
# The source tree too (no builds, no .git): the install, documentation and packaging tests read it.
mkdir -p "$stage/tree"
tar -cf - --exclude=./.git --exclude='./build*' --exclude=./bench/out . | tar -C "$stage/tree" -xf -
for b in build build-san; do
	[ -x "$b/brokered" ] && cp "$b/brokered" "$stage/$b/" && ln -sf brokered "$stage/$b/brokered-sh"
	[ -d "$b/helpers" ] && cp -r "$b/helpers" "$stage/$b/"
done
chmod -R a+rX "$stage"

scripts=()
if [ $# -gt 0 ]; then scripts=("$@"); else
	# The longest scripts first (about a minute or more each, in some build), so that none of them
	# is left running alone at the end; then the rest in order.
	heavy=(t0200-tools-workspace t0370-store-kept t0402-escape-dotdot-magic t0210-tools-outside
		t0405-escape-fd-meta t0360-store-edges t0940-debian-package t0403-escape-link-rename
		t0401-escape-symlink t0300-store-random)
	for h in "${heavy[@]}"; do [ -f "tests/e2e/$h.sh" ] && scripts+=("tests/e2e/$h.sh"); done
	for s in tests/e2e/t[0-9]*.sh; do
		[[ " ${heavy[*]} " == *" $(basename "$s" .sh) "* ]] || scripts+=("$s")
	done
fi

# Jobs: every script with the release build as root and as the unprivileged user, and with the
# sanitizer build as root; run in parallel (BROKERED_TEST_JOBS, default: cores + 1), reported in order.
jobs=${BROKERED_TEST_JOBS:-$(($(nproc) + 1))}
job_names=() job_logs=()
san_env=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)
start_job() { # start_job NAME LOG COMMAND...
	local name=$1 log=$2
	shift 2
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n 2>/dev/null || true; done
	job_names+=("$name") job_logs+=("$log")
	(
		t0=$(date +%s)
		timeout 900 "$@" >"$log" 2>&1 </dev/null
		echo "$? $(($(date +%s) - t0))" >"$log.rc"
	) &
}
# Static checks, as jobs of the same pool (they overlap with the end-to-end scripts): each is a
# make target that must pass; its output is kept in the log as TAP comments.
static_checks=(${BROKERED_STATIC_CHECKS-format-check analyze shellcheck cross-aarch64})
if [ $# -eq 0 ]; then
	for t in "${static_checks[@]}"; do
		start_job "static/make $t" "$log_dir/static-$t.log" bash -c '
			out=$(make -s -j1 "$1" 2>&1); st=$?
			printf "%s\n" "$out" | tail -60 | sed "s/^/# /"
			if [ $st -eq 0 ]; then echo "ok 1 - make $1"; else echo "not ok 1 - make $1"; fi
			echo 1..1' _ "$t"
	done
fi

# Fuzz targets for a bounded time when clang is there (make fuzz built them), as jobs of the same
# pool: each is one process on one core, so they overlap with the other jobs.
fuzz_job() { # fuzz_job TARGET: run it on a copy of its seed corpus; TAP on stdout
	local f=$1 name work st
	name=$(basename "$f")
	work=$(mktemp -d)
	[ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name"/. "$work"/ 2>/dev/null
	"$f" -max_total_time="${BROKERED_FUZZ_SECONDS:-5}" -rss_limit_mb=2048 "$work" 2>&1 | tail -40 | sed 's/^/# /'
	st=${PIPESTATUS[0]}
	rm -rf "$work"
	if [ "$st" -eq 0 ]; then echo "ok 1 - $name: no finding"; else echo "not ok 1 - $name: finding (see log)"; fi
	echo 1..1
}
export -f fuzz_job
if [ $# -eq 0 ] && [ -d build-fuzz ]; then
	for f in build-fuzz/fuzz-*; do
		[ -x "$f" ] || continue
		start_job "fuzz/$(basename "$f") (${BROKERED_FUZZ_SECONDS:-5}s)" "$log_dir/$(basename "$f").log" \
			bash -c 'fuzz_job "$1"' _ "$f"
	done
fi

# The sanitizer build skips the two tool matrices and the four largest escape matrices (the same
# operations as the other scripts, hundreds of times over, twice as slow under ASan; the other
# escape scripts, t0404, t0406 and t0407, run under it), the real Claude Code CLI (its hooks run under
# the sanitizer build in t0710), the store's kill-and-cut rounds (the same recovery code as
# t0310's, whose rounds it runs) and the scripts that check documentation and completions, not
# the program's code: the test run stays under 20 minutes.
# BROKERED_TEST_FULL=1 (make check-full) runs them all under it as well.
[ -n "${BROKERED_TEST_FULL:-}" ] && BROKERED_SAN_SKIP=${BROKERED_SAN_SKIP-}
san_skip=" ${BROKERED_SAN_SKIP-t0200-tools-workspace t0210-tools-outside t0401-escape-symlink t0402-escape-dotdot-magic t0403-escape-link-rename t0405-escape-fd-meta t0720-claude-code t0370-store-kept t0910-install-docs t0920-completions} "
# Scripts that never run the sandbox run once, as root: the unprivileged user adds nothing there.
root_only=" ${BROKERED_ROOT_ONLY-t0920-completions t0940-debian-package} "
# Scripts that run once more as root and as the unprivileged user with sandbox.readOnlyMounts
# (the release build): names and paths, sockets, signals, the store's random turns, git, the
# syscalls that differed from native, the escapes through .. and magic links (t0412 tests the mode
# itself).
ro_mounts_too=" ${BROKERED_RO_MOUNTS_TOO-t0100-run-basics t0110-run-signals t0220-names-paths t0300-store-random t0402-escape-dotdot-magic t0800-net-unix t1000-git-flows t1100-transparency-syscalls} "
# and these with sandbox.copyOnWrite (as root and as the user): the store's scripts whose checks
# are about the files and the turns (not the audit log's syscalls, which that mode logs as merged
# changes)
cow_too=" ${BROKERED_COW_TOO-t0300-store-random t0320-store-cli t0340-store-settings t0350-store-full} "
# user_job NAME ENV LOG-SUFFIX [LABEL]: the script as the unprivileged user (release build), with ENV
# (VAR=value or "") added
user_job() {
	start_job "build/$1 ($as_user${4:-})" "$log_dir/build-$1-$3.log" \
		runuser -u "$as_user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$(getent passwd "$as_user" | cut -d: -f6)" \
		CI="${CI:-}" LANG=C.UTF-8 BROKERED_AGENT_CLIS="${BROKERED_AGENT_CLIS:-}" \
		BROKERED_TEST_FULL="${BROKERED_TEST_FULL:-}" ${2:+"$2"} \
		"${san_env[@]}" BROKERED="$stage/build/brokered" HELPERS="$stage/build/helpers" \
		BROKERED_SRC="$stage/tree" \
		bash "$stage/tests/e2e/$1.sh"
}
for s in "${scripts[@]}"; do
	name=$(basename "$s" .sh)
	for build in build build-san; do
		bin="$stage/$build/brokered"
		[ -x "$bin" ] || continue
		if [ "$build" = build-san ] && [ $# -eq 0 ] && [[ $san_skip == *" $name "* ]]; then
			continue
		fi
		start_job "$build/$name (uid $(id -u))" "$log_dir/$build-$name-root.log" \
			env "${san_env[@]}" BROKERED="$bin" HELPERS="$stage/$build/helpers" BROKERED_SRC="$stage/tree" \
			bash "$stage/tests/e2e/$name.sh"
		if [ "$(id -u)" = 0 ] && [ "$build" = build ] && [[ $ro_mounts_too == *" $name "* ]]; then
			start_job "$build/$name (uid 0, readOnlyMounts)" "$log_dir/$build-$name-ro.log" \
				env "${san_env[@]}" BROKERED="$bin" HELPERS="$stage/$build/helpers" BROKERED_SRC="$stage/tree" \
				BROKERED_TEST_READ_ONLY_MOUNTS=1 bash "$stage/tests/e2e/$name.sh"
		fi
		if [ "$(id -u)" = 0 ] && [ "$build" = build ] && [[ $cow_too == *" $name "* ]]; then
			start_job "$build/$name (uid 0, copyOnWrite)" "$log_dir/$build-$name-cow.log" \
				env "${san_env[@]}" BROKERED="$bin" HELPERS="$stage/$build/helpers" BROKERED_SRC="$stage/tree" \
				BROKERED_TEST_COPY_ON_WRITE=1 bash "$stage/tests/e2e/$name.sh"
		fi
		if [ -n "$as_user" ] && [ "$build" = build ] && [[ $root_only != *" $name "* ]]; then
			user_job "$name" "" user
			# the two modes again without root (in a user namespace of the command's own)
			[[ $ro_mounts_too == *" $name "* ]] && user_job "$name" BROKERED_TEST_READ_ONLY_MOUNTS=1 user-ro ", readOnlyMounts"
			[[ $cow_too == *" $name "* ]] && user_job "$name" BROKERED_TEST_COPY_ON_WRITE=1 user-cow ", copyOnWrite"
		fi
	done
done
wait
echo "== end-to-end tests ($jobs at a time)"
for i in "${!job_names[@]}"; do
	log=${job_logs[$i]}
	read -r st secs <"$log.rc" 2>/dev/null || { st=1; secs=?; }
	tally "${job_names[$i]} [${secs}s]" "$log" "$st"
done
rm -rf "$stage"

echo
if [ ${#failed_names[@]} -gt 0 ]; then
	echo "failed: ${failed_names[*]}"
	echo "logs: $log_dir"
else
	rm -rf "$log_dir"
fi
echo "$pass passed, $fail failed, $skipped skipped"
[ "$fail" -eq 0 ]
