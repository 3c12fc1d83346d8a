#!/usr/bin/env bash
# The broker socket, every operation of both protocols, driven by a Python client written from the
# protocol description: the answer's fields, the file system afterwards, the audit line, and the
# backups (a turn opened with EnableModifyBackup and committed with CommitModifyBackup is undone
# with `brokered undo`, which must give back the workspace exactly). Then the reference's fake-broker
# list the other way round: what toybox and zsh would ask for arrives, is policy-checked, backed up.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
. "$here/lib/ipc.sh"
need python3

mkdir -p "$WS/.brokered" "$WS/dir/sub" "$WS/full" "$WS/mixed" "$WS/totrash"
printf 't\n' >"$WS/totrash/t"
printf '{"sandbox":{"fileSafety":{"blocklist":["secret","mixed/secret"]}}}\n' >"$WS/.brokered/settings.json"
printf 'hello\n' >"$WS/f"
printf 'keep\n' >"$WS/keep"
printf 'one\n' >"$WS/dir/a"
printf 'two\n' >"$WS/dir/sub/b"
printf 'x\n' >"$WS/full/x"
printf 's\n' >"$WS/mixed/plain"
printf 's\n' >"$WS/mixed/secret"
printf 'top secret\n' >"$WS/secret"
printf 'outside\n' >"$OUTSIDE/o"
chmod 640 "$WS/f"
before=$(tree_snapshot "$WS")
outside_before=$(tree_snapshot "$OUTSIDE")

check "serve starts" -- start_serve
check "socket is 0600" -- test "$(stat -c %a "$SOCK")" = 600

py_checks <<'EOF'
import json, os, stat, time
from ipc_client import Conn, Tap, READ, WRITE, fd_path, fd_mode
ws, out, sid, sock = os.environ["WS"], os.environ["OUTSIDE"], os.environ["SID"], os.environ["SOCK"]
t = Tap()
c = Conn(sock)
n = [0]
def req(op=None, command="HostFileOperation", **kw):
    n[0] += 1
    o = {"id": "r%d" % n[0], "command": command, "sessionId": sid, "toolCallId": "tc-py", "brokerTraceId": "trace-%d" % n[0]}
    if op: o["operation"] = op
    o.update(kw)
    a = c.request(o)
    t.eq(a.get("id"), o["id"], "answer carries the request id %s" % o["id"])
    return a

a = req(command="EnableModifyBackup", message="python turn")
t.ok(a["ok"] and a.get("turn"), "EnableModifyBackup opens a turn", a)

# ---- text token ----
ans, fd = c.token(READ, ws + "/f", sid)
t.ok(ans == "FD" and fd is not None, "read token: FD with an fd attached", ans)
if fd is not None:
    t.eq(fd_mode(fd), "r", "  the fd is read-only")
    t.eq(fd_path(fd), ws + "/f", "  it is the file asked for")
    t.eq(os.read(fd, 100), b"hello\n", "  and reads its content")
    os.close(fd)
ans, fd = c.token(WRITE, ws + "/f", sid, flags="wronly|trunc")
t.ok(ans == "FD" and fd is not None, "write token on an existing file: FD", ans)
if fd is not None:
    t.eq(fd_mode(fd), "w", "  the fd is writable")
    os.write(fd, b"changed through the token\n"); os.close(fd)
