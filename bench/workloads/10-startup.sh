# shellcheck shell=bash
W_NAME=startup
W_DESC='start-up: `true`'
W_CMD='true'
W_TARGET='bwrap 1.00'
w_prepare() { mkdir -p "$1"; }
