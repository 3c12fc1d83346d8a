#!/usr/bin/env bash
# The broker socket under hostile and clumsy clients: malformed, oversized, too deep, binary and
# mismatched requests are answered with an error (the id kept where it could be read), logged, and
# perform nothing; the connection and the broker carry on. A client that stalls (half a line, or
# never reading its answers) does not stall others and is timed out; the request rate is throttled,
# not dropped. `brokered client` exits 0 / 1 / 2 and times out on a broker that never answers.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
. "$here/lib/ipc.sh"
need python3

printf 'keep\n' >"$WS/keep"
before=$(tree_snapshot "$WS")
check "serve starts (rate 200/s, idle timeout 3 s)" -- start_serve --rate 200 --idle-timeout 3

py_checks <<'EOF'
import json, os, random, socket, threading, time
from ipc_client import Conn, Tap, READ, WRITE
ws, sid, sock = os.environ["WS"], os.environ["SID"], os.environ["SOCK"]
t = Tap()
def good(c, i="ok"):
    a = c.request({"id": i, "command": "ModifyBackup", "path": ws + "/keep", "sessionId": sid})
    return a.get("ok") is True and a.get("id") == i

c = Conn(sock)
c.send('{"id":"x",\n'); a = json.loads(c.line()[0])
t.ok(a["ok"] is False and a.get("error"), "malformed JSON: an error answer", a)
t.ok(good(c, "after-malformed"), "  the connection still serves")
a = c.request({"id": "bad1", "operation": "explode", "path": ws + "/keep", "sessionId": sid})
t.ok(a["ok"] is False and a["id"] == "bad1" and "unknown operation" in a["error"], "unknown operation: error with the id", a)
a = c.request({"id": "bad2", "command": "Format", "sessionId": sid})
t.ok(a["ok"] is False and a["id"] == "bad2", "unknown command: error", a)
deep = {"id": "deep", "operation": "touch", "path": ws + "/deep", "sessionId": sid}
x = deep
for _ in range(20): x["n"] = {}; x = x["n"]
a = c.request(deep)
t.ok(a["ok"] is False and "deep" in a["error"] and not os.path.exists(ws + "/deep"), "JSON nested too deep: refused, nothing done", a)
a = c.request({"id": "sess", "operation": "touch", "path": ws + "/other", "sessionId": "someone-else"})
t.ok(a["ok"] is False and "session" in a["error"] and not os.path.exists(ws + "/other"), "another session's id: refused, nothing done", a)
a = c.request({"id": "nosess", "operation": "touch", "path": ws + "/other"})
t.ok(a["ok"] is False and not os.path.exists(ws + "/other"), "no session id: refused", a)
a = c.request({"id": "rel", "operation": "touch", "path": "relative/x", "sessionId": sid})
t.ok(a["ok"] is False and "absolute" in a["error"], "relative path: refused", a)
a = c.request({"id": "long", "operation": "touch", "path": ws + "/" + "a" * 5000, "sessionId": sid})
t.ok(a["ok"] is False, "path longer than PATH_MAX: refused", a)
a = c.request({"id": "types", "operation": "delete", "path": ws + "/keep", "recursive": "yes", "sessionId": sid})
t.ok(a["ok"] is False and os.path.exists(ws + "/keep"), "wrong field type: refused, nothing deleted", a)
c.send("x" * 70000 + "\n"); t.eq(c.line()[0], b"DENY", "a text line over the limit: DENY")
c.send("{" + "x" * 70000 + "\n"); a = json.loads(c.line()[0])
t.ok(a["ok"] is False and "too long" in a["error"], "a JSON line over the limit: error", a)
t.ok(good(c, "after-long"), "  the connection still serves after oversized lines")
for line, why in [(b"com.workbuddy.sandbox.read\t/etc/hosts\0\t" + sid.encode() + b"\ttc\n", "a NUL byte"),
                  ("com.workbuddy.sandbox.exec\t%s/keep\t%s\ttc\n" % (ws, sid), "an unknown class"),
                  ("com.workbuddy.sandbox.read\t%s/keep\t%s\n" % (ws, sid), "three fields"),
                  ("com.workbuddy.sandbox.read\tkeep\t%s\ttc\n" % sid, "a relative path"),
                  ("com.workbuddy.sandbox.read\t%s/keep\t%s\ttc\tcreat\t-\n" % (ws, sid), "write flags on a read"),
                  ("com.workbuddy.sandbox.read-write\t%s/keep\t%s\ttc\tbogus\t-\n" % (ws, sid), "unknown flags"),
                  ("com.workbuddy.sandbox.read-write\t%s/keep\t%s\ttc\t-\t99999\n" % (ws, sid), "a bad mode"),
                  ("\n", "an empty line")]:
    c.send(line); l, fds = c.line()
    t.ok(l == b"DENY" and not fds, "text request with %s: DENY" % why, l)
c.close()

# Binary garbage: one answer per line, and the broker lives on.
random.seed(5)
blob = bytes(random.getrandbits(8) for _ in range(30000)).replace(b"\n", b"") 
lines = [blob[i:i + 300] for i in range(0, len(blob), 300)]
c = Conn(sock); c.send(b"\n".join(lines) + b"\n")
got = 0
try:
    for _ in lines: c.line(); got += 1
