#!/usr/bin/env bash
# Backup-store benchmark: each workload natively and under `brokered run` in the same invocation,
# median of N runs (default 3), ratio brokered/native, and the store's bytes written per changed
# byte (du of the store before/after each brokered run, against the bytes the workload changed).
# Prints a Markdown table and writes it to bench/out/store.md.
#
#   bench/store.sh [-n RUNS] [-b BROKERED]     (env: FILES=3000 TREE=5000 BIGMB=64 NBIG=5)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
RUNS=3
BRK=$top/build/brokered
while getopts n:b: o; do case $o in n) RUNS=$OPTARG ;; b) BRK=$OPTARG ;; *) exit 2 ;; esac; done
FILES=${FILES:-3000} TREE=${TREE:-5000} BIGMB=${BIGMB:-64} NBIG=${NBIG:-5}
[ -x "$BRK" ] || { echo "no brokered at $BRK (make)" >&2; exit 1; }
BRK=$(readlink -f "$BRK")
work=$(mktemp -d "${TMPDIR:-/var/tmp}/brokered-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export XDG_STATE_HOME=$work/state
# Back up the big files too (the default limit, 10 MB, would change them without a backup).
export XDG_CONFIG_HOME=$work/config
mkdir -p "$XDG_CONFIG_HOME/brokered"
echo '{"sandbox": {"fileBackup": {"maxSizeMB": 1024}}}' >"$XDG_CONFIG_HOME/brokered/settings.json"
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
store_bytes() { mkdir -p "$XDG_STATE_HOME"; du -sb "$XDG_STATE_HOME" | cut -f1; }

# ---- workloads: setup_X DIR (not timed) prints the bytes the workload will change; cmd_X (timed) ----
setup_sed() {
	mkdir -p "$1/src"
	local i
	for i in $(seq "$FILES"); do printf 'int f%d(void) { return 0; } /* TODO */\n%.0s' "$i" $(seq 20) >"$1/src/f$i.c"; done
	du -sb --apparent-size "$1/src" | cut -f1
}
cmd_sed='find src -name "*.c" -print0 | xargs -0 sed -i s/TODO/DONE/'
setup_tree() { echo $((TREE * 1024)); }
cmd_tree='mkdir t && cd t && for d in $(seq 50); do mkdir d$d; for f in $(seq '$((TREE / 50))'); do printf %1024s x > d$d/f$f; done; done; cd .. && rm -rf t'
setup_big() {
	local i
	for i in $(seq "$NBIG"); do head -c $((BIGMB << 20)) /dev/urandom >"$1/big$i"; done
	echo $((NBIG * BIGMB << 20))
}
cmd_big='for i in $(seq '$NBIG'); do dd if=/dev/zero of=big$i bs=1M count='$BIGMB' conv=notrunc status=none; done'

row() { # row NAME SETUP CMD
	local name=$1 setup=$2 cmd=$3 k d t0 t1 changed s0 s1 nat=() brk=() per=()
	for k in $(seq "$RUNS"); do
		d=$work/nat$k && mkdir -p "$d"
		changed=$("$setup" "$d")
		sync
		t0=$(now); (cd "$d" && sh -c "$cmd"); t1=$(now)
		nat+=("$(echo "$t1 - $t0" | bc)")
		rm -rf "$d"
		d=$work/brk$k && mkdir -p "$d"
		changed=$("$setup" "$d")
		sync
		s0=$(store_bytes)
		t0=$(now); (cd "$d" && "$BRK" run -c "$cmd" </dev/null 2>/dev/null); t1=$(now)
		s1=$(store_bytes)
		brk+=("$(echo "$t1 - $t0" | bc)")
		per+=("$(echo "scale=4; ($s1 - $s0) / $changed" | bc)")
		rm -rf "$d" "$XDG_STATE_HOME"
	done
	local mn mb mp
	mn=$(printf '%s\n' "${nat[@]}" | median)
	mb=$(printf '%s\n' "${brk[@]}" | median)
	mp=$(printf '%s\n' "${per[@]}" | median)
	printf '| %s | %.3f | %.3f | %.2f | %s | %.3f |\n' "$name" "$mn" "$mb" "$(echo "scale=4; $mb / $mn" | bc)" \
		"$(numfmt --to=iec "$changed")" "$mp"
}

{
	echo "# brokered backup store benchmark"
	echo
	echo "$(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs, $(df -T "$work" | awk 'NR==2 {print $2}') at $work, median of $RUNS runs, $BRK; sandbox.fileBackup.maxSizeMB=1024 (every file backed up), sync on"
	echo
	echo "| workload | native s | brokered s | ratio | bytes changed | store bytes / changed byte |"
	echo "|---|---|---|---|---|---|"
	row "sed -i over $FILES files" setup_sed "$cmd_sed"
	row "create $TREE-file tree, rm -rf" setup_tree "$cmd_tree"
	row "$NBIG x $BIGMB MiB dd conv=notrunc" setup_big "$cmd_big"
} | tee "$top/bench/out/store.md.tmp"
mv "$top/bench/out/store.md.tmp" "$top/bench/out/store.md"
