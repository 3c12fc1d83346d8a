# shellcheck shell=bash
# Shared set-up of the escape suite (tests/e2e/t04*-escape-*.sh), sourced after ../lib.sh.
#
# Protected fixtures: files in $OUTSIDE, a fake $HOME inside TEST_DIR (.bashrc, .ssh/id_rsa, ...),
# $WS/.brokered, $XDG_CONFIG_HOME/brokered and a canary in $XDG_STATE_HOME/brokered. After every
# attempt they must be identical: bytes, type, mode, owner, size, link count, mtime, ctime, xattrs.

ESC=$(helpers_dir 2>/dev/null)/escape-sys
[ -x "$ESC" ] || skip_all "escape-sys helper not built (make helpers)"
ESC_DIR=$(dirname "$ESC")

export HOME="$TEST_DIR/home"
PROTECTED_ROOTS=("$OUTSIDE" "$HOME" "$WS/.brokered" "$XDG_CONFIG_HOME/brokered" "$XDG_STATE_HOME/brokered/canary")

make_fixtures() {
	mkdir -p "$HOME/.ssh" "$HOME/.config/brokered" "$HOME/.docker" "$OUTSIDE/dir" \
		"$WS/.brokered" "$XDG_CONFIG_HOME/brokered" "$XDG_STATE_HOME/brokered/canary"
	echo 'alias ls="ls --color"' >"$HOME/.bashrc"
	echo 'PATH=$PATH' >"$HOME/.profile"
	echo '-----BEGIN OPENSSH PRIVATE KEY-----' >"$HOME/.ssh/id_rsa"
	chmod 600 "$HOME/.ssh/id_rsa"
	echo 'ssh-ed25519 AAAA user@host' >"$HOME/.ssh/authorized_keys"
	echo '{"auths":{}}' >"$HOME/.docker/config.json"
	echo '{}' >"$HOME/.config/brokered/settings.json"
	echo '{}' >"$XDG_CONFIG_HOME/brokered/settings.json"
	echo '{}' >"$WS/.brokered/settings.json"
	echo 'canary' >"$XDG_STATE_HOME/brokered/canary/file"
	echo 'outside secret' >"$OUTSIDE/x"
	echo 'outside y' >"$OUTSIDE/dir/y"
	printf 'ro\n' >"$OUTSIDE/ro"
	chmod 644 "$OUTSIDE/x" "$OUTSIDE/dir/y"
	chmod 444 "$OUTSIDE/ro"
	mkfifo "$OUTSIDE/fifo"
	# a fixed, old mtime so that any touch shows
	find "${PROTECTED_ROOTS[@]}" -exec touch -h -d '2001-02-03 04:05:06' {} + 2>/dev/null
	# the unprivileged run must be able to read (not write) everything, as a user's own files
	chmod -R go+rX "$TEST_DIR" 2>/dev/null
	chmod 600 "$HOME/.ssh/id_rsa"
	chmod 444 "$OUTSIDE/ro"
}

# One line per path under the protected roots: every property an escape could change.
protected_snapshot() { "$ESC" snapshot "${PROTECTED_ROOTS[@]}"; }

# snap_changes BEFORE AFTER: the differing lines, as TAP comments
snap_changes() { diff <(printf '%s\n' "$1") <(printf '%s\n' "$2") | grep '^[<>]' | head -10 | sed 's/^/#   /'; }

# audit_count OPS REALPATH: how many deny lines name it so far (as is, or with ~ for $HOME); the
# escaping is audit_escape's (lib.sh), done in one perl process because this runs twice an attempt.
audit_count() {
	audit_log | perl -e '
		my ($ops, $p, $home) = @ARGV;
		my @forms = ($p);
		push @forms, "~" . substr($p, length $home) if $home ne "" && (index($p, "$home/") == 0 || $p eq $home);
		s/([\x00-\x20\x7f-\xff"\x27=\\])/sprintf("\\x%02x", ord $1)/ge for @forms;
		my $n = 0;
		while (my $l = <STDIN>) {
			next unless $l =~ / op=(?:$ops) / && index($l, " decision=deny ") >= 0;
			for my $f (@forms) {
				if (index($l, " normalisedPath=$f ") >= 0 || index($l, " normalisedTo=$f ") >= 0) { $n++; last }
			}
		}
		print "$n\n";' "$1" "$2" "$HOME"
}

# attempt DESC WANT OPS REALPATH -- CMD...: run CMD under brokered in $WS; then
#   - the protected fixtures are unchanged,
#   - CMD's stdout (the helper's result line, last line) matches the ERE WANT (skipped if WANT is -),
#   - brokered did not crash (no status >= 128 unless the command's own),
#   - unless OPS is -, a new deny line for (OPS, REALPATH) is in the audit log.
# Sets ATTEMPT_OUT (stdout) and ATTEMPT_RC.
attempt() {
	local desc=$1 want=$2 ops=$3 real=$4 before after n0 n1 last
	shift 4
	[ "$1" = "--" ] && shift
	before=$(protected_snapshot)
	[ "$ops" != - ] && n0=$(audit_count "$ops" "$real")
	ATTEMPT_OUT=$(cd "$WS" && timeout 50 "$BROKERED" run -- "$@" 2>"$TEST_DIR/attempt.err" </dev/null)
	ATTEMPT_RC=$?
	after=$(protected_snapshot)
	if [ "$after" = "$before" ]; then
		ok 0 "$desc: protected files unchanged"
	else
		ok 1 "$desc: protected files unchanged"
		snap_changes "$before" "$after"
	fi
	last=$(printf '%s\n' "$ATTEMPT_OUT" | tail -n1)
	if [ "$want" != - ]; then
		if printf '%s\n' "$last" | grep -qxE "$want"; then
			ok 0 "$desc: refused ($last)"
		else
			ok 1 "$desc: refused with $want"
			printf '#   got: %q (brokered status %s)\n' "$last" "$ATTEMPT_RC"
			sed 's/^/#   stderr: /' "$TEST_DIR/attempt.err" | head -5
		fi
	fi
	case $ATTEMPT_RC in
	124 | 13[0-9] | 1[4-9][0-9] | 2[0-9][0-9])
		ok 1 "$desc: brokered did not crash or hang"
		printf '#   brokered status %s\n' "$ATTEMPT_RC"
		sed 's/^/#   stderr: /' "$TEST_DIR/attempt.err" | head -5
		;;
	*) ok 0 "$desc: brokered did not crash or hang" ;;
	esac
	if [ "$ops" != - ]; then
		n1=$(audit_count "$ops" "$real")
		if [ "$n1" -gt "$n0" ]; then
			ok 0 "$desc: audit log shows the refusal"
		else
			ok 1 "$desc: audit log shows the refusal (op=$ops normalisedPath=$real decision=deny)"
			audit_log | tail -n 3 | sed 's/^/#   audit: /'
		fi
	fi
}

# display path of a real path as the audit log writes normalisedPath= (home as ~)
disp() {
	case $1 in
	"$HOME") printf '~' ;;
	"$HOME"/*) printf '~/%s' "${1#"$HOME"/}" ;;
	*) printf '%s' "$1" ;;
	esac
}

# broker_alive DESC: a later write in a fresh run still works (the broker is usable)
broker_alive() {
	local f="alive-$RANDOM"
	(cd "$WS" && "$BROKERED" run -- "$ESC" open "$f" w,creat,trunc alive >/dev/null 2>&1)
	[ "$(cat "$WS/$f" 2>/dev/null)" = alive ]
	ok $? "$1"
	rm -f "$WS/$f"
}

is_root() { [ "$(id -u)" -eq 0 ]; }
