#!/usr/bin/env bash
# Issue 12: history that reads like git — show and diff name paths relative to the workspace
# (--absolute: absolute), hide paths a turn created and removed again (--all shows them), show
# --stat, diff prints mode, owner and symlink-target changes in git's format, log --since, --path
# and -n select turns.
. "$(dirname "$0")/../lib.sh"
require_core
need diff sed

WSP=$(pwd -P)
printf 'a\nb\nc\n' >f.txt
printf '#!/bin/sh\necho hi\n' >run.sh
chmod 755 run.sh
ln -s f.txt lnk
echo gone >del.txt
mkdir sub
echo keep >sub/k.txt
brk run -m "first" -c 'echo one > sub/k.txt' </dev/null
is "$?" 0 "a first turn"
first=$(last_turn_id)
brk run -m "edit things" -c 'sed -i s/b/B/ f.txt; chmod 644 run.sh; ln -sf run.sh lnk; rm del.txt; echo new > new.txt' </dev/null
is "$?" 0 "a turn of sed -i, chmod, ln -sf, rm, a new file"
T=$(last_turn_id)

# ---- show ----
out=$(brk show "$T")
is "$?" 0 "show exits 0"
printf '%s\n' "$out" | grep -qE '^  modified +file +6  f\.txt$'
ok $? "show: f.txt relative to the workspace, with its pre-image size"
printf '%s\n' "$out" | grep -qE '^  modified +file +18  run\.sh  \(mode 100755 -> 100644\)$'
ok $? "show: the chmod is named with the old and new mode"
printf '%s\n' "$out" | grep -qE '^  modified +symlink +lnk -> f\.txt  \(now -> run\.sh\)$'
ok $? "show: the symlink's old and new target"
printf '%s\n' "$out" | grep -qE '^  deleted +file +5  del\.txt$'
ok $? "show: the deleted file"
printf '%s\n' "$out" | grep -qF "$WSP/"
is "$?" 1 "show: no absolute path of the workspace in the default output"
printf '%s\n' "$out" | grep -qE '^    edit things$'
ok $? "show: the turn's message, indented as git shows it"
printf '%s\n' "$out" | grep -qE 'transient|/sed[A-Za-z0-9]{6}$'
is "$?" 1 "show: sed -i's temp file is hidden by default"
printf '%s\n' "$out" | grep -qE '^  \([0-9]+ paths? created and removed again not shown: --all shows them\)$'
ok $? "show: says how many paths it hid and how to see them"
all=$(brk show --all "$T")
printf '%s\n' "$all" | grep -qE '^  transient +absent +sed[A-Za-z0-9]{6}$'
ok $? "show --all: lists sed -i's temp file as transient"
abs=$(brk show --absolute "$T")
printf '%s\n' "$abs" | grep -qE "^  modified +file +6  $WSP/f\.txt\$"
ok $? "show --absolute: absolute paths"
brk show --json "$T" | python3 -c '
import json,sys
d=json.load(sys.stdin); ps=[p["path"] for p in d["paths"]]
assert sys.argv[1]+"/f.txt" in ps, ps
assert any(p.rsplit("/",1)[1].startswith("sed") for p in ps), ps' "$WSP"
ok $? "show --json: absolute paths, every path (machine output is complete)"

# ---- show --stat ----
stat_out=$(brk show --stat "$T" | sed -n '/^ [^ ]/p')
want=' del.txt | 1 -
 f.txt   | 2 +-
 lnk     | 2 +-
 new.txt | 1 +
 run.sh  | 0
 5 files changed, 3 insertions(+), 3 deletions(-)'
is "$stat_out" "$want" "show --stat: git's per-path counts and totals"
is "$(brk diff --stat "$T" f.txt)" ' f.txt | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)' "diff --stat PATH: one path"

# ---- diff ----
is "$(brk diff "$T" run.sh)" 'diff --git a/run.sh b/run.sh
old mode 100755
new mode 100644' "diff: a chmod shows as old mode / new mode"
is "$(brk diff "$T" lnk)" 'diff --git a/lnk b/lnk
--- a/lnk
+++ b/lnk
@@ -1 +1 @@
-f.txt
\ No newline at end of file
+run.sh
\ No newline at end of file' "diff: a symlink's target change, as git shows it"
is "$(brk diff "$T" del.txt)" 'diff --git a/del.txt b/del.txt
deleted file mode 100644
--- a/del.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone' "diff: a deleted file"
is "$(brk diff "$T" new.txt)" 'diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+new' "diff: a new file"
is "$(brk diff "$T" f.txt)" 'diff --git a/f.txt b/f.txt
--- a/f.txt
+++ b/f.txt
@@ -1,3 +1,3 @@
 a
