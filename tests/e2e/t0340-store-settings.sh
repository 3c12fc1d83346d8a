#!/usr/bin/env bash
# Issue 3: sandbox.fileBackup settings — maxSizeMB (a larger file is changed with a warning naming
# it and `show` marks it not backed up), denyOversize (the change fails with a permission error and
# the file is untouched), enabled=false (changes happen, no pre-images are recorded).
BROKERED_TEST_DURABLE=1
. "$(dirname "$0")/../lib.sh"
require_core
need python3

WSP=$(pwd -P)
mkdir -p .brokered
settings() { printf '%s\n' "$1" >.brokered/settings.json; chmod 644 .brokered/settings.json; }
head -c $((2 * 1024 * 1024)) /dev/urandom >big
echo small >small
touch -d @1500000000 big small

# ---- maxSizeMB: changed without a backup, with a warning ----
settings '{"sandbox":{"fileBackup":{"maxSizeMB":1}}}'
err=$(brk run -c 'echo more >> big; echo more >> small' 2>&1 </dev/null)
is "$?" 0 "maxSizeMB=1: changing a 2 MiB file succeeds"
is "$(stat -c %s big)" $((2 * 1024 * 1024 + 5)) "maxSizeMB=1: the change happened"
case $err in *warning*"$WSP/big"*) ok 0 "maxSizeMB=1: a warning on stderr names the file" ;;
*) ok 1 "maxSizeMB=1: a warning on stderr names the file"; printf '#   stderr: %s\n' "$err" ;; esac
case $err in *"$WSP/small"*) ok 1 "the warning names only the oversize file"; printf '#   stderr: %s\n' "$err" ;;
*) ok 0 "the warning names only the oversize file" ;; esac
brk show --json last | "$BRK_PY" -c '
import json,sys
d={p["path"]:p for p in json.load(sys.stdin)["paths"]}
big=d[sys.argv[1]+"/big"]; small=d[sys.argv[1]+"/small"]
assert big["backedUp"] is False, big
assert small["backedUp"] is True, small' "$WSP"
ok $? "show --json: big marked not backed up, small backed up"
brk show --absolute last | grep -F "$WSP/big" | grep -qi "not backed up"
ok $? "show: the line of big says not backed up"
brk undo --force </dev/null >/dev/null 2>&1
is "$(cat small)" small "undo still restores the files that were backed up"

# ---- denyOversize: refused, untouched ----
settings '{"sandbox":{"fileBackup":{"maxSizeMB":1,"denyOversize":true}}}'
want=$(fingerprint big)
mt=$(stat -c %.9Y big)
for cmd in 'echo x >> big' ': > big' 'rm big' 'truncate -s 0 big' 'mv small big' 'sed -i s/a/b/ big' 'chmod 600 big'; do
	err=$(brk run -c "$cmd" 2>&1 </dev/null)
	rc=$?
	[ "$rc" -ne 0 ]
	ok $? "denyOversize: '$cmd' fails (status $rc)"
	case $err in *"Permission denied"* | *EACCES* | *"Operation not permitted"*) ok 0 "denyOversize: '$cmd': permission error" ;;
	*) ok 1 "denyOversize: '$cmd': permission error"; printf '#   stderr: %s\n' "$err" ;; esac
	is "$(fingerprint big) $(stat -c %.9Y big)" "$want $mt" "denyOversize: '$cmd': big untouched"
done
brk run -c 'echo ok >> small' </dev/null
is "$?" 0 "denyOversize: a small file can still be changed"

# ---- enabled=false: no pre-images ----
settings '{"sandbox":{"fileBackup":{"enabled":false}}}'
echo orig >nb
objs_before=$(find "$(store_roots | head -1)/objects" -type f | wc -l)
turns_before=$(brk log --json | "$BRK_PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')
brk run -c 'echo changed > nb; rm small; mkdir nbdir; echo n > nbnew' </dev/null
is "$?" 0 "enabled=false: the run succeeds"
is "$(cat nb):$([ -e small ] && echo present || echo gone):$([ -d nbdir ] && echo dir)" "changed:gone:dir" "enabled=false: the changes happened"
objs=$(find "$(store_roots | head -1)/objects" -type f | wc -l)
is "$objs" "$objs_before" "enabled=false: no content object was stored"
# A run that records nothing leaves no turn; if one is there, it holds no path.
n=$(brk log --json | "$BRK_PY" -c '
import json,sys
t=json.load(sys.stdin)
before=int(sys.argv[1])
print(0 if len(t) == before else t[0]["paths"])' "$turns_before")
is "$n" 0 "enabled=false: the run's turn (if any) records no paths"

done_testing
