#!/usr/bin/env bash
# The demo: build brokered, run a destructive command under it in a throwaway project, show what
# changed, undo it with one command, and check that every file is back byte for byte.
set -eu
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
scripts/deps.sh build
make -s -j"$(nproc)" build/brokered
B="$top/build/brokered"

demo=$(mktemp -d /tmp/brokered-demo.XXXXXX)
export XDG_STATE_HOME="$demo/state" # keep the demo's backups apart from yours
ws="$demo/project"
mkdir -p "$ws/src" "$ws/docs"
cd "$ws"
printf 'int main(void) { return 0; }\n' >src/main.c
printf '#pragma once\nint helper(void);\n' >src/helper.h
printf 'TODO: write the docs\n' >docs/guide.txt
printf 'key = precious value\n' >settings.conf
printf '#!/bin/sh\necho build\n' >build.sh
chmod 755 build.sh
ln -s docs/guide.txt GUIDE

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
snapshot() { find . -path ./.brokered -prune -o -printf '%p %y %m %l\n' | sort; find . -type f -exec sha256sum {} + | sort -k2; }
before=$(snapshot)

say "1. An agent runs a destructive command, under brokered:"
cmd='rm -rf src; sed -i "s/TODO/DONE/" docs/guide.txt; echo oops > settings.conf; chmod 644 build.sh; ln -sf /etc/passwd GUIDE; echo "new" > notes.txt; echo x > /etc/brokered-demo || true'
echo "   \$ brokered run -c '$cmd'"
"$B" run -m "agent turn: clean up the project" -c "$cmd" || true

say "2. The damage:"
ls -la "$ws"

say "3. What the turn changed (brokered log, brokered show last):"
"$B" log
"$B" show last

say "4. The content changes (brokered diff last):"
"$B" diff last || true

say "5. Undo it with one command (brokered undo):"
"$B" undo

after=$(snapshot)
if [ "$before" = "$after" ]; then
	say "Every file, mode and symlink is back as it was. The undo is itself a turn:"
	"$B" log
	echo
	echo "demo files: $demo"
	exit 0
fi
say "MISMATCH after undo:"
diff <(echo "$before") <(echo "$after") || true
exit 1
