#!/usr/bin/env bash
# Issue 12: shell completions for bash, zsh and fish, each loaded in its own shell and asked for
# completions: subcommands (as --help lists them), a subcommand's options, turn ids from
# `brokered log`, option values, paths.
SRC=${BROKERED_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$(dirname "$0")/../lib.sh"
require_core
[ -d "$SRC/completions" ] || skip_all "no source tree at $SRC"
# The completions call `brokered` by name, as an installed one is.
mkdir -p "$TEST_DIR/bin"
ln -s "$BROKERED" "$TEST_DIR/bin/brokered"
export PATH="$TEST_DIR/bin:$PATH"

echo one >file-one.txt
mkdir subdir
brk run -m "a turn" -c 'echo two > file-one.txt' </dev/null
T=$(last_turn_id)
[ -n "$T" ]
ok $? "a turn to complete ($T)"
cmds=$(brokered --help | awk '/^  [a-z]/ { print $1 }' | sort -u | paste -sd' ' -)

words() { tr ' ' '\n' | grep -v '^$' | sort -u | paste -sd' ' -; }
# has WORDS WANTED...: every WANTED is among WORDS
has() {
	local got=" $1 " w
	shift
	for w in "$@"; do [[ $got == *" $w "* ]] || return 1; done
}
check_shell() { # check_shell NAME FUNCTION: the same questions to one shell
	local sh=$1 f=$2 got
	got=$($f brokered "" | grep -v '^-' | words)
	is "$got" "$cmds" "$sh: the subcommands of --help"
	got=$($f brokered -- | words)
	is "$got" "--help --version" "$sh: brokered's own options"
	got=$($f brokered sho | words)
	is "$got" show "$sh: a subcommand from its prefix"
	got=$($f brokered show "" | words)
	has "$got" "$T" last
	ok $? "$sh: show's first operand is a turn id from log, or last (got: $got)"
	got=$($f brokered show --s | words)
	is "$got" "--session --stat" "$sh: show's options from a prefix"
	got=$($f brokered log --s | words)
	is "$got" "--session --since" "$sh: log's options from a prefix (not show's)"
	got=$($f brokered run --deg | words)
	is "$got" "--degraded" "$sh: run's options"
	got=$($f brokered serve --delete-mode "" | words)
	is "$got" "trash unlink" "$sh: an option's values"
	got=$($f brokered diff "$T" file- | words)
	is "$got" "file-one.txt" "$sh: diff's paths after the turn"
	got=$($f brokered undo --turn "" | words)
	has "$got" "$T"
	ok $? "$sh: --turn takes a turn id"
	got=$($f brokered turn "" | words)
	is "$got" "begin commit" "$sh: turn begin | commit"
}

# ---- bash: the function `complete -F` registers ----
bash_complete() {
	bash --norc --noprofile -c '
		. "$1"; shift
		complete -p brokered >/dev/null || exit 1
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		_brokered brokered "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
		printf "%s\n" "${COMPREPLY[@]}"' bash "$SRC/completions/brokered.bash" "$@"
}
bash --norc --noprofile -c '. "$1" && complete -p brokered' bash "$SRC/completions/brokered.bash" | grep -q -- '-F _brokered brokered'
ok $? "bash: loading the file registers _brokered for brokered"
check_shell bash bash_complete

# ---- zsh: compinit finds _brokered on fpath; compadd and _files report what they were given ----
if command -v zsh >/dev/null 2>&1; then
	zsh_complete() {
		zsh -f -c '
			fpath=("$1" $fpath); shift
			autoload -Uz compinit && compinit -u -d "$ZDUMP"
			[[ $_comps[brokered] == _brokered ]] || exit 1
			compadd() {
				local -a out
				while (( $# )); do
					case $1 in -a) shift; out+=(${(P)1}) ;; -*) ;; *) out+=($1) ;; esac
					shift
				done
				print -rl -- $out
			}
			_files() { print -rl -- ${words[CURRENT]}*(N) }
			_command_names() { print -r -- "<commands>" }
			words=("$@"); CURRENT=$#
			local cur=$words[CURRENT]
			autoload +X _brokered && _brokered | grep -E "^${cur//-/\\-}"' zsh "$SRC/completions" "$@"
	}
	export ZDUMP=$TEST_DIR/zcompdump
	check_shell zsh zsh_complete
else
	[ "${CI:-}" = true ] && ok 1 "zsh is installed (scripts/deps.sh test)"
	skip "zsh completions" "zsh not installed"
fi

# ---- fish: complete -C asks fish itself ----
if command -v fish >/dev/null 2>&1; then
	fish_complete() {
		fish --no-config -c 'source $argv[1]; complete -C (string join " " -- $argv[2..-1]) | cut -f1' \
			"$SRC/completions/brokered.fish" "$@"
	}
	check_shell fish fish_complete
else
	[ "${CI:-}" = true ] && ok 1 "fish is installed (scripts/deps.sh test)"
	skip "fish completions" "fish not installed"
fi

done_testing
