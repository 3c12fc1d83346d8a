# shellcheck shell=bash
W_NAME=git-status
W_DESC="read-heavy: git status in a repository of $(n 20000) files, one commit"
W_CMD='git status --porcelain >/dev/null'
W_TARGET='native 1.05'
w_prepare() {
	gen_tree "$1/src" "$(n 20000)" c
	git -C "$1" init -q
	git -C "$1" add -A
	# no automatic gc: a detached one would repack while the template is copied
	git -C "$1" -c gc.auto=0 -c user.name=bench -c user.email=bench@localhost commit -q -m 'generated tree'
	git -C "$1" gc -q
}
# a fresh copy has new inode numbers and ctimes: refresh the index (not timed), as in a repository
# one works in
w_reset() { git -C "$2" update-index -q --refresh >/dev/null 2>&1 || true; }
