#!/usr/bin/env bash
# Load: hundreds of concurrent clients on the broker socket (bounded in count and time). No
# request is lost (every one answered, ok, in order per connection) and no backup is lost (the
# turn names every path, and undo gives the workspace back exactly).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
. "$here/lib/ipc.sh"
need python3
N=${BROKERED_IPC_LOAD_CLIENTS:-300}
export N

mkdir -p "$WS/ld"
python3 -c '
import sys
for i in range(int(sys.argv[2])):
    open("%s/ld/f%d" % (sys.argv[1], i), "w").write("file %d\n" % i)
    open("%s/ld/g%d" % (sys.argv[1], i), "w").write("other %d\n" % i)' "$WS" "$N"
before=$(py_snapshot "$WS")
check "serve starts" -- start_serve

py_checks <<'EOF'
import json, os, threading, time
from ipc_client import Conn, Tap, WRITE
ws, sid, sock, n = os.environ["WS"], os.environ["SID"], os.environ["SOCK"], int(os.environ["N"])
t = Tap()
c = Conn(sock)
a = c.request({"command": "EnableModifyBackup", "sessionId": sid, "message": "load"})
t.ok(a["ok"], "turn opened", a)
results = [None] * n
start = threading.Barrier(n)
def client(i):
    try:
        start.wait(30)
        k = Conn(sock, timeout=60)
        ans, fd = k.token(WRITE, "%s/ld/f%d" % (ws, i), sid, "load-%d" % i, "wronly|trunc")
        if ans != "FD" or fd is None:
            results[i] = "token " + ans; return
        os.write(fd, b"changed %d\n" % i); os.close(fd)
        a = k.request({"id": "r%d" % i, "command": "HostFileOperation", "operation": "rename",
                       "from": "%s/ld/g%d" % (ws, i), "to": "%s/ld/h%d" % (ws, i), "sessionId": sid})
        b = k.request({"id": "t%d" % i, "command": "HostFileOperation", "operation": "touch",
                       "path": "%s/ld/new%d" % (ws, i), "sessionId": sid})
        k.close()
        results[i] = "ok" if a["ok"] and a["id"] == "r%d" % i and b["ok"] and b["id"] == "t%d" % i else "json %r %r" % (a, b)
    except Exception as e:
        results[i] = repr(e)
t0 = time.monotonic()
ths = [threading.Thread(target=client, args=(i,)) for i in range(n)]
for th in ths: th.start()
for th in ths: th.join(120)
dt = time.monotonic() - t0
bad = [(i, r) for i, r in enumerate(results) if r != "ok"]
t.ok(not bad, "%d concurrent clients, 3 requests each: all answered and done (%.1fs)" % (n, dt), bad[:5])
t.ok(dt < 100, "within the time bound")
t.ok(all(open("%s/ld/f%d" % (ws, i)).read() == "changed %d\n" % i for i in range(n)), "every write went through its fd")
t.ok(all(os.path.exists("%s/ld/h%d" % (ws, i)) and not os.path.exists("%s/ld/g%d" % (ws, i)) for i in range(n)), "every rename happened")
a = c.request({"command": "CommitModifyBackup", "sessionId": sid, "message": "load done"})
t.ok(a["ok"], "turn committed", a)
open(os.environ["TEST_DIR"] + "/turn", "w").write(a.get("turn") or "none")
print("DONE")
EOF

turn=$(cat "$TEST_DIR/turn")
show=$(brk show --session "$SID" --json "$turn" 2>&1)
missing=$(python3 -c '
import json, sys
d = json.loads(sys.argv[1]); ws = sys.argv[2]; n = int(sys.argv[3])
have = {x["path"]: x for x in d["paths"]}
miss = []
for i in range(n):
    for name, kind in (("f", "file"), ("g", "file"), ("h", "absent"), ("new", "absent")):
        p = "%s/ld/%s%d" % (ws, name, i)
        if have.get(p, {}).get("preimage") != kind:
            miss.append(p)
print(len(miss), " ".join(miss[:5]))' "$show" "$WS" "$N")
is "$missing" "0 " "the turn holds a pre-image of every path all clients touched"
check "serve survived the load" -- serve_alive
brk undo --session "$SID" --force "$turn" >/dev/null 2>&1
ok $? "undo the load turn"
is "$(py_snapshot "$WS")" "$before" "the workspace is back exactly: no backup was lost"
stop_serve
is "$SERVE_STATUS" 0 "serve exits 0"
done_testing
