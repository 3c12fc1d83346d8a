#!/usr/bin/env bash
# bench/run.sh: the cost of brokered per file operation and per command, native vs `brokered run`,
# measured in the same run. Medians of REPS repetitions. Output: a table on stdout and in
# bench/out/results.txt.
#
#   BROKERED=build/brokered N=20000 REPS=5 bench/run.sh
#
# Not a test: numbers depend on the machine (see /work/shared/notes/kernel-facts.md for context).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out="$top/bench/out"
mkdir -p "$out"
BROKERED=$(readlink -f "${BROKERED:-$top/build/brokered}")
N=${N:-20000}
REPS=${REPS:-5}
CMD_REPS=${CMD_REPS:-7}
cc -O2 -o "$out/ops" "$top/bench/ops.c"

work=$(mktemp -d "${TMPDIR:-/tmp}/brokered-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export XDG_STATE_HOME="$work/state"
mkdir -p "$XDG_STATE_HOME" "$work/native" "$work/brokered"

median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# now_us: wall clock in microseconds
now_us() { date +%s%6N; }

results="$out/results.txt"
{
	echo "# brokered bench $(date -u +%FT%TZ), $(uname -r), $(nproc) CPUs, N=$N, REPS=$REPS"
	printf '%-44s %12s %12s %8s\n' "operation" "native µs" "brokered µs" "ratio"
} >"$results"

row() { # row NAME NATIVE BROKERED
	awk -v name="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%-44s %12.2f %12.2f %7.1fx\n", name, a, b, (a > 0 ? b / a : 0) }' >>"$results"
}

for op in read write trunc create rename stat; do
	nat=$(for _ in $(seq "$REPS"); do (cd "$work/native" && "$out/ops" "$op" "$N"); done | median)
	brk=$(for _ in $(seq "$REPS"); do (cd "$work/brokered" && "$BROKERED" run -- "$out/ops" "$op" "$N"); done | median)
	case $op in
	read) name="open O_RDONLY + close (per op)" ;;
	write) name="open O_WRONLY existing + close (per op)" ;;
	trunc) name="open O_WRONLY|O_TRUNC existing + close" ;;
	create) name="create (O_CREAT|O_EXCL) + close + unlink" ;;
	rename) name="rename a->b->a (two renames)" ;;
	stat) name="stat (never notified)" ;;
	esac
	row "$name" "$nat" "$brk"
done

# Whole commands: wall time of the command, per command (µs).
cmd_time() { # cmd_time DIR brokered|native CMD...
	local dir=$1 how=$2 t0 t1
	shift 2
	rm -rf "${dir:?}"/f* 2>/dev/null || true
	t0=$(now_us)
	if [ "$how" = brokered ]; then (cd "$dir" && "$BROKERED" run -- "$@" >/dev/null); else (cd "$dir" && "$@" >/dev/null); fi
	t1=$(now_us)
	echo $((t1 - t0))
}
loop='for i in $(seq 200); do echo $i > f$i; done'
for spec in "true|true" "sh -c 200 × echo > f\$i|sh -c $loop"; do
	name=${spec%%|*}
	cmd=${spec#*|}
	if [ "$cmd" = true ]; then set -- true; else set -- sh -c "$loop"; fi
	nat=$(for _ in $(seq "$CMD_REPS"); do cmd_time "$work/native" native "$@"; done | median)
	brk=$(for _ in $(seq "$CMD_REPS"); do cmd_time "$work/brokered" brokered "$@"; done | median)
	row "command: $name" "$nat" "$brk"
done

cat "$results"
