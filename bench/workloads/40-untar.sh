# shellcheck shell=bash
W_NAME=untar
W_DESC="create-heavy: tar x of $(n 10000) small files"
W_CMD="tar xf '$WORK/untar.tar'"
W_TARGET='native 1.50'
w_prepare() {
	mkdir -p "$1"
	gen_tree "$WORK/untar-src/tree" "$(n 10000)"
	tar cf "$WORK/untar.tar" -C "$WORK/untar-src" tree
	rm -rf "$WORK/untar-src"
}
