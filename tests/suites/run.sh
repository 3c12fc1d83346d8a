#!/usr/bin/env bash
# The transparency harness: runs real projects' own test suites natively and under `brokered run`,
# and compares them test case by test case. A case whose result differs is a failure unless
# tests/suites/policy.txt names it with the reason (a documented policy difference).
#
#   tests/suites/run.sh [OPTIONS] [SUITE[:CASE-GLOB]...]     (default: every suite)
#     --quick          each suite's quick subset (SUITE_QUICK in its recipe)
#     --jobs N         cases run at a time (default: BROKERED_SUITES_JOBS, else 2)
#     --as USER        run the cases as USER (from root; root hides permission bugs)
#     --prepare-only   fetch and build the suites, run nothing
#     --keep           keep the workspaces, stores and outputs
#
#   BROKERED                  the binary under test (default: build/brokered)
#   BROKERED_SUITES_CACHE     where sources and builds are kept (default /var/cache/brokered-suites)
#   BROKERED_SUITES_SETTINGS  more "sandbox" keys for brokered, as JSON members
#                             ('"readOnlyMounts": true')
#
# A recipe (tests/suites/SUITE.sh) defines suite_prepare (fetch and build into the cache, once),
# suite_cases (the case names), suite_run CASE WS (run one case with the current directory and
# $WS as the workspace, every command prefixed with $RUNNER) and suite_parse (its output on stdin
# to "ID<TAB>STATUS<TAB>DESCRIPTION" lines, STATUS pass, fail, skip, xfail or xpass).
# Output: a line per difference, a summary per suite, then "N passed, N failed"; exit 1 if a case
# differs without a documented reason, or a suite cannot be prepared or run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
quick= jobs=${BROKERED_SUITES_JOBS:-2} as= prepare_only= keep=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--jobs) jobs=$2 && shift ;;
	--as) as=$2 && shift ;;
	--prepare-only) prepare_only=1 ;;
	--keep) keep=1 ;;
	-h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' && exit 0 ;;
	--) shift && break ;;
	-*) echo "suites: unknown option $1" >&2 && exit 2 ;;
	*) break ;;
	esac
	shift
done
case $jobs in '' | *[!0-9]* | 0) echo "suites: --jobs takes a positive number" >&2 && exit 2 ;; esac
BROKERED=$(readlink -f "${BROKERED:-$top/build/brokered}")
[ -x "$BROKERED" ] || { echo "suites: $BROKERED is not built (make)" >&2 && exit 2; }
export BROKERED_SUITES_CACHE=${BROKERED_SUITES_CACHE:-/var/cache/brokered-suites}
[ $# -gt 0 ] || set -- $(cd "$here" && ls -- *.sh | grep -vx -e run.sh -e common.sh | sed 's/\.sh$//')

# Scratch: workspaces, stores and outputs, readable by the --as user.
work=$(mktemp -d "${TMPDIR:-/tmp}/brokered-suites.XXXXXX")
chmod 755 "$work"
[ -n "$keep" ] || trap 'chmod -R u+rwX "$work" 2>/dev/null; rm -rf "$work"' EXIT
if [ -n "$as" ]; then
	id "$as" >/dev/null 2>&1 || { echo "suites: no user $as" >&2 && exit 2; }
	# The binary and the recipes where the user can read them, wherever this clone lives.
	mkdir -p "$work/bin" && cp "$BROKERED" "$work/bin/brokered" && cp -r "$here" "$work/recipes"
	chmod -R a+rX "$work/bin" "$work/recipes"
	BROKERED=$work/bin/brokered
fi

# run_as CMD...: CMD as the --as user (with a clean environment), else as ourselves.
run_as() {
	if [ -n "$as" ]; then
		runuser -u "$as" -- env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin LANG=C.UTF-8 \
			HOME="$(getent passwd "$as" | cut -d: -f6)" "$@"
	else
		env PATH="$PATH:/usr/sbin:/sbin" "$@"
	fi
}

# One case in one mode (native or brokered): its own workspace, store and output.
run_case() { # run_case SUITE CASE MODE
	local suite=$1 c=$2 mode=$3 d
	d=$work/$suite/$mode/$(printf '%s' "$c" | tr -c 'A-Za-z0-9._-' _)
	mkdir -p "$d/ws" "$d/state/config/brokered"
	# Pre-images are not flushed (sync: false): a power loss is not what is compared here.
	echo "{\"sandbox\": {\"fileBackup\": {\"sync\": false}${BROKERED_SUITES_SETTINGS:+, $BROKERED_SUITES_SETTINGS}}}" \
		>"$d/state/config/brokered/settings.json"
	[ -z "$as" ] || chown -R "$as" "$d"
	local runner=
	[ "$mode" = native ] || runner="$BROKERED run --workspace $d/ws --session suite-$$ --"
	local recipes=$here
	[ -z "$as" ] || recipes=$work/recipes
	run_as XDG_STATE_HOME="$d/state" XDG_CONFIG_HOME="$d/state/config" TMPDIR="$d/ws" \
		BROKERED_SUITES_CACHE="$BROKERED_SUITES_CACHE" RUNNER="$runner" SUITE_QUICK="$quick" \
		bash -c '. "$1/$2.sh" && cd "$4" && suite_run "$3" "$4"' suite "$recipes" "$suite" "$c" "$d/ws" \
		>"$d.out" 2>&1 </dev/null
	echo $? >"$d.rc"
	(. "$here/$suite.sh" && suite_parse <"$d.out") | sed "s|^|$c:|" >"$d.tsv"
}

# policy SUITE ID: the documented reason for a difference, if any (policy.txt: SUITE ID-GLOB REASON).
policy() {
	local s g reason
	while IFS=$'\t' read -r s g reason; do
		case $s in '' | '#'*) continue ;; esac
		# shellcheck disable=SC2053
		[ "$s" = "$1" ] && [[ $2 == $g ]] && { printf '%s' "$reason"; return 0; }
	done <"$here/policy.txt"
	return 1
}

