#!/usr/bin/env bash
# Escape suite, awkward names and sizes: newlines, tabs, invalid UTF-8 and audit-looking text in
# names (must work in the workspace and give one audit line each), paths near PATH_MAX and deep
# trees (work or ENAMETOOLONG, never a dead broker), FIFOs (never a hung broker).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/../lib.sh"
require_core
. "$HERE/lib-escape.sh"
make_fixtures

# audit_lines OPS REALPATH DECISION: the number of audit lines for it
audit_lines() {
	audit_log | perl -e '
		my ($ops, $p, $d) = @ARGV;
		(my $e = $p) =~ s/([\x00-\x20\x7f-\xff"\x27=\\])/sprintf("\\x%02x", ord $1)/ge;
		my $n = 0;
		while (my $l = <STDIN>) {
			$n++ if $l =~ / op=(?:$ops) / && index($l, " decision=$d ") >= 0 &&
				(index($l, " normalisedPath=$e ") >= 0 || index($l, " normalisedTo=$e ") >= 0);
		}
		print "$n\n";' "$1" "$2" "$3"
}
broken_lines() { audit_log | grep -cv '^ts=' ; }

nl=$'\n' tab=$'\t'
names=("new${nl}line" "tab${tab}name" $'bad\xff\xfeutf8' $'\x01ctl\x7f' "x normalisedPath=.etc.passwd decision=allow" \
	"quote\"'=\\back" " lead and trail " "-dash" "ünïcödé")
i=0
for n in "${names[@]}"; do
	i=$((i + 1))
	before=$(audit_lines open "$WS/$n" allow)
	out=$(cd "$WS" && "$BROKERED" run -- "$ESC" open "$n" w,creat,trunc "content$i" 2>&1)
	is "$out:$(cat "$WS/$n" 2>/dev/null)" "ok:content$i" "name $(printf %q "$n"): created in the workspace"
	after=$(audit_lines open "$WS/$n" allow)
	is "$((after - before))" 1 "name $(printf %q "$n"): exactly one audit line, escaped"
	out=$(cd "$WS" && "$BROKERED" run -- "$ESC" rename "$n" "$n.2" 2>&1)
	is "$out" ok "name $(printf %q "$n"): renamed"
	out=$(cd "$WS" && "$BROKERED" run -- "$ESC" unlink "$n.2" 2>&1)
	is "$out" ok "name $(printf %q "$n"): removed"
	# the same name outside: refused, logged as one line
	b2=$(audit_lines open "$OUTSIDE/$n" deny)
	attempt "name $(printf %q "$n") outside" 'EACCES' - - -- "$ESC" open "../outside/$n" w,creat pwned
	is "$(($(audit_lines open "$OUTSIDE/$n" deny) - b2))" 1 "name $(printf %q "$n") outside: one deny line"
done
is "$(broken_lines)" 0 "every audit line starts with ts= (no name broke a line)"
audit_log | grep -F 'normalisedPath=.etc.passwd decision=allow' >/dev/null
ok $((!$?)) "an audit-looking name cannot forge fields"

# ---- PATH_MAX ----
p4095=$(printf './%.0s' $(seq 2047))f    # 4095 bytes
p4096=$(printf './%.0s' $(seq 2047))ff   # 4096 bytes: one too many with the NUL
p8000=$(printf './%.0s' $(seq 4000))f
is "${#p4095}:${#p4096}" "4095:4096" "path lengths as intended"
for p in "$p4095" "$p4096" "$p8000" "$(printf 'a%.0s' $(seq 300))" "../outside/$(printf './%.0s' $(seq 2040))x"; do
	out=$(cd "$WS" && timeout 50 "$BROKERED" run -- sh -c "$ESC open '$p' w,creat len; $ESC open alive w,creat,trunc alive" 2>&1)
	rc=$?
	first=$(printf '%s\n' "$out" | head -n1)
	case $first in ok | ENAMETOOLONG | EACCES) ok 0 "path of ${#p} bytes: works or ENAMETOOLONG ($first)" ;;
	*) ok 1 "path of ${#p} bytes: works or ENAMETOOLONG"; printf '#   got: %s (status %s)\n' "$first" "$rc" ;; esac
	is "$rc:$(cat "$WS/alive" 2>/dev/null)" "0:alive" "path of ${#p} bytes: the broker is alive, a later write in the same run works"
	rm -f "$WS/alive"
done
[ "$(cat "$OUTSIDE/x")" = "outside secret" ]
ok $? "long ../outside path: outside file unchanged"
attempt "4095-byte path to an outside file" 'EACCES|ENAMETOOLONG' - - -- "$ESC" open "../outside/$(printf './%.0s' $(seq 2036))x" w,trunc pwned

