#!/usr/bin/env bash
# Install the Debian 12 packages brokered needs and that are missing (root, or a user with sudo).
#   scripts/deps.sh build   to build
#   scripts/deps.sh test    to build and run all tests (adds the programs the tests drive)
set -eu
what=${1:-build}
build_pkgs=(gcc make pkg-config libseccomp-dev libssl-dev libc6-dev)
test_pkgs=(clang libclang-rt-14-dev busybox-static python3 perl tmux diffutils attr
	procps util-linux passwd curl git)
pkgs=("${build_pkgs[@]}")
[ "$what" = test ] && pkgs+=("${test_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "brokered: installing missing Debian packages: ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1; then
	sudo=(sudo)
else
	echo "brokered: need root or sudo to install: ${missing[*]}" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