except Exception as e:
    print("# " + repr(e))
t.eq(got, len(lines), "binary garbage: one answer per line")
t.ok(good(c, "after-garbage"), "  and the connection still serves")
c.close()

# Pipelining: many requests in one write, answers in order.
c = Conn(sock)
c.send("".join(json.dumps({"id": "p%d" % i, "command": "ModifyBackup", "path": ws + "/keep", "sessionId": sid}) + "\n" for i in range(150)))
ids = [json.loads(c.line()[0])["id"] for _ in range(150)]
t.eq(ids, ["p%d" % i for i in range(150)], "150 pipelined requests: 150 answers in order")
c.close()

# A stalled client (half a line) does not stall another one, and is timed out.
stalled = Conn(sock); stalled.send("com.workbuddy.sandbox.read\t/etc/hos")
t0 = time.monotonic(); other = Conn(sock); ok_other = good(other, "beside-stalled"); dt = time.monotonic() - t0
t.ok(ok_other and dt < 1.0, "a stalled client does not delay another (%.3fs)" % dt)
other.close()
stalled.s.settimeout(8)
t0 = time.monotonic()
try:
    r = stalled.s.recv(100)
except Exception as e:
    r = repr(e)
dt = time.monotonic() - t0
t.ok(r == b"" and dt < 6, "  the stalled client is closed after the idle timeout (%.1fs)" % dt, r)
stalled.close()

# A client that never reads its answers does not stall another one.
lazy = Conn(sock)
def flood():
    try:
        lazy.send("".join(json.dumps({"id": "f%d" % i, "command": "ModifyBackup", "path": ws + "/keep", "sessionId": sid}) + "\n" for i in range(20000)))
    except Exception:
        pass
th = threading.Thread(target=flood, daemon=True); th.start()
time.sleep(0.5)
t0 = time.monotonic(); other = Conn(sock); ok_other = good(other, "beside-lazy"); dt = time.monotonic() - t0
t.ok(ok_other and dt < 1.0, "a client that never reads does not delay another (%.3fs)" % dt)
other.close(); lazy.close()

# An idle connection is closed after the timeout.
idle = Conn(sock); idle.s.settimeout(8); t0 = time.monotonic()
try:
    r = idle.s.recv(10)
except Exception as e:
    r = repr(e)
t.ok(r == b"" and time.monotonic() - t0 < 6, "an idle connection is closed after the timeout", r)
idle.close()

# The rate is throttled, not dropped: 600 requests at 200/s (burst 200) take about 2 s.
c = Conn(sock, timeout=30)
t0 = time.monotonic()
c.send("".join(json.dumps({"id": "q%d" % i, "command": "ModifyBackup", "path": ws + "/keep", "sessionId": sid}) + "\n" for i in range(600)))
ans = [json.loads(c.line()[0]) for _ in range(600)]
dt = time.monotonic() - t0
t.ok(all(a["ok"] for a in ans) and [a["id"] for a in ans] == ["q%d" % i for i in range(600)], "600 requests over the rate: all answered, in order")
t.ok(1.5 <= dt < 10, "  throttled to the rate (%.2fs)" % dt)
c.close()
print("DONE")
EOF

audit="$XDG_STATE_HOME/brokered/sessions/$SID/audit.log"
check "malformed requests are logged (phase=ipc-error)" -- grep -q "phase=ipc-error .*proto=json reason=unknown\\\\x20operation" "$audit"
check "session mismatches are logged" -- grep -q "phase=ipc-error .*reason=session\\\\x20id\\\\x20mismatch" "$audit"
check "oversized lines are logged" -- grep -q "phase=ipc-error .*reason=line\\\\x20too\\\\x20long" "$audit"
is "$(tree_snapshot "$WS")" "$before" "no refused request changed the workspace"
check "serve survived all of it" -- serve_alive

# A second broker for the same socket refuses to start; the first keeps serving.
"$BROKERED" serve --session "$SID" --workspace "$WS" --socket "$SOCK" >/dev/null 2>"$TEST_DIR/second.err"
st=$?
check "a second serve on a live socket fails" -- test "$st" -ne 0
check "  saying why" -- grep -q "already serves" "$TEST_DIR/second.err"
brk_client touch "$WS/after-second" >/dev/null 2>&1
ok $? "  and the first still answers"

# A socket directory that others can enter is refused, and left as it was.
mkdir -p "$TEST_DIR/open"
chmod 755 "$TEST_DIR/open"
"$BROKERED" serve --session "$SID" --workspace "$WS" --socket "$TEST_DIR/open/s.sock" >/dev/null 2>"$TEST_DIR/open.err"
check "serve refuses a socket directory others can enter" -- test $? -ne 0 -a ! -e "$TEST_DIR/open/s.sock"
is "$(stat -c %a "$TEST_DIR/open")" 755 "  and does not change its mode"
check "  saying why" -- grep -q "closed to others" "$TEST_DIR/open.err"

