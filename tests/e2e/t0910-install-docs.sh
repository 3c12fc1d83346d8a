#!/usr/bin/env bash
# Issue 12: installable like a Linux tool — `make install` with PREFIX and DESTDIR puts every file
# in place with its mode, `make uninstall` removes them all; the man pages render without warnings;
# every subcommand and option that `brokered --help` and `brokered COMMAND --help` name is in
# brokered(1) and in the README, every settings key of the README in brokered-settings(5) and back;
# the systemd user unit passes `systemd-analyze verify`.
SRC=${BROKERED_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$(dirname "$0")/../lib.sh"
need make man groff
[ -f "$SRC/Makefile" ] && [ -d "$SRC/man" ] || skip_all "no source tree at $SRC"
mk() { make -s -C "$SRC" INSTALL_BIN="$BROKERED" "$@"; }

# ---- make install / uninstall ----
dest=$TEST_DIR/dest
mk install DESTDIR="$dest" PREFIX=/usr >"$TEST_DIR/install.log" 2>&1
ok $? "make install DESTDIR=... PREFIX=/usr"
want='usr/bin/brokered 755 file
usr/bin/brokered-sh 777 link
usr/lib/systemd/user/brokered-serve@.service 644 file
usr/share/bash-completion/completions/brokered 644 file
usr/share/fish/vendor_completions.d/brokered.fish 644 file
usr/share/man/man1/brokered.1 644 file
usr/share/man/man5/brokered-settings.5 644 file
usr/share/zsh/site-functions/_brokered 644 file'
got=$(cd "$dest" && find . \( -type f -o -type l \) -printf '%P %m %y\n' | sed 's/ f$/ file/; s/ l$/ link/' | sort)
is "$got" "$want" "make install: every file, with its mode, and nothing else"
is "$(readlink "$dest/usr/bin/brokered-sh")" brokered "brokered-sh is a relative link to brokered"
cmp -s "$BROKERED" "$dest/usr/bin/brokered"
ok $? "the installed brokered is the build"
"$dest/usr/bin/brokered" --version | grep -qE '^brokered [0-9]'
ok $? "the installed brokered runs"
grep -qx "ExecStart=/usr/bin/brokered serve --workspace %f --socket %t/brokered/serve/%i.sock" \
	"$dest/usr/lib/systemd/user/brokered-serve@.service"
ok $? "the unit's ExecStart names the installed binary"
cmp -s "$SRC/man/brokered.1" "$dest/usr/share/man/man1/brokered.1"
ok $? "the installed man page is the source's"
mk uninstall DESTDIR="$dest" PREFIX=/usr >>"$TEST_DIR/install.log" 2>&1
ok $? "make uninstall"
is "$(find "$dest" \( -type f -o -type l \) | wc -l)" 0 "make uninstall removes every installed file"
dest2=$TEST_DIR/dest2
mk install DESTDIR="$dest2" >>"$TEST_DIR/install.log" 2>&1
test -x "$dest2/usr/local/bin/brokered" && test -f "$dest2/usr/local/share/man/man1/brokered.1"
ok $? "PREFIX defaults to /usr/local"

# ---- man pages ----
for page in brokered.1 brokered-settings.5; do
	warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$SRC/man/$page" 2>&1 >/dev/null)
	is "$warn" "" "man --warnings -l $page: no warnings"
done
render() { LC_ALL=C groff -man -Tascii -rLL=200n -P-cbou "$1" 2>/dev/null; }
man1=$(render "$SRC/man/brokered.1")
man5=$(render "$SRC/man/brokered-settings.5")
for s in NAME SYNOPSIS DESCRIPTION COMMANDS "EXIT STATUS" ENVIRONMENT FILES EXAMPLES "SEE ALSO"; do
	printf '%s\n' "$man1" | grep -qx "$s"
	ok $? "brokered(1) has the section $s"
done
for s in NAME SYNOPSIS DESCRIPTION KEYS PATTERNS DEFAULTS EXAMPLES; do
	printf '%s\n' "$man5" | grep -qx "$s"
	ok $? "brokered-settings(5) has the section $s"
done

# ---- one source of truth: --help against the man page and the README ----
readme=$(cat "$SRC/README.md")
cmds=$("$BROKERED" --help | awk '/^  [a-z]/ { print $1 }' | sort -u)
[ "$(printf '%s\n' "$cmds" | wc -l)" -ge 10 ]
ok $? "brokered --help names the subcommands ($(printf '%s' "$cmds" | tr '\n' ' '))"
missing_man= missing_readme=
# a subcommand has its own subsection (.SS) in brokered(1), and a usage line in the README
headings=" $(printf '%s\n' "$man1" | grep -E '^   [^ ]' | tr -s ', \n' '   ') "
usage=$(printf '\n%s' "$(grep -E '^brokered [a-z]' "$SRC/README.md" | cut -d' ' -f2 | sort -u)")
for c in $cmds; do
	[[ $headings == *" $c "* ]] || missing_man+=" $c"
	[[ $usage$'\n' == *$'\n'"$c"$'\n'* ]] || missing_readme+=" $c"
done
is "$missing_man" "" "every subcommand of --help has a subsection in brokered(1)"
is "$missing_readme" "" "every subcommand of --help has a usage line in the README"
missing_man= missing_readme=
for c in $cmds; do
	[ "$c" = sh ] && continue # `brokered sh` has no options of its own: it stands in for sh
	help=$("$BROKERED" "$c" --help 2>&1 </dev/null)
	for o in $(printf '%s\n' "$help" | grep -oE -- '(^|[][ (|,])--?[a-zA-Z][a-zA-Z-]*' | tr -d '[]( |,' | sort -u); do
		[[ $man1 == *"$o"* ]] || missing_man+=" $c:$o"
		case $o in --*) [[ $readme == *"$o"* ]] || missing_readme+=" $c:$o" ;; esac
	done