-b
+B
 c' "diff: a content change, paths relative to the workspace"
d=$(brk diff --absolute "$T" f.txt | head -2)
is "$d" "diff --git a$WSP/f.txt b$WSP/f.txt
--- a$WSP/f.txt" "diff --absolute: absolute paths after a/ and b/"
d=$(cd sub && "$BROKERED" diff --workspace "$WSP" "$first" k.txt | head -1)
is "$d" "diff --git a/sub/k.txt b/sub/k.txt" "diff from a subdirectory: PATH relative to the cwd, shown relative to the workspace"
brk diff "$T" | grep -q '^diff --git a/sed'
is "$?" 1 "diff: the temp file of sed -i is not shown"
if command -v git >/dev/null 2>&1; then
	# git apply -R of our diff puts the content back, as it would for git's own diff.
	brk diff "$T" f.txt new.txt >"$TEST_DIR/p.diff"
	git apply -R --unsafe-paths "$TEST_DIR/p.diff" 2>"$TEST_DIR/apply.err"
	ok $? "git apply -R understands the diff"
	is "$(cat f.txt)" "$(printf 'a\nb\nc')" "git apply -R restored f.txt"
	echo new >new.txt
	printf 'a\nB\nc\n' >f.txt
else
	skip "git apply -R understands the diff" "git not installed"
fi
# a symlink made, a symlink replaced by a file: git's modes (120000), a type change in two blocks
ln -s f.txt lnk2
brk run -c 'ln -s f.txt newlink; rm lnk2; echo file > lnk2' </dev/null
is "$(brk diff last)" 'diff --git a/lnk2 b/lnk2
deleted file mode 120000
--- a/lnk2
+++ /dev/null
@@ -1 +0,0 @@
-f.txt
\ No newline at end of file
diff --git a/lnk2 b/lnk2
new file mode 100644
--- /dev/null
+++ b/lnk2
@@ -0,0 +1 @@
+file
diff --git a/newlink b/newlink
new file mode 120000
--- /dev/null
+++ b/newlink
@@ -0,0 +1 @@
+f.txt
\ No newline at end of file' "diff: a new symlink and a symlink turned file, as git shows them"
is "$(brk show --stat last | tail -3)" ' lnk2    | 2 +-
 newlink | 1 +
 2 files changed, 2 insertions(+), 1 deletion(-)' "show --stat: a type change counts once per path"
brk undo </dev/null >/dev/null 2>&1
is "$(readlink lnk2)" f.txt "undo: the symlink is back"
if [ "$(id -u)" -eq 0 ]; then
	echo x >own
	brk run -c 'chown 1:2 own' </dev/null
	is "$(brk diff last own)" 'diff --git a/own b/own
old owner 0:0
new owner 1:2' "diff: a chown shows as old owner / new owner"
else
	skip "diff: a chown shows as old owner / new owner" "chown needs root"
fi

# ---- log filters ----
ids() { brk log "$@" | cut -d' ' -f1 | paste -sd' ' -; }
all_ids=$(ids)
is "$(ids -n 1)" "$(ids | cut -d' ' -f1)" "log -n 1: the newest turn only"
is "$(ids --max-count 2)" "$(ids | cut -d' ' -f1-2)" "log --max-count 2: the newest two"
is "$(ids --path sub/k.txt)" "$first" "log --path FILE: the turns that touched it"
is "$(ids --path sub)" "$first" "log --path DIR: the turns that touched anything below it"
is "$(ids --path "$WSP/del.txt")" "$T" "log --path with an absolute path"
is "$(ids --path nothing-here)" "" "log --path of an untouched path: no turns"
is "$(ids --since 2h)" "$all_ids" "log --since 2h: every recent turn"
is "$(ids --since 2099-01-01)" "" "log --since a future date: none"
is "$(ids --since '2000-01-01 10:00')" "$all_ids" "log --since a date and time"
brk log --since yesterday-ish >/dev/null 2>"$TEST_DIR/err"
is "$?" 2 "log --since garbage: usage error (2)"
grep -q 'Invalid --since "yesterday-ish"' "$TEST_DIR/err"
ok $? "log --since garbage: the error names the value"
brk log -n x >/dev/null 2>&1
is "$?" 2 "log -n x: usage error (2)"
n=$(brk log --json -n 1 --path f.txt | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
is "$n" 1 "log --json honours the filters"

done_testing
