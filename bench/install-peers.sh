#!/usr/bin/env bash
# bench/install-peers.sh: install the sandboxes bench/peers.sh compares brokered with, and its tools.
# Run by hand (as root), never from the tests:
#
#   bench/install-peers.sh            # apt: bubblewrap strace hyperfine python3-matplotlib time
#                                     # npm -g: @openai/codex (codex sandbox), @anthropic-ai/sandbox-runtime (srt)
#   bench/install-peers.sh --no-npm   # Debian packages only
#
# Every step is skipped when its tool is already there; a failed npm install is reported, not fatal
# (peers.sh then leaves that column out).
set -u
npm=1
[ "${1:-}" = --no-npm ] && npm=0
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo

need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v strace >/dev/null || need+=(strace)
command -v hyperfine >/dev/null || need+=(hyperfine)
[ -x /usr/bin/time ] || need+=(time)
command -v git >/dev/null || need+=(git)
command -v make >/dev/null || need+=(make)
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || need+=(python3-matplotlib)
# srt on Linux uses bubblewrap, socat and ripgrep
command -v socat >/dev/null || need+=(socat)
command -v rg >/dev/null || need+=(ripgrep)
if [ ${#need[@]} -gt 0 ]; then
	echo "install-peers: apt-get install ${need[*]}"
	$SUDO apt-get update -qq || true
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" || echo "install-peers: apt-get failed" >&2
fi

if [ $npm = 1 ]; then
	if ! command -v npm >/dev/null; then
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm || echo "install-peers: no npm" >&2
	fi
	command -v codex >/dev/null || $SUDO npm install -g --no-fund --no-audit @openai/codex ||
		echo "install-peers: npm install -g @openai/codex failed" >&2
	command -v srt >/dev/null || $SUDO npm install -g --no-fund --no-audit @anthropic-ai/sandbox-runtime ||
		echo "install-peers: npm install -g @anthropic-ai/sandbox-runtime failed" >&2
fi

for t in bwrap strace hyperfine codex srt; do
	printf 'install-peers: %-9s %s\n' "$t" "$(command -v $t || echo missing)"
done
/usr/bin/python3 -c 'import matplotlib; print("install-peers: matplotlib", matplotlib.__version__)' 2>/dev/null ||
	echo "install-peers: matplotlib missing"
