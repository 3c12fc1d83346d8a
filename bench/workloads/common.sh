# shellcheck shell=bash
# bench/workloads/common.sh: helpers for the workload definitions (sourced by bench/peers.sh).
# A workload file NN-name.sh sets
#   W_NAME    short name (table row, chart label)
#   W_DESC    what it does
#   W_CMD     the timed command, a /bin/sh -c string run in the fresh workspace
#   W_TARGET  "native R" (ratio to native at most R) or "bwrap R" (ratio to bubblewrap), "-" for none
# and defines
#   w_prepare DIR   build the template workspace DIR once (not timed); may use $WORK for files
#                   kept outside the workspace (e.g. a tarball); status 2: the workload is
#                   skipped (a tool it needs is missing)
#   w_reset DIR WS  (optional) after WS was made a fresh copy of DIR, put it in its steady state
# Sizes scale with $SCALE (1 = full, 0.25 in quick mode): use `n COUNT`.

# n COUNT: COUNT scaled by $SCALE, at least 1
n() { awk -v c="$1" -v s="${SCALE:-1}" 'BEGIN { v = int(c * s); print (v < 1 ? 1 : v) }'; }

# gen_tree DIR FILES [EXT]: FILES small text files (~1.5 KiB) in 100-file directories
gen_tree() {
	local dir=$1 files=$2 ext=${3:-txt} i d body
	body=$(for l in $(seq 24); do printf 'line %02d: the quick brown fox jumps over the lazy dog 0123456789\n' "$l"; done)
	mkdir -p "$dir"
	for ((i = 0; i < files; i++)); do
		d=$dir/d$((i / 100))
		((i % 100 == 0)) && mkdir -p "$d"
		printf '%s\n/* file %d TODO */\n' "$body" "$i" >"$d/f$i.$ext"
	done
}