done
is "$missing_man" "" "every option of every COMMAND --help is in brokered(1)"
is "$missing_readme" "" "every long option of every COMMAND --help is in the README"
# settings keys: the README's table and brokered-settings(5) name the same keys
keys_readme=$(grep -oE '^\| `sandbox\.[A-Za-z.]+`' "$SRC/README.md" | tr -d '|` ' | sort -u)
keys_man=$(printf '%s\n' "$man5" | grep -oE '^       sandbox\.[A-Za-z.]+' | tr -d ' ' | sort -u)
[ -n "$keys_readme" ]
ok $? "the README's settings table names keys"
is "$keys_man" "$keys_readme" "brokered-settings(5) and the README name the same settings keys"
# every key the settings parser knows is documented
keys_src=$(grep -oE '"sandbox\.[A-Za-z]+\.[A-Za-z]+"|"sandbox\.(enabled|excludedCommands|deleteMode)"' "$SRC/src/settings.c" | tr -d '"' | sort -u)
missing=
for k in $keys_src; do printf '%s\n' "$keys_man" | grep -qx "$k" || missing+=" $k"; done
is "$missing" "" "every sandbox.* key in src/settings.c is in brokered-settings(5)"

# ---- the systemd user unit ----
if command -v systemd-analyze >/dev/null 2>&1; then
	prefix=$TEST_DIR/prefix
	mk install PREFIX="$prefix" >>"$TEST_DIR/install.log" 2>&1
	unit=$TEST_DIR/brokered-serve@home-me-project.service # an instance: verify needs one
	cp "$prefix/lib/systemd/user/brokered-serve@.service" "$unit"
	out=$(MANPATH="$prefix/share/man" systemd-analyze verify "$unit" 2>&1)
	is "$?:$out" "0:" "systemd-analyze verify: the unit is clean"
else
	skip "systemd-analyze verify: the unit is clean" "systemd-analyze not installed"
fi

done_testing
