#!/usr/bin/env bash
# Issue 12: a Debian package — `dpkg-buildpackage -us -uc -b` builds a .deb from a copy of the
# source tree (the tree itself stays clean); the package holds the program, the man pages, the
# completions and the user unit, declares its dependencies, and lintian finds no errors.
SRC=${BROKERED_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$(dirname "$0")/../lib.sh"
[ -f "$SRC/debian/control" ] || skip_all "no source tree at $SRC"
# The package is built from the source, not from the binary under test: once is enough.
case $BROKERED in */build-san/*) skip_all "the package does not depend on the build under test" ;; esac
if ! command -v dpkg-buildpackage >/dev/null 2>&1 || ! command -v dh >/dev/null 2>&1 ||
	! command -v lintian >/dev/null 2>&1; then
	[ "${CI:-}" = true ] && {
		echo "not ok 1 - dpkg-dev, debhelper and lintian are installed (scripts/deps.sh test)"
		echo "1..1"
		exit 1
	}
	skip_all "dpkg-dev, debhelper or lintian not installed"
fi

# A copy of the tree without builds or VCS data, as a clean clone has it.
tree=$TEST_DIR/pkg/brokered
mkdir -p "$tree"
tar -C "$SRC" -cf - --exclude=./.git --exclude='./build*' --exclude=./bench/out . | tar -C "$tree" -xf -
(cd "$tree" && DEB_BUILD_OPTIONS="parallel=$(nproc)" dpkg-buildpackage -us -uc -b) >"$TEST_DIR/build.log" 2>&1
st=$?
is "$st" 0 "dpkg-buildpackage -us -uc -b builds"
[ "$st" = 0 ] || tail -30 "$TEST_DIR/build.log" | sed 's/^/#   /'
deb=$(ls "$TEST_DIR"/pkg/brokered_*.deb 2>/dev/null | head -1)
[ -n "$deb" ]
ok $? "a .deb is there ($(basename "${deb:-none}"))"
files=$(dpkg-deb -c "$deb" 2>/dev/null | awk '{ print $6 }' | sed 's|^\./|/|')
for f in /usr/bin/brokered /usr/bin/brokered-sh /usr/share/man/man1/brokered.1.gz \
	/usr/share/man/man5/brokered-settings.5.gz /usr/share/bash-completion/completions/brokered \
	/usr/share/zsh/vendor-completions/_brokered /usr/share/fish/vendor_completions.d/brokered.fish \
	/usr/lib/systemd/user/brokered-serve@.service /usr/share/doc/brokered/copyright; do
	printf '%s\n' "$files" | grep -qx "$f"
	ok $? "the package holds $f"
done
dpkg-deb -c "$deb" | grep -q ' \./usr/bin/brokered-sh -> brokered$'
ok $? "brokered-sh is a link to brokered"
deps=$(dpkg-deb -f "$deb" Depends)
for d in libssl3 libc6 diffutils; do
	printf '%s\n' "$deps" | grep -q "\b$d\b"
	ok $? "Depends names $d ($deps)"
done
# brokered compiles its seccomp filter itself: libseccomp is needed to build (the unit tests
# compare against it), not to run
! printf '%s\n' "$deps" | grep -q libseccomp
ok $? "Depends does not name libseccomp ($deps)"
x=$TEST_DIR/x
dpkg-deb -x "$deb" "$x"
"$x/usr/bin/brokered" --version | grep -qE '^brokered [0-9]'
ok $? "the packaged brokered runs"
grep -q '^ExecStart=/usr/bin/brokered serve ' "$x/usr/lib/systemd/user/brokered-serve@.service"
ok $? "the packaged unit runs /usr/bin/brokered"
lint=$(lintian --no-tag-display-limit "$deb" 2>&1)
errors=$(printf '%s\n' "$lint" | grep '^E:')
is "$errors" "" "lintian: no errors"
printf '%s\n' "$lint" | grep -E '^[WI]:' | sed 's/^/# lintian: /' | head -20
test ! -e "$SRC/debian/brokered" && test ! -e "$SRC/debian/files"
ok $? "the source tree is left clean"

done_testing
