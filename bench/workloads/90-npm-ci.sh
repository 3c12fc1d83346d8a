# shellcheck shell=bash
# A real `npm ci` of the MCP SDK client the tests drive (tests/clients: ~90 packages, ~2k paths),
# offline from an npm cache inside the workspace (filled once from the registry, not timed).
W_NAME=npm-ci
W_DESC="npm ci --offline of tests/clients (~2k paths)"
W_CMD='npm ci --offline --cache .npm-cache --no-audit --no-fund --no-update-notifier --loglevel=error'
W_TARGET='native 1.10'
w_prepare() {
	command -v npm >/dev/null 2>&1 || return 2
	mkdir -p "$1"
	cp "$top/tests/clients/package.json" "$top/tests/clients/package-lock.json" "$1/"
	# fill the cache: one online install, then the installed tree goes (each run installs it)
	(cd "$1" && npm ci --cache .npm-cache --no-audit --no-fund --no-update-notifier \
		--loglevel=error >/dev/null) || return 2
	rm -rf "$1/node_modules"
}
