# shellcheck shell=bash
W_NAME=rm-rf
W_DESC="delete-heavy: rm -rf of a $(n 20000)-file tree"
W_CMD='rm -rf tree'
W_TARGET='native 1.50'
w_prepare() { gen_tree "$1/tree" "$(n 20000)"; }
