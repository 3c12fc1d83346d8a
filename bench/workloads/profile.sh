#!/usr/bin/env bash
# bench/workloads/profile.sh: where the time of one workload goes under `brokered run`.
# Prepares the workload as bench/peers.sh does (same files, same sizes), then runs it once under
#   perf      `perf record -g --no-inherit` of the brokered process only (the supervisor; the
#             command runs in a forked child that is not recorded), then `perf report`
#   stat      `perf stat` of the brokered process only (context switches, migrations, CPU time)
#   callgrind `valgrind --tool=callgrind` of brokered (children not traced)
#   audit     no profiler: the audit log's us= per op kind (count, sum, median, p90)
# and prints the report. The profiler's output stays in the work directory it names.
#
#   bench/workloads/profile.sh WORKLOAD [perf|stat|callgrind|audit] [SCALE]
#   e.g. BENCH_TMP=/mnt/tmpfs bench/workloads/profile.sh rm-rf perf 0.25   (default: /var/tmp, disk)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
name=${1:?workload name (startup grep git-status untar sed-i rm-rf build dd)}
tool=${2:-perf}
export SCALE=${3:-0.25}
BRK=$(readlink -f "${BROKERED:-$top/build/brokered}")
WORK=$(mktemp -d "${BENCH_TMP:-/var/tmp}/brokered-profile.XXXXXX")
export WORK XDG_STATE_HOME=$WORK/state
. "$top/bench/workloads/common.sh"
wf=$(grep -l "^W_NAME=$name\$" "$top"/bench/workloads/[0-9]*.sh) || { echo "no workload $name" >&2; exit 2; }
. "$wf"
w_prepare "$WORK/tmpl" >/dev/null
cp -a "$WORK/tmpl" "$WORK/ws"
if declare -F w_reset >/dev/null; then w_reset "$WORK/tmpl" "$WORK/ws"; fi
sync
cd "$WORK/ws" || exit 1
case $tool in
perf)
	perf record -q -g --no-inherit -o "$WORK/perf.data" -- "$BRK" run -c "$W_CMD" </dev/null >/dev/null
	perf report -i "$WORK/perf.data" --no-children --percent-limit 1.5 --stdio 2>/dev/null | grep -v '^$' | head -120
	;;
stat)
	perf stat --no-inherit -e task-clock,context-switches,cpu-migrations,page-faults -- "$BRK" run -c "$W_CMD" </dev/null >/dev/null
	;;
callgrind)
	valgrind -q --tool=callgrind --callgrind-out-file="$WORK/callgrind.out" "$BRK" run -c "$W_CMD" </dev/null >/dev/null
	callgrind_annotate --inclusive=yes "$WORK/callgrind.out" 2>/dev/null | head -60
	;;
audit)
	"$BRK" run -c "$W_CMD" </dev/null >/dev/null
	;;
*) echo "unknown tool $tool" >&2; exit 2 ;;
esac
echo "--- audit log us= per op (count, sum ms, median us, p90 us)"
grep -ho ' op=[^ ]*\| us=[0-9]*' "$XDG_STATE_HOME"/brokered/sessions/*/audit.log | paste -d' ' - - |
	awk '{ sub(/^op=/, "", $1); sub(/^us=/, "", $2); print $1, $2 }' | sort -k1,1 -k2,2n |
	awk '{ c[$1]++; s[$1] += $2; v[$1, c[$1]] = $2 }
	     END { for (o in c) printf "%-10s %7d %9.1f %7d %7d\n", o, c[o], s[o] / 1000, v[o, int((c[o] + 1) / 2)], v[o, int(c[o] * 0.9 + 0.5)] }'
echo "work directory: $WORK"
