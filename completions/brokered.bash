# bash completion for brokered(1)                                  -*- shell-script -*-
# Subcommands and options are read from `brokered --help` and `brokered COMMAND --help`, so that
# they never drift from the program; turn ids come from `brokered log` of the same session.

_brokered_subcommands() {
	brokered --help 2>/dev/null | awk '/^  [a-z]/ { print $1 }' | sort -u
}

# Options of one subcommand: every option its help names; but when the help is shared by
# several commands (the store commands') and has no option list of its own, only the options on
# the command's own usage lines, and those every store command takes.
_brokered_options() {
	local help
	help=$(brokered "$1" --help 2>&1 </dev/null)
	if ! printf '%s\n' "$help" | grep -qE '^ +-' &&
		[ "$(printf '%s\n' "$help" | grep -oE 'brokered [a-z]+' | sort -u | wc -l)" -gt 1 ]; then
		help=$(printf '%s\n' "$help" | grep -E "brokered $1( |\$)")
		printf '%s\n' --session --workspace --help
	fi
	printf '%s\n' "$help" | grep -oE -- '(^|[][ (|,])--?[a-zA-Z][a-zA-Z-]*' | tr -d '[]( |,' | sort -u
}

_brokered_turns() {
	brokered log "$@" 2>/dev/null | cut -d' ' -f1
	echo last
}

_brokered() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	local i cmd= cmd_i=0 sel=() operands=0 after_dashes=0
	# Options that take a value (the value is not an operand).
	local takes='--workspace|--session|--settings|--socket|--turn|--rollback|--delete-mode|--message|-m|--tool-call|--since|--path|--max-size-mb|-n|--max-count|--older-than|-c|--approve|--timeout|--trace|--max-clients|--rate|--idle-timeout|--to|--report|--flags|--mode|--data'
	for ((i = 1; i < COMP_CWORD; i++)); do
		local w=${COMP_WORDS[i]}
		if [ -z "$cmd" ]; then
			case $w in -*) ;; *) cmd=$w cmd_i=$i ;; esac
			continue
		fi
		if [ "$after_dashes" = 1 ]; then
			operands=$((operands + 1))
			continue
		fi
		case $w in
		--) after_dashes=1 ;;
		--session | --workspace) sel+=("$w" "${COMP_WORDS[i + 1]}") ;;
		esac
		if [[ $w =~ ^($takes)$ ]]; then
			i=$((i + 1))
		elif [[ $w != -* ]]; then
			operands=$((operands + 1))
		fi
	done
	COMPREPLY=()
	if [ -z "$cmd" ]; then
		mapfile -t COMPREPLY < <(compgen -W "$(_brokered_subcommands) --help --version" -- "$cur")
		return
	fi
	case $prev in
	--workspace)
		mapfile -t COMPREPLY < <(compgen -d -- "$cur")
		return
		;;
	--settings | --socket | --report | --to | --path)
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return
		;;
	--turn | --rollback)
		mapfile -t COMPREPLY < <(compgen -W "$(_brokered_turns "${sel[@]}")" -- "$cur")
		return
		;;
	--delete-mode)
		mapfile -t COMPREPLY < <(compgen -W "trash unlink" -- "$cur")
		return
		;;
	--session)
		mapfile -t COMPREPLY < <(compgen -W "$(ls "${XDG_STATE_HOME:-$HOME/.local/state}/brokered/sessions" 2>/dev/null)" -- "$cur")
		return
		;;
	esac
	[[ $prev =~ ^($takes)$ ]] && return
	if [ "$after_dashes" = 0 ] && [[ $cur == -* ]] && [ "$cmd" != sh ]; then
		mapfile -t COMPREPLY < <(compgen -W "$(_brokered_options "$cmd")" -- "$cur")
		return
	fi
	case $cmd in
	show | diff | restore | undo)
		if [ "$operands" -eq 0 ]; then
			mapfile -t COMPREPLY < <(compgen -W "$(_brokered_turns "${sel[@]}")" -- "$cur")
			return
		fi
		;;
	turn)
		[ "$operands" -eq 0 ] && mapfile -t COMPREPLY < <(compgen -W "begin commit" -- "$cur")
		return
		;;
	trash)
		[ "$operands" -eq 0 ] && mapfile -t COMPREPLY < <(compgen -W "list restore empty" -- "$cur") && return
		;;
	client)
		if [ "$operands" -eq 0 ]; then
			mapfile -t COMPREPLY < <(compgen -W "read write delete mkdir rename copy chmod link touch modify-backup enable-backup commit-backup json" -- "$cur")
			return
		fi
		;;
	run)
		if [ "$after_dashes" = 1 ] && [ "$operands" -eq 0 ]; then
			mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
			return
		fi
		;;
	log | gc | doctor | serve)
		return
		;;
	esac
	mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}
complete -o filenames -F _brokered brokered
