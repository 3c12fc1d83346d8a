# fish completion for brokered(1). Subcommands and options are read from `brokered --help` and
# `brokered COMMAND --help`, so that they never drift from the program; turn ids come from
# `brokered log`.

function __brokered_subcommands
    brokered --help 2>/dev/null | awk '/^  [a-z]/ { print $1 }' | sort -u
end

# Every option the help names; when the help is shared by several commands (the store commands')
# and has no option list of its own, only those on the command's usage lines.
function __brokered_options
    set -l help (brokered $argv[1] --help 2>&1 </dev/null)
    if not printf '%s\n' $help | grep -qE '^ +-'
        and test (printf '%s\n' $help | grep -oE 'brokered [a-z]+' | sort -u | count) -gt 1
        set help (printf '%s\n' $help | grep -E "brokered $argv[1]( |\$)")
        printf '%s\n' --session --workspace --help
    end
    printf '%s\n' $help | grep -oE -- '(^|[][ (|,])--?[a-zA-Z][a-zA-Z-]*' | tr -d '[]( |,' | sort -u
end

# "CMD OPERANDS DASHES PENDING": the subcommand, how many operands follow it (options and their
# values not counted), whether `--` was seen, whether the last word is an option awaiting a value.
function __brokered_state
    set -l takes --workspace --session --settings --socket --turn --rollback --delete-mode \
        --message -m --tool-call --since --path --max-size-mb -n --max-count --older-than -c \
        --approve --timeout --trace --max-clients --rate --idle-timeout --to --report --flags \
        --mode --data
    set -l words (commandline -opc)
    set -l cmd ''
    set -l operands 0
    set -l dashes 0
    set -l pending 0
    for w in $words[2..-1]
        if test -z "$cmd"
            string match -q -- '-*' $w; or set cmd $w
            continue
        end
        if test $pending = 1
            set pending 0
        else if test $dashes = 1
            set operands (math $operands + 1)
        else if test "$w" = --
            set dashes 1
        else if contains -- $w $takes
            set pending 1
        else if not string match -q -- '-*' $w
            set operands (math $operands + 1)
        end
    end
    echo "$cmd" $operands $dashes $pending
end

# __brokered_at CMD...: the subcommand is one of CMD, no operand yet, no option value pending.
function __brokered_at
    set -l s (string split ' ' (__brokered_state))
    contains -- "$s[1]" $argv; and test $s[2] = 0; and test $s[4] = 0
end

# Paths: after the first operand of the store commands, any operand of the others.
function __brokered_wants_path
    set -l s (string split ' ' (__brokered_state))
    test -n "$s[1]"; and test $s[4] = 0; or return 1
    switch $s[1]
        case show diff restore undo client
            test $s[2] -gt 0
        case log gc doctor serve turn trash
            return 1
        case '*'
            return 0
    end
end

function __brokered_wants_option
    set -l s (string split ' ' (__brokered_state))
    test -n "$s[1]"; and test "$s[1]" != sh; and test $s[3] = 0; and test $s[4] = 0
    and string match -q -- '-*' (commandline -ct)
end

# __brokered_value_of OPTION...: the last word is one of OPTION, awaiting its value.
function __brokered_value_of
    set -l words (commandline -opc)
    contains -- $words[-1] $argv
end

function __brokered_turns
    brokered log 2>/dev/null | cut -d' ' -f1
    echo last
end

function __brokered_current_options
    set -l s (string split ' ' (__brokered_state))
    __brokered_options $s[1]
end

complete -c brokered -f
complete -c brokered -n __fish_use_subcommand -a '(__brokered_subcommands)'
complete -c brokered -n __fish_use_subcommand -l help -d 'print usage'
complete -c brokered -n __fish_use_subcommand -l version -d 'print the version'
complete -c brokered -n __brokered_wants_option -a '(__brokered_current_options)'
complete -c brokered -n '__brokered_at show diff restore undo' -a '(__brokered_turns)' -d turn
complete -c brokered -n '__brokered_at turn' -a 'begin commit'
complete -c brokered -n '__brokered_at trash' -a 'list restore empty'
complete -c brokered -n '__brokered_at client' -a 'read write delete mkdir rename copy chmod link touch modify-backup enable-backup commit-backup json'
complete -c brokered -n __brokered_wants_path -F
complete -c brokered -n '__brokered_value_of --turn --rollback' -a '(__brokered_turns)' -d turn
complete -c brokered -n '__brokered_value_of --delete-mode' -a 'trash unlink'
complete -c brokered -n '__brokered_value_of --workspace' -a '(__fish_complete_directories (commandline -ct))'
complete -c brokered -n '__brokered_value_of --settings --socket --path --report --to' -F
complete -c brokered -n '__brokered_value_of --session' -a '(path basename (path filter -d -- (set -q XDG_STATE_HOME; and echo $XDG_STATE_HOME; or echo ~/.local/state)/brokered/sessions/*) 2>/dev/null)'