# A tree deeper than PATH_MAX: every name short, the real path long.
seg=$(printf 'd%.0s' $(seq 200))
deepdir=$WS
for k in $(seq 22); do deepdir=$deepdir/$seg; done
perl -e 'my ($s) = @ARGV; for (1 .. 22) { mkdir $s; chdir $s or die }' "$seg"
out=$(cd "$WS" && timeout 50 "$BROKERED" run -- perl -e '
	my ($esc, $seg, $ws) = @ARGV;
	for (1 .. 22) { chdir $seg or do { print "cd failed\n"; exit 9 } }
	system($esc, "open", "deepfile", "w,creat", "deep");
	system($esc, "chmod", "deepfile", "0600");
	system($esc, "mkdir", "deepsub");
	system($esc, "rename", "deepfile", "deepfile2");
	chdir $ws;
	system($esc, "open", "$ws/alive", "w,creat,trunc", "alive");' "$ESC" "$seg" "$WS" 2>&1)
rc=$?
bad=$(printf '%s\n' "$out" | head -n4 | grep -cvE '^(ok|ENAMETOOLONG|ENOENT)$')
is "$bad" 0 "a tree deeper than PATH_MAX: each call works or fails cleanly ($(printf '%s' "$out" | head -n4 | tr '\n' ' '))"
is "$rc:$(cat "$WS/alive" 2>/dev/null)" "0:alive" "a tree deeper than PATH_MAX: the broker is alive afterwards"
rm -f "$WS/alive"
(cd "$WS" && perl -e 'use File::Path; rmtree($ARGV[0])' "$seg")

# A symlink whose target is 4095 bytes long.
ln -s "$p4095" "$WS/longlink" 2>/dev/null
out=$(cd "$WS" && timeout 50 "$BROKERED" run -- sh -c "$ESC open longlink w,creat x; $ESC open alive w,creat,trunc alive" 2>&1)
rc=$?
is "$rc:$(cat "$WS/alive" 2>/dev/null)" "0:alive" "4095-byte symlink target: the broker is alive ($(printf '%s' "$out" | head -n1))"
rm -f "$WS/alive" "$WS/longlink" "$WS/f"

# ---- FIFOs: the broker must never block ----
start=$(date +%s)
attempt "FIFO outside: open for write" 'EACCES' open "$OUTSIDE/fifo" -- timeout 20 "$ESC" open ../outside/fifo w
attempt "FIFO outside: open O_RDWR" 'EACCES' open "$OUTSIDE/fifo" -- timeout 20 "$ESC" open ../outside/fifo rw
attempt "FIFO outside: chmod" 'EACCES' chmod "$OUTSIDE/fifo" -- timeout 20 "$ESC" chmod ../outside/fifo 0777
attempt "FIFO outside via /proc/self/fd of an O_PATH fd" 'EACCES' - - -- \
	timeout 20 "$ESC" fd "$OUTSIDE/fifo" path reopen /proc/self/fd/ w
mkfifo "$WS/wsfifo"
out=$(cd "$WS" && timeout 50 "$BROKERED" run -- sh -c "
	$ESC open wsfifo w & w=\$!
	sleep 0.5
	$ESC open alive w,creat,trunc alive
	$ESC chmod wsfifo 0600
	$ESC utimes wsfifo
	$ESC rename wsfifo wsfifo2
	$ESC truncate wsfifo2 0
	kill \$w 2>/dev/null; wait \$w 2>/dev/null; echo end" 2>&1)
rc=$?
is "$rc:$(cat "$WS/alive" 2>/dev/null)" "0:alive" "FIFO in the workspace without a reader: the broker still answers others"
is "$(printf '%s\n' "$out" | tr '\n' ' ')" "ok ok ok ok EINVAL end " "FIFO in the workspace: chmod, utimes, rename (backed up) do not block; truncate is EINVAL"
# A reader comes: the deferred open completes.
rm -f "$WS/wsfifo2" "$WS/alive"
mkfifo "$WS/wsfifo"
out=$(cd "$WS" && timeout 50 "$BROKERED" run -- sh -c "$ESC open wsfifo w hello & sleep 0.3; cat wsfifo; wait" 2>&1)
is "$(printf '%s\n' "$out" | grep -oE 'hello|ok' | sort | tr '\n' ' ')" "hello ok " "FIFO in the workspace: a blocked writer completes when a reader comes"
end=$(date +%s)
ok $([ $((end - start)) -lt 45 ] && echo 0 || echo 1) "FIFO attempts took $((end - start))s (no hang)"

broker_alive "broker still works after the name and size attempts"
done_testing
