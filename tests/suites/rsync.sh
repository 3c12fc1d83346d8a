# shellcheck shell=bash
# rsync's own test suite (testsuite/*.test through runtests.sh): copies with hard links, symlinks,
# devices, ownership, ACLs and xattrs, deletions, backups, --inplace. Built once from Debian's
# source package; each test script is a case and a test case. Scratch directories go into the
# workspace.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
RSYNC_SRC=$BROKERED_SUITES_CACHE/rsync

suite_prepare() {
	deb_source rsync "$RSYNC_SRC" &&
		build_once "$RSYNC_SRC" sh -c './configure -q --disable-md2man --disable-xxhash \
			--disable-zstd --disable-lz4 --disable-openssl --disable-acl-support \
			--with-included-popt --with-included-zlib && make -j2 && make -j2 check-progs'
}

suite_cases() {
	local quick='hardlinks symlink-ignore delete backup'
	if [ -n "${SUITE_QUICK:-}" ]; then
		printf '%s\n' $quick
		return
	fi
	(cd "$RSYNC_SRC/testsuite" && ls -- *.test) | sed 's/\.test$//'
}

suite_run() { # suite_run CASE WS
	cd "$RSYNC_SRC" && $RUNNER env rsync_bin="$RSYNC_SRC/rsync" scratchbase="$2/" \
		sh ./runtests.sh "$1.test"
}

# runtests.sh prints "PASS    name", "FAIL    name", "SKIP    name (reason)", "XFAIL   name".
suite_parse() {
	sed -nE \
		-e 's/^PASS +([^ ]+).*$/\1\tpass\t\1/p' \
		-e 's/^FAIL +([^ ]+).*$/\1\tfail\t\1/p' \
		-e 's/^SKIP +([^ ]+) *(.*)$/\1\tskip\t\2/p' \
		-e 's/^XFAIL +([^ ]+).*$/\1\txfail\t\1/p'
}
