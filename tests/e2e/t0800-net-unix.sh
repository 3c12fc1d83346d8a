#!/usr/bin/env bash
# Unix sockets by path: a daemon's socket outside the workspace cannot be reached and receives
# nothing (a prompt block, exit 120 without a terminal, --approve unix:PATH on the rerun); sockets
# in the workspace, the scratch dir and allowUnixSockets work; binding in the workspace works as
# natively; an abstract socket outside the sandbox cannot be reached.
. "$(dirname "$0")/../lib.sh"
require_core
need python3

SERVER="$(dirname "$0")/../helpers/net-server.py"
[ -f "$SERVER" ] || SERVER="$_lib_cwd/tests/helpers/net-server.py"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; cleanup' EXIT
serve() { # serve KIND WHERE LOG: start a server, wait until it listens
	python3 "$SERVER" "$@" </dev/null >/dev/null 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do [ -e "$3.ready" ] && return 0; sleep 0.05; done
	return 1
}
# the client: connect, send, print what it got or the error's errno name
cat >"$OUTSIDE/client.py" <<'PY'
import errno, socket, sys
addr = sys.argv[1]
if addr.startswith("@"):
    addr = "\0" + addr[1:]
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(addr)
    s.sendall(b"secret-command")
    print("got", s.recv(10).decode().strip())
except OSError as e:
    print("refused", errno.errorcode.get(e.errno, e.errno))
PY
client() { python3 "$OUTSIDE/client.py" "$@"; }

DAEMON="$OUTSIDE/daemon.sock"
serve unix "$DAEMON" "$OUTSIDE/daemon.log"
ok $? "a daemon listens outside the workspace"

# ---- refused: EACCES, nothing received, a prompt block, the audit line
out=$(brk run --json -- python3 "$OUTSIDE/client.py" "$DAEMON" 2>"$TEST_DIR/err" </dev/null)
st=$?
is "$out" "refused EACCES" "outside socket: connect fails with EACCES"
is "$st" 120 "outside socket: exit 120 (needs approval)"
sleep 0.2
is "$(cat "$OUTSIDE/daemon.log" 2>/dev/null)" "" "outside socket: the daemon received nothing"
grep '^{' "$TEST_DIR/err" | tail -1 >"$TEST_DIR/report"
is "$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["approvalNeeded"][0]; print(a["path"], a["access"])' "$TEST_DIR/report")" \
	"unix:$DAEMON connect" "outside socket: --json names unix:PATH with access connect"
grep -q "refused.*unix:$DAEMON\|unix:$DAEMON" "$TEST_DIR/err"
ok $? "outside socket: the refusal is on stderr"
audit_log | grep 'phase=notify-net' | grep 'op=connect' | grep -q "decision=prompt result=EACCES"
ok $? "outside socket: audit line with decision=prompt result=EACCES"

# a symlink in the workspace to the daemon's socket is decided on the socket, not the link
ln -s "$DAEMON" "$WS/link.sock"
is "$(brk run -- python3 "$OUTSIDE/client.py" link.sock 2>/dev/null </dev/null)" "refused EACCES" \
	"a workspace symlink to an outside socket is refused"
rm -f "$WS/link.sock"

# a second name of the daemon's socket in the workspace (a hard link) is not the workspace's
if ln "$DAEMON" "$WS/hard.sock" 2>/dev/null; then
	is "$(brk run -- python3 "$OUTSIDE/client.py" hard.sock 2>/dev/null </dev/null)" "refused EACCES" \
		"a hard link of an outside socket in the workspace is refused"
	rm -f "$WS/hard.sock"
else
	skip "a hard link of an outside socket" "link(2) refused here"
fi

# a symlink swapped between a workspace socket and the daemon's while the command connects
cat >"$OUTSIDE/race.py" <<'PY'
import os, socket, sys, threading
ws, daemon = sys.argv[1], sys.argv[2]
real = os.path.join(ws, "real.sock")
srv = socket.socket(socket.AF_UNIX); srv.bind(real); srv.listen(64)
def accept():
    while True:
        try:
            srv.accept()[0].close()
        except OSError:
            return
threading.Thread(target=accept, daemon=True).start()
link = os.path.join(ws, "race.sock")
os.symlink(real, link)
stop = False
swaps = 0
def swap():
    global swaps
    i = 0
    while not stop:
        tmp = link + ".tmp"
        try:
            os.symlink(daemon if i % 2 else real, tmp)
            os.rename(tmp, link)
            swaps += 1
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        i += 1
threading.Thread(target=swap, daemon=True).start()
# At least 300 connects while the link is being swapped, and on until one reached the workspace's
# socket (however the threads are scheduled), within a bound.
ok = tries = 0
while tries < 20000 and (tries < 300 or swaps < 10 or ok == 0):
    c = socket.socket(socket.AF_UNIX)
    try:
        c.connect(link); c.sendall(b"raced"); ok += 1
    except OSError:
        pass
    c.close()
    tries += 1