# brokered client: exit statuses.
brk_client touch "$WS/t1" >/dev/null 2>&1
is $? 0 "client: done is 0"
brk_client touch "$OUTSIDE/t1" >/dev/null 2>&1
is $? 1 "client: denied is 1"
"$BROKERED" client --socket "$TEST_DIR/no-such.sock" --session "$SID" touch "$WS/t2" >/dev/null 2>&1
is $? 2 "client: no broker is 2"
check "  and did nothing" -- test ! -e "$WS/t2"
brk_client frobnicate "$WS/t2" >/dev/null 2>&1
is $? 1 "client: a usage error is 1 (never fall back on a request gone wrong)"
# a "broker" that accepts and never answers
python3 - "$TEST_DIR/mute.sock" <<'EOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(5)
conns = []
end = time.time() + 20
s.settimeout(1)
while time.time() < end:
    try: conns.append(s.accept()[0])
    except OSError: pass
EOF
mute=$!
for i in $(seq 50); do [ -S "$TEST_DIR/mute.sock" ] && break; sleep 0.1; done
start=$(date +%s%N)
"$BROKERED" client --socket "$TEST_DIR/mute.sock" --session "$SID" --timeout 1 touch "$WS/t3" >/dev/null 2>&1
st=$?
ms=$((($(date +%s%N) - start) / 1000000))
is "$st" 2 "client: a broker that never answers is 2 (timeout)"
check "  after about the timeout (${ms} ms)" -- test "$ms" -ge 900 -a "$ms" -lt 5000
kill "$mute" 2>/dev/null
wait "$mute" 2>/dev/null

# The default socket: $XDG_RUNTIME_DIR/brokered/<session>/broker.sock, dir 0700, socket 0600,
# found by the client from BROKERED_SESSION_ID alone.
export XDG_RUNTIME_DIR="$TEST_DIR/xdg-run"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
"$BROKERED" serve --session other-session --workspace "$WS" >"$TEST_DIR/other.out" 2>"$TEST_DIR/other.err" &
other=$!
def="$XDG_RUNTIME_DIR/brokered/other-session/broker.sock"
for i in $(seq 100); do [ -S "$def" ] && break; sleep 0.1; done
is "$(stat -c %a "$(dirname "$def")" 2>/dev/null) $(stat -c %a "$def" 2>/dev/null)" "700 600" "default socket: directory 0700, socket 0600"
is "$(head -1 "$TEST_DIR/other.out")" "$def" "serve prints its socket path"
BROKERED_SESSION_ID=other-session "$BROKERED" client touch "$WS/via-default" >/dev/null 2>&1
ok $? "client finds the default socket from BROKERED_SESSION_ID"
check "  and the operation happened" -- test -f "$WS/via-default"
kill -TERM "$other"
wait "$other"
is $? 0 "that serve exits 0"
check "  and removed its socket and directory" -- test ! -e "$(dirname "$def")"

# SO_PEERCRED: a peer of another uid is refused even where file permissions would let it in
# (root can connect to anyone's socket). Needs root and the unprivileged test user.
tu=${BROKERED_TEST_USER:-brokered-test}
if [ "$(id -u)" -eq 0 ] && id "$tu" >/dev/null 2>&1 && command -v runuser >/dev/null 2>&1; then
	ud="$TEST_DIR/user"
	mkdir -p "$ud/ws" "$ud/state" "$ud/run"
	printf 'mine\n' >"$ud/ws/f"
	chown -R "$tu" "$ud"
	chmod 700 "$ud/run"
	chmod 755 "$TEST_DIR"
	runuser -u "$tu" -- env XDG_STATE_HOME="$ud/state" XDG_CONFIG_HOME="$ud/state" HOME="$ud" \
		"$BROKERED" serve --session peer --workspace "$ud/ws" --socket "$ud/run/s.sock" \
		>"$ud/out" 2>"$ud/err" &
	upid=$!
	for i in $(seq 100); do [ -S "$ud/run/s.sock" ] && break; sleep 0.1; done
	check "the unprivileged user's serve is up" -- test -S "$ud/run/s.sock"
	res=$(python3 - "$ud/run/s.sock" "$ud/ws/f" <<'EOF2'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
try:
    s.sendall((json.dumps({"id": "x", "operation": "delete", "path": sys.argv[2], "sessionId": "peer"}) + "\n").encode())
    print("answer" if s.recv(100) else "closed")
except (ConnectionResetError, BrokenPipeError):
    print("closed")
EOF2
)
	is "$res" closed "a peer of another uid (root) is closed without an answer"
	is "$(cat "$ud/ws/f" 2>/dev/null)" mine "  and its request did nothing"
	kill -TERM "$upid"
	wait "$upid"
	check "  the user's serve logged the refusal" -- grep -q "reason=peer\\\\x20of\\\\x20another\\\\x20uid" "$ud/state/brokered/sessions/peer/audit.log"
else
	skip "a peer of another uid is refused (SO_PEERCRED)" "needs root and the user $tu"
fi

stop_serve
is "$SERVE_STATUS" 0 "serve exits 0 on SIGTERM"
done_testing
