# shellcheck shell=bash
W_NAME=grep
W_DESC="read-heavy: grep -r over $(n 20000) files"
W_CMD='grep -r -c TODO tree >/dev/null'
W_TARGET='native 1.05'
w_prepare() { gen_tree "$1/tree" "$(n 20000)"; }
