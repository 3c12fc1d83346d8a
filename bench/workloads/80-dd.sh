# shellcheck shell=bash
W_NAME=dd
W_DESC="large truncating writes: 4 x $(n 64) MiB dd over existing files"
W_CMD="for i in 1 2 3 4; do dd if=/dev/zero of=big\$i bs=1M count=$(n 64) status=none; done"
W_TARGET='-'
w_prepare() {
	local i
	mkdir -p "$1"
	for i in 1 2 3 4; do head -c $(($(n 64) << 20)) /dev/urandom >"$1/big$i"; done
}
