# shellcheck shell=bash
# Helpers for the suite recipes (tests/suites/*.sh), sourced by them.

# deb_source PACKAGE DIR: unpack the Debian source package into DIR (once). Adds a
# deb-src line for bookworm when apt has none (as root).
deb_source() {
	local pkg=$1 dir=$2 src=$BROKERED_SUITES_CACHE/src
	[ -f "$dir/.unpacked" ] && return 0
	mkdir -p "$src" || return 1
	if ! apt-cache showsrc "$pkg" 2>/dev/null | grep -q '^Package:'; then
		[ "$(id -u)" -eq 0 ] || { echo "no deb-src in apt's sources; run once as root" >&2 && return 1; }
		cat >/etc/apt/sources.list.d/brokered-suites-src.sources <<'EOS'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
		apt-get update -o DPkg::Lock::Timeout=900 >/dev/null || return 1
	fi
	# The newest version first; a mirror may lack it (a security update withdrawn): then older ones.
	local v ok=
	for v in $(apt-cache showsrc "$pkg" | sed -n 's/^Version: //p' | sort -rV); do
		(cd "$src" && apt-get source --download-only "$pkg=$v") && ok=1 && break
	done
	[ -n "$ok" ] || return 1
	local dsc
	dsc=$(cd "$src" && ls -t -- "${pkg}"_*.dsc | head -n 1)
	rm -rf "$dir"
	dpkg-source --no-check --no-copy -x "$src/$dsc" "$dir" >/dev/null || return 1
	touch "$dir/.unpacked"
}

# build_once DIR CMD...: run CMD in DIR unless it has succeeded there before (DIR/.built).
build_once() {
	local dir=$1
	shift
	[ -f "$dir/.built" ] && return 0
	(cd "$dir" && nice "$@") || return 1
	touch "$dir/.built"
}