t.eq(open(ws + "/f").read(), "changed through the token\n", "  writing through it changed the file")
ans, fd = c.token(WRITE, ws + "/new600", sid, flags="wronly|creat|excl", mode="600")
t.ok(ans == "FD", "write token creating a file", ans)
if fd is not None: os.close(fd)
t.eq(stat.S_IMODE(os.stat(ws + "/new600").st_mode), 0o600, "  created with the mode asked for")
ans, fd = c.token(WRITE, out + "/created", sid)
t.eq(ans, "DENY", "write token outside the workspace: DENY")
t.ok(fd is None and not os.path.exists(out + "/created"), "  no fd, nothing created")
ans, fd = c.token(WRITE, out + "/o", sid, flags="wronly|trunc")
t.eq((ans, open(out + "/o").read()), ("DENY", "outside\n"), "write token on an outside file: DENY, untouched")
ans, fd = c.token(READ, ws + "/secret", sid)
t.eq(ans, "DENY", "read token on a blocklisted file: DENY")
ans, fd = c.token(WRITE, ws + "/../" + os.path.basename(out) + "/o", sid)
t.eq(ans, "DENY", "write token escaping with ..: DENY")
os.symlink(out + "/o", ws + "/escape-link")
ans, fd = c.token(WRITE, ws + "/escape-link", sid)
t.eq(ans, "DENY", "write token through a symlink to the outside: DENY (the real path decides)")
os.unlink(ws + "/escape-link")
ans, fd = c.token(READ, ws + "/missing", sid)
t.eq(ans, "DENY", "read token on a missing file: DENY")
ans, fd = c.token(WRITE, ws + "/keep", "other-session")
t.eq((ans, open(ws + "/keep").read()), ("DENY", "keep\n"), "token naming another session: DENY")
ans, fd = c.token("brokered.read", ws + "/keep", sid)
t.eq(ans, "FD", "brokered.read is accepted as a class")
if fd is not None: os.close(fd)

# ---- JSON HostFileOperation ----
a = req("delete", path=ws + "/new600", deleteMode="unlink")
t.ok(a["ok"] and a["decision"] == "host-op" and a["operation"] == "delete" and a["normalisedPath"] == ws + "/new600", "delete (unlink): ok, host-op, normalisedPath", a)
t.ok(not os.path.exists(ws + "/new600"), "  the file is gone")
a = req("delete", path=ws + "/full")
t.ok(not a["ok"] and "ENOTEMPTY" in a["error"] and os.path.exists(ws + "/full/x"), "delete of a non-empty directory without recursive: ENOTEMPTY, untouched", a)
a = req("delete", path=ws + "/full", recursive=True)
t.ok(a["ok"] and not os.path.exists(ws + "/full"), "delete recursive: the tree is gone", a)
a = req("delete", path=ws + "/mixed", recursive=True)
t.ok(not a["ok"] and a["decision"] == "deny", "recursive delete of a tree holding a protected file: deny", a)
t.ok(os.path.exists(ws + "/mixed/plain") and os.path.exists(ws + "/mixed/secret"), "  and nothing of the tree was deleted")
a = req("delete", path=ws + "/nothing-here")
t.ok(not a["ok"] and "ENOENT" in a["error"], "delete of a missing path: ENOENT", a)
a = req("delete", path=ws + "/nothing-here", force=True)
t.ok(a["ok"], "delete of a missing path with force: ok", a)
a = req("delete", path=out + "/o")
t.ok(not a["ok"] and a["decision"] == "deny" and os.path.exists(out + "/o"), "delete outside the workspace: deny, untouched", a)
report = ws + "/report.jsonl"
a = req("delete", path=ws + "/totrash", deleteMode="trash", recursive=True, safeDeleteReportPath=report)
t.ok(a["ok"] and not os.path.exists(ws + "/totrash"), "delete to the trash", a)
td = os.environ["XDG_DATA_HOME"] + "/Trash"
t.ok(os.path.exists(td + "/files/totrash/t"), "  the tree is in the home trash's files/")
info = open(td + "/info/totrash.trashinfo").read()
t.ok(info.startswith("[Trash Info]\nPath=" + ws.replace(" ", "%20") + "/totrash\nDeletionDate="), "  with a .trashinfo naming the original path", info)
rep = [json.loads(l) for l in open(report)]
t.ok(len(rep) == 1 and rep[0]["target"] == ws + "/totrash" and rep[0]["mode"] == "trash" and rep[0]["trashPath"].endswith("/files/totrash"), "  safeDeleteReportPath got one JSON line", rep)
a = req("delete", path=ws + "/keep", safeDeleteReportPath=out + "/report")
t.ok(not a["ok"] and os.path.exists(ws + "/keep") and not os.path.exists(out + "/report"), "a report path outside the workspace refuses the delete before anything happens", a)