# stale_policy SUITE N CASE... ID...: name each policy line of SUITE whose case ran here but that
# matched no difference (the difference is gone, or shows only as root or as a user): a notice.
stale_policy() {
	local suite=$1 n=$2 s g reason c cg id ran hit
	shift 2
	local ran_cases=("${@:1:$n}") ids=("${@:$((n + 1))}")
	while IFS=$'\t' read -r s g reason; do
		[ "$s" = "$suite" ] || continue
		ran= hit= cg='*'
		[[ $g != *:* ]] || cg=${g%%:*}
		for c in "${ran_cases[@]}"; do
			# shellcheck disable=SC2053
			[[ $c == $cg ]] && ran=1
		done
		[ -n "$ran" ] || continue
		for id in "${ids[@]}"; do
			# shellcheck disable=SC2053
			[[ $id == $g ]] && hit=1
		done
		[ -n "$hit" ] || echo "# $suite: policy.txt's \"$g\" matched no difference in this run${as:+ (as $as)}"
	done <"$here/policy.txt"
}

total_pass=0 total_fail=0
for spec in "$@"; do
	suite=${spec%%:*} glob='*'
	[ "$spec" = "$suite" ] || glob=${spec#*:}
	if [ ! -f "$here/$suite.sh" ]; then
		echo "not ok - $suite: no recipe tests/suites/$suite.sh"
		total_fail=$((total_fail + 1))
		continue
	fi
	if ! (. "$here/$suite.sh" && suite_prepare) >"$work/$suite.prepare.log" 2>&1; then
		echo "not ok - $suite: could not be prepared:"
		tail -n 20 "$work/$suite.prepare.log" | sed 's/^/#   /'
		total_fail=$((total_fail + 1))
		continue
	fi
	[ -z "$prepare_only" ] || { echo "ok - $suite prepared" && continue; }
	mapfile -t cases < <(. "$here/$suite.sh" && SUITE_QUICK=$quick suite_cases)
	t0=$(date +%s)
	mine=()
	for c in "${cases[@]}"; do
		# shellcheck disable=SC2053
		[[ $c == $glob ]] || continue
		mine+=("$(printf '%s' "$c" | tr -c 'A-Za-z0-9._-' _)")
		for mode in native brokered; do
			while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n 2>/dev/null || true; done
			run_case "$suite" "$c" "$mode" &
		done
	done
	wait
	n=0 same=0 documented=0 differ=0 broken=0
	doc_ids=()
	for name in "${mine[@]}"; do
		tsv=$work/$suite/native/$name.tsv
		b=$work/$suite/brokered/$name.tsv
		if [ ! -s "$tsv" ]; then
			echo "not ok - $suite $name: no test case found in the native output"
			sed 's/^/#   /' "$work/$suite/native/$name.out" | tail -n 5
			broken=$((broken + 1))
			continue
		fi
		# Every case of the native run, looked up in the brokered run (a missing one differs).
		while IFS=$'\t' read -r id st desc; do
			n=$((n + 1))
			bst=$(awk -F'\t' -v id="$id" '$1 == id { print $2; exit }' "$b")
			[ -n "$bst" ] || bst=missing
			if [ "$bst" = "$st" ]; then
				same=$((same + 1))
			elif reason=$(policy "$suite" "$id"); then
				documented=$((documented + 1))
				doc_ids+=("$id")
				echo "ok - $suite $id: $st natively, $bst under brokered: documented: $reason"
			else
				differ=$((differ + 1))
				echo "not ok - $suite $id: $st natively, $bst under brokered: $desc"
			fi
		done <"$tsv"
	done
	stale_policy "$suite" "${#mine[@]}" "${mine[@]}" "${doc_ids[@]}"
	echo "# $suite: $n cases, $same identical, $documented documented differences, $differ different," \
		"$broken scripts without results ($(($(date +%s) - t0)) s${as:+, as $as})"
	total_pass=$((total_pass + same + documented))
	total_fail=$((total_fail + differ + broken))
done
[ -z "$keep" ] || echo "# kept $work"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
