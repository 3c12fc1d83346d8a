# shellcheck shell=bash
W_NAME=sed-i
W_DESC="modify-heavy: sed -i over $(n 5000) files"
W_CMD="find src -name '*.c' -print0 | xargs -0 sed -i s/TODO/DONE/"
W_TARGET='native 1.50'
w_prepare() { gen_tree "$1/src" "$(n 5000)" c; }