stop = True
print("done", ok > 0 and swaps >= 10)
PY
out=$(brk run -- python3 "$OUTSIDE/race.py" "$WS" "$DAEMON" 2>/dev/null </dev/null)
is "$out" "done True" "symlink race: the command ran its connects while the link was swapped (some reached the workspace socket)"
sleep 0.3
! grep -qs raced "$OUTSIDE/daemon.log"
ok $? "symlink race: the daemon received nothing"
rm -f "$WS/real.sock" "$WS/race.sock" "$WS/race.sock.tmp"

# a listener whose backlog is full: a blocking connect waits for room as natively (it was answered
# EAGAIN), one with SO_SNDTIMEO gives up with EAGAIN when it ends, a non-blocking one at once
cat >"$OUTSIDE/backlog.py" <<'PY'
import os, socket, struct, sys, threading, time
path = os.path.join(sys.argv[1], "backlog.sock")
srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(0)
held = [socket.socket(socket.AF_UNIX)]
held[0].connect(path)  # the backlog of one is full now
def attempt(label, nonblock=False, timeo=False):
    c = socket.socket(socket.AF_UNIX)
    c.setblocking(not nonblock)
    if timeo:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 200000))
    try:
        c.connect(path); r = "connected"
    except OSError as e:
        r = os.strerror(e.errno)
    held.append(c)
    print(label, r)
attempt("nonblocking:", nonblock=True)
attempt("timeout:", timeo=True)
def later():
    time.sleep(0.3)
    while True:
        srv.accept()
threading.Thread(target=later, daemon=True).start()
attempt("blocking:")
PY
want=$(cd "$TEST_DIR" && rm -f backlog.sock && python3 "$OUTSIDE/backlog.py" "$TEST_DIR")
is "$want" "nonblocking: Resource temporarily unavailable
timeout: Resource temporarily unavailable
blocking: connected" "full backlog: natively as expected"
is "$(brk run -- python3 "$OUTSIDE/backlog.py" "$WS" 2>&1 </dev/null)" "$want" \
	"full backlog: a blocking connect waits for room, with SO_SNDTIMEO or non-blocking EAGAIN, as natively"
rm -f "$WS/backlog.sock"
# a command killed while its connect waits for room: the run ends, its wait with it
cat >"$OUTSIDE/stuck.py" <<'PY'
import os, signal, socket, sys, time
path = os.path.join(sys.argv[1], "stuck.sock")
srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(0)
a = socket.socket(socket.AF_UNIX); a.connect(path)
pid = os.fork()
if pid == 0:
    socket.socket(socket.AF_UNIX).connect(path)
    os._exit(0)
time.sleep(0.3)
os.kill(pid, signal.SIGKILL)
print("reaped", os.waitpid(pid, 0)[1] == signal.SIGKILL)
PY
is "$(timeout 30 "$BROKERED" run -- python3 "$OUTSIDE/stuck.py" "$WS" 2>&1 </dev/null)" "reaped True" \
	"a command killed in a connect that waits for room is reaped, and the run ends"
rm -f "$WS/stuck.sock"

