#!/usr/bin/env bash
# Install the Debian 12 packages brokered needs and that are missing (root, or a user with sudo).
#   scripts/deps.sh build   to build
#   scripts/deps.sh test    to build and run all tests (adds the programs the tests drive)
#   scripts/deps.sh suites  to build the real test suites of `make check-suites` too
set -eu
what=${1:-build}
build_pkgs=(gcc make pkg-config libseccomp-dev libssl-dev libc6-dev)
test_pkgs=(clang libclang-rt-14-dev busybox-static python3 perl tmux diffutils attr
	procps util-linux passwd shellcheck clang-format libpython3.11-testsuite make man-db
	groff-base zsh fish bubblewrap git systemd dpkg-dev debhelper lintian curl)
# the aarch64 cross build the test command checks (libraries of the foreign architecture arm64)
cross_pkgs=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross libssl-dev:arm64)
suites_pkgs=(dpkg-dev zlib1g-dev)
pkgs=("${build_pkgs[@]}")
[ "$what" = test ] && pkgs+=("${test_pkgs[@]}" "${cross_pkgs[@]}")
[ "$what" = suites ] && pkgs+=("${test_pkgs[@]}" "${suites_pkgs[@]}")

# nodejs and npm: the agent tests install their JavaScript clients (tests/clients) with npm; Debian's
# npm only when there is none (a nodejs from elsewhere bundles its own, and Debian's conflicts).
if [ "$what" = test ]; then
	pkgs+=(nodejs)
	command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi
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
case " ${missing[*]}" in *:arm64*)
	dpkg --print-foreign-architectures | grep -qx arm64 || "${sudo[@]}" dpkg --add-architecture arm64 ;;
esac
# Wait for another apt or dpkg (an unattended upgrade, a second checkout's tests) instead of failing.
lock=(-o DPkg::Lock::Timeout=900)
"${sudo[@]}" apt-get "${lock[@]}" update -qq
"${sudo[@]}" apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