a = req("mkdir", path=ws + "/m1")
t.ok(a["ok"] and os.path.isdir(ws + "/m1"), "mkdir", a)
a = req("mkdir", path=ws + "/m1")
t.ok(not a["ok"] and "EEXIST" in a["error"], "mkdir of an existing directory: EEXIST", a)
a = req("mkdir", path=ws + "/m2/deep/er", recursive=True, mode=0o700)
t.ok(a["ok"] and os.path.isdir(ws + "/m2/deep/er") and a["normalisedPath"] == ws + "/m2/deep/er", "mkdir recursive", a)
t.eq(stat.S_IMODE(os.stat(ws + "/m2/deep/er").st_mode), 0o700, "  the last one with the mode asked for")
a = req("mkdir", path=ws + "/m1", recursive=True)
t.ok(a["ok"], "mkdir recursive of an existing directory: ok", a)
a = req("mkdir", path=out + "/newdir")
t.ok(not a["ok"] and a["decision"] == "deny" and not os.path.exists(out + "/newdir"), "mkdir outside: deny", a)

a = req("rename", **{"from": ws + "/dir/a", "to": ws + "/dir/a2"})
t.ok(a["ok"] and a["to"] == ws + "/dir/a2" and a["normalisedTo"] == ws + "/dir/a2" and os.path.exists(ws + "/dir/a2"), "rename: ok, to, normalisedTo", a)
a = req("rename", **{"from": ws + "/keep", "to": out + "/stolen"})
t.ok(not a["ok"] and a["decision"] == "deny" and os.path.exists(ws + "/keep") and not os.path.exists(out + "/stolen"), "rename to the outside: deny, untouched", a)
a = req("rename", **{"from": ws + "/nope", "to": ws + "/nope2"})
t.ok(not a["ok"] and "ENOENT" in a["error"], "rename of a missing file: ENOENT", a)

a = req("copy", **{"from": ws + "/keep", "to": ws + "/keep.copy"})
t.ok(a["ok"] and open(ws + "/keep.copy").read() == "keep\n", "copy a file", a)
a = req("copy", **{"from": ws + "/dir", "to": ws + "/dir.copy"})
t.ok(not a["ok"] and "EISDIR" in a["error"], "copy a directory without recursive: EISDIR", a)
a = req("copy", **{"from": ws + "/dir", "to": ws + "/dir.copy", "recursive": True})
t.ok(a["ok"] and open(ws + "/dir.copy/sub/b").read() == "two\n", "copy a tree recursive", a)
a = req("copy", **{"from": ws + "/secret", "to": ws + "/secret.copy"})
t.ok(not a["ok"] and a["decision"] == "deny" and not os.path.exists(ws + "/secret.copy"), "copy of an unreadable (blocklisted) file: deny", a)
a = req("copy", **{"from": ws + "/keep", "to": out + "/keep"})
t.ok(not a["ok"] and a["decision"] == "deny" and not os.path.exists(out + "/keep"), "copy to the outside: deny", a)
a = req("copy", **{"from": ws + "/dir", "to": ws + "/dir/inside", "recursive": True})
t.ok(not a["ok"] and not os.path.exists(ws + "/dir/inside"), "copy of a tree into itself: refused", a)

a = req("chmod", path=ws + "/keep", mode="0600")
t.ok(a["ok"] and stat.S_IMODE(os.stat(ws + "/keep").st_mode) == 0o600, "chmod", a)
a = req("chmod", path=out + "/o", mode=0o777)
t.ok(not a["ok"] and a["decision"] == "deny" and stat.S_IMODE(os.stat(out + "/o").st_mode) != 0o777, "chmod outside: deny", a)
a = req("chmod", path=ws + "/missing", mode=0o600)
t.ok(not a["ok"] and "ENOENT" in a["error"], "chmod of a missing file: ENOENT", a)