# ---- on a terminal: the dialog; "allow for this session" is remembered
if command -v tmux >/dev/null 2>&1; then
	sock="$TEST_DIR/tmux.sock"
	tmux -S "$sock" new-session -d -x 160 -y 40 \
		"cd '$WS' && XDG_STATE_HOME='$XDG_STATE_HOME' XDG_CONFIG_HOME='$XDG_CONFIG_HOME' '$BROKERED' run -- python3 '$OUTSIDE/client.py' '$DAEMON' > '$TEST_DIR/tty.out'; echo \$? > '$TEST_DIR/status'"
	for _ in $(seq 200); do
		tmux -S "$sock" capture-pane -p 2>/dev/null | grep -q "deny (default)" && break
		sleep 0.1
	done
	tmux -S "$sock" capture-pane -p >"$TEST_DIR/screen"
	tmux -S "$sock" send-keys s Enter
	for _ in $(seq 200); do [ -s "$TEST_DIR/status" ] && break; sleep 0.1; done
	tmux -S "$sock" kill-server 2>/dev/null
	grep -q "connect.*unix:$DAEMON" "$TEST_DIR/screen"
	ok $? "terminal: the dialog names the socket"
	is "$(cat "$TEST_DIR/status" 2>/dev/null)" 0 "terminal: allowed for the session, the rerun succeeds"
	is "$(tail -1 "$TEST_DIR/tty.out" 2>/dev/null)" "got pong" "terminal: the rerun reached the daemon"
	is "$(brk run -- python3 "$OUTSIDE/client.py" "$DAEMON" 2>/dev/null </dev/null)" "got pong" \
		"session grant: remembered by the next run of the session"
	rm -f "$XDG_STATE_HOME"/brokered/sessions/*/grants
else
	skip "terminal dialog for a socket" "tmux not installed"
fi

# ---- approved: --approve unix:PATH; allowUnixSockets
is "$(brk run --approve "unix:$DAEMON" -- python3 "$OUTSIDE/client.py" "$DAEMON" 2>/dev/null </dev/null)" \
	"got pong" "--approve unix:PATH: the connection works"
sleep 0.2
grep -q "connection secret-command" "$OUTSIDE/daemon.log"
ok $? "--approve unix:PATH: the daemon received the data"
mkdir -p "$WS/.brokered"
printf '{"sandbox": {"network": {"allowUnixSockets": ["%s/*.sock"]}}}\n' "$OUTSIDE" >"$WS/.brokered/settings.json"
is "$(brk run -- python3 "$OUTSIDE/client.py" "$DAEMON" 2>/dev/null </dev/null)" "got pong" \
	"allowUnixSockets pattern: the connection works"
printf '{"sandbox": {"network": {"allowUnixSockets": ["%s/other*"]}}}\n' "$OUTSIDE" >"$WS/.brokered/settings.json"
is "$(brk run -- python3 "$OUTSIDE/client.py" "$DAEMON" 2>/dev/null </dev/null)" "refused EACCES" \
	"a pattern that does not match does not open it"
rm -f "$WS/.brokered/settings.json"

# ---- workspace and scratch: bind, connect, datagrams, as natively
cat >"$OUTSIDE/local.py" <<'PY'
import os, socket, stat, sys
base = sys.argv[1]
p = os.path.join(base, "srv.sock")
s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1)
mode = stat.S_IMODE(os.lstat(p).st_mode)
c = socket.socket(socket.AF_UNIX); c.connect(p); c.sendall(b"hi")
a, _ = s.accept()
print("stream", a.recv(2).decode(), stat.S_ISSOCK(os.lstat(p).st_mode), oct(mode))
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.bind(os.path.join(base, "dg.sock"))
e = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); e.sendto(b"dgram", os.path.join(base, "dg.sock"))
print("dgram", d.recv(10).decode())
try:
    s.bind(p)
except OSError as err:
    print("rebind", err.errno != 0)
PY
is "$(brk run -- sh -c 'umask 027; exec python3 "$1" "$PWD"' sh "$OUTSIDE/local.py" 2>&1 </dev/null)" \
	"stream hi True 0o750
dgram dgram
rebind True" "workspace: bind (mode from the umask), connect, datagrams"
[ -S "$WS/srv.sock" ]
ok $? "workspace: the socket file stays after the run"
rm -f "$WS/srv.sock" "$WS/dg.sock"
is "$(brk run -- sh -c 'exec python3 "$1" "$TMPDIR"' sh "$OUTSIDE/local.py" 2>&1 </dev/null | head -2)" \
	"stream hi True 0o755
dgram dgram" "scratch dir: bind, connect, datagrams"

# a bind outside the workspace is refused, as before
brk run -- python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$OUTSIDE/new.sock" \
	</dev/null >/dev/null 2>&1
[ ! -e "$OUTSIDE/new.sock" ]
ok $? "bind outside the workspace: no socket file"

# ---- datagrams to an outside socket (sendto with an address) are decided the same way
python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).bind(sys.argv[1])' "$OUTSIDE/dg-out.sock" &
pids+=($!)
for _ in $(seq 50); do [ -S "$OUTSIDE/dg-out.sock" ] && break; sleep 0.05; done
is "$(brk run -- python3 -c '
import errno, socket, sys
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"x", sys.argv[1]); print("sent")
except OSError as e:
    print("refused", errno.errorcode[e.errno])' "$OUTSIDE/dg-out.sock" 2>/dev/null </dev/null)" "refused EACCES" \
	"sendto an outside datagram socket: EACCES"

# ---- abstract: a socket of the sandbox works, one from outside does not
serve abstract "brokered-t0800-$$" "$OUTSIDE/abstract.log"
is "$(brk run -- python3 "$OUTSIDE/client.py" "@brokered-t0800-$$" 2>/dev/null </dev/null)" "refused EPERM" \
	"abstract socket outside the sandbox: EPERM"
sleep 0.3
! grep -q "secret" "$OUTSIDE/abstract.log" 2>/dev/null
ok $? "abstract socket outside the sandbox: received no data"
is "$(brk run -- python3 -c '
import socket
s = socket.socket(socket.AF_UNIX); s.bind("\0brokered-inside-'$$'"); s.listen(1)
c = socket.socket(socket.AF_UNIX); c.connect("\0brokered-inside-'$$'"); c.sendall(b"in")
print(s.accept()[0].recv(2).decode())' 2>&1 </dev/null)" "in" "abstract socket of the sandbox: works"

done_testing
