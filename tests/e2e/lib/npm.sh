# shellcheck shell=bash
# npm packages the agent tests drive (tests/clients/*), installed once per package-lock.json into a
# cache (BROKERED_NPM_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/brokered-tests) so that reruns
# are fast: npm_cached DIR prints the directory whose node_modules hold DIR's locked packages.

npm_cache_base() { printf '%s\n' "${BROKERED_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/brokered-tests}"; }

npm_cached() { # npm_cached SRC-DIR: install (npm ci) into the cache if needed; print its path
	local src=$1 base key dir
	base=$(npm_cache_base)
	key=$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -c1-16)
	dir="$base/$(basename "$src")-$key"
	mkdir -p "$base" || return 1
	(
		flock 9 || exit 1
		[ -e "$dir/.installed" ] && exit 0
		rm -rf "$dir.tmp" && mkdir -p "$dir.tmp" &&
			cp "$src/package.json" "$src/package-lock.json" "$dir.tmp/" &&
			(cd "$dir.tmp" && npm ci --no-audit --no-fund --loglevel=error >&2) &&
			rm -rf "$dir" && mv "$dir.tmp" "$dir" && touch "$dir/.installed"
	) 9>"$base/.lock" || return 1
	printf '%s\n' "$dir"
}

# need_npm_package SRC-DIR VAR: the cached install's path in VAR; without node and npm the script is
# skipped, and a failed install is a skip too, except under CI=true (where npm's registry is
# reachable by contract): there it fails.
need_npm_package() {
	local dir
	need node npm
	if ! dir=$(npm_cached "$1"); then
		if [ "${CI:-}" = true ]; then
			echo "not ok 1 - npm ci of $1 failed (CI=true makes this a failure)"
			echo "1..1"
			exit 1
		fi
		skip_all "npm ci of $1 failed (no npm registry?)"
	fi
	printf -v "$2" '%s' "$dir"
}

# want_agent_cli NAME: the real agent CLI tests are chosen by BROKERED_AGENT_CLIS (a list of
# claude, codex, gemini, or all / none; default: claude — each CLI is 100-424 MiB to install and
# 10-40 s to run, the hooks of all three are tested with their documented payloads anyway).
want_agent_cli() {
	case " ${BROKERED_AGENT_CLIS:-claude} " in
	*" $1 "* | *" all "*) ;;
	*) skip_all "the $1 CLI test is not selected (BROKERED_AGENT_CLIS=${BROKERED_AGENT_CLIS:-claude}; add $1 or all)" ;;
	esac
}