a = req("link", **{"from": ws + "/keep", "to": ws + "/keep.hard"})
t.ok(a["ok"] and os.stat(ws + "/keep.hard").st_ino == os.stat(ws + "/keep").st_ino, "hard link", a)
a = req("link", **{"from": "../keep", "to": ws + "/m1/sym", "symbolic": True})
t.ok(a["ok"] and os.readlink(ws + "/m1/sym") == "../keep", "symbolic link keeps a relative content", a)
a = req("link", **{"from": out + "/o", "to": ws + "/out.hard"})
t.ok(not a["ok"] and not os.path.exists(ws + "/out.hard"), "hard link of an outside file into the workspace: refused", a)
a = req("link", **{"from": ws + "/keep", "to": out + "/sym", "symbolic": True})
t.ok(not a["ok"] and a["decision"] == "deny" and not os.path.lexists(out + "/sym"), "symbolic link created outside: deny", a)

old = os.stat(ws + "/keep.copy").st_mtime
os.utime(ws + "/keep.copy", (1000000000, 1000000000))
a = req("touch", path=ws + "/keep.copy")
t.ok(a["ok"] and os.stat(ws + "/keep.copy").st_mtime > 1000000000, "touch an existing file: mtime now", a)
a = req("touch", path=ws + "/touched")
t.ok(a["ok"] and os.path.isfile(ws + "/touched"), "touch creates a file", a)
a = req("touch", path=out + "/touched")
t.ok(not a["ok"] and a["decision"] == "deny" and not os.path.exists(out + "/touched"), "touch outside: deny", a)

a = req(command="ModifyBackup", path=ws + "/dir/sub/b")
t.ok(a["ok"] and a.get("backup") == "saved", "ModifyBackup of an existing file: saved", a)
open(ws + "/dir/sub/b", "w").write("written by the tool itself\n")
a = req(command="ModifyBackup", path=ws + "/tool-new")
t.ok(a["ok"] and a.get("backup") == "absent", "ModifyBackup of a file the tool will create: recorded as absent", a)
open(ws + "/tool-new", "w").write("new\n")
a = req(command="ModifyBackup", path=out + "/o")
t.ok(not a["ok"] and a["decision"] == "deny", "ModifyBackup outside the workspace: deny", a)

a = req(command="CommitModifyBackup", message="python turn done")
t.ok(a["ok"] and a.get("turn"), "CommitModifyBackup", a)
open(os.environ["TEST_DIR"] + "/turn", "w").write(a.get("turn") or "none")
c.close()
print("DONE")
EOF

audit="$XDG_STATE_HOME/brokered/sessions/$SID/audit.log"
check "audit: read token logged as ipc-token" -- grep -q "phase=ipc-token .*op=open path=$WS/f .*decision=allow.*syscall=ipc-read" "$audit"
check "audit: write token with its backup" -- grep -q "phase=ipc-token .*path=$WS/f .*decision=allow .*syscall=ipc-token .*backup=saved" "$audit"
check "audit: host operations name the client's tool call and trace" -- grep -q "phase=ipc-host-op .*op=rename .*ipcToolCall=tc-py trace=trace-" "$audit"
check "audit: refusals logged as deny" -- grep -q "phase=ipc-host-op .*op=unlink path=$OUTSIDE/o .*decision=deny" "$audit"
check "audit: ModifyBackup logged as host-modify-backup" -- grep -q "phase=host-modify-backup .*path=$WS/dir/sub/b .*backup=saved" "$audit"

log=$(brk log --session "$SID")
check "the committed turn is in the log with its message" -- grep -q "committed .*python turn done" <<<"$log"
turn=$(cat "$TEST_DIR/turn")
show=$(brk show --session "$SID" --json "$turn" 2>&1)
for p in f dir/a dir/sub/b full/x full totrash report.jsonl tool-new keep; do
	check "show lists the pre-image of $p" -- python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if any(x["path"]==sys.argv[2] for x in d["paths"]) else 1)' "$show" "$WS/$p"
done
brk undo --session "$SID" --force "$turn" >/dev/null 2>"$TEST_DIR/undo.err"
ok $? "undo the turn"
is "$(tree_snapshot "$WS")" "$before" "the workspace is exactly as before the turn (every change was backed up)"
is "$(tree_snapshot "$OUTSIDE")" "$outside_before" "nothing outside the workspace changed"

# ---- the reference's fake-broker list, the other way round ----
printf 'a b a\n' >"$WS/file.txt"
printf 'source\n' >"$WS/source.txt"
before=$(tree_snapshot "$WS")
py_checks <<'EOF'
import os
from ipc_client import Conn, Tap, WRITE
ws, sid, sock = os.environ["WS"], os.environ["SID"], os.environ["SOCK"]
t = Tap(); c = Conn(sock)
t.ok(c.request({"command": "EnableModifyBackup", "sessionId": sid, "message": "fake broker"})["ok"], "turn for the toybox/zsh requests")
# echo changed > file.txt: zsh asks for a write token (create, truncate)
ans, fd = c.token(WRITE, ws + "/file.txt", sid, "zsh", "wronly|creat|trunc", "666")
t.eq(ans, "FD", "redirection: write token"); os.write(fd, b"changed\n"); os.close(fd)
# cp source.txt file.txt: toybox asks for a write token on the target
ans, fd = c.token(WRITE, ws + "/file.txt", sid, "toybox-cp", "wronly|creat|trunc", "644")
t.eq(ans, "FD", "cp: write token for the target"); os.write(fd, open(ws + "/source.txt", "rb").read()); os.close(fd)
# sed -i: a temp file (new, write token), then a JSON rename over the original
ans, fd = c.token(WRITE, ws + "/sedXYZ", sid, "toybox-sed", "wronly|creat|excl", "644")
t.eq(ans, "FD", "sed -i: write token for its temp file"); os.write(fd, b"b b b\n"); os.close(fd)
a = c.request({"id": "sed", "command": "HostFileOperation", "operation": "rename", "from": ws + "/sedXYZ", "to": ws + "/file.txt", "sessionId": sid, "toolCallId": "toybox-sed"})
t.ok(a["ok"], "sed -i: JSON rename over the original", a)
# truncate -s 0 file.txt: a write token, then ftruncate through it
ans, fd = c.token(WRITE, ws + "/file.txt", sid, "toybox-truncate", "wronly", "-")
t.eq(ans, "FD", "truncate: write token"); os.ftruncate(fd, 0); os.close(fd)
# mv source.txt file.txt: JSON rename
a = c.request({"id": "mv", "command": "HostFileOperation", "operation": "rename", "from": ws + "/source.txt", "to": ws + "/file.txt", "sessionId": sid, "toolCallId": "toybox-mv"})
t.ok(a["ok"], "mv: JSON rename", a)
a = c.request({"command": "CommitModifyBackup", "sessionId": sid, "message": "fake broker done"})
t.ok(a["ok"], "commit", a)
open(os.environ["TEST_DIR"] + "/turn", "w").write(a.get("turn") or "none")
print("DONE")
EOF
check "audit: the redirection's token took the backup of file.txt" -- grep -q "phase=ipc-token .*path=$WS/file.txt .*decision=allow .*backup=saved" "$audit"
check "audit: the renames were policy-checked host operations" -- test "$(grep -c "phase=ipc-host-op .*op=rename .*normalisedTo=$WS/file.txt .*decision=allow" "$audit")" -ge 2
brk undo --session "$SID" --force "$(cat "$TEST_DIR/turn")" >/dev/null 2>&1
ok $? "undo the fake-broker turn"
is "$(tree_snapshot "$WS")" "$before" "file.txt and source.txt are back: every step was backed up"

check "serve is still running" -- serve_alive
stop_serve
is "$SERVE_STATUS" 0 "serve exits 0 on SIGTERM"
check "serve removed its socket" -- test ! -e "$SOCK"
done_testing
