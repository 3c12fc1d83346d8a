#!/usr/bin/env bash
# sandbox.network.mode "deny": curl, Python and a static binary (busybox) get no connection to a
# server on 127.0.0.1, TCP or UDP, raw and packet sockets are refused; allowLocalhost lets the
# loopback through; mode "allow" (the default) is unchanged.
. "$(dirname "$0")/../lib.sh"
require_core
need python3 curl busybox

SERVER="$(dirname "$0")/../helpers/net-server.py"
[ -f "$SERVER" ] || SERVER="$_lib_cwd/tests/helpers/net-server.py"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; cleanup' EXIT

mkdir -p "$OUTSIDE/www"
echo "hello from 127.0.0.1" >"$OUTSIDE/www/index.html"
(cd "$OUTSIDE/www" && exec python3 -c '
import http.server, socketserver, sys
class Q(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
s = socketserver.TCPServer(("127.0.0.1", 0), Q)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()' "$OUTSIDE/http.port") </dev/null >/dev/null 2>&1 &
pids+=($!)
python3 "$SERVER" udp "$OUTSIDE/udp.port" "$OUTSIDE/udp.log" </dev/null >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$OUTSIDE/http.port" ] && [ -e "$OUTSIDE/udp.log.ready" ] && break; sleep 0.05; done
HP=$(cat "$OUTSIDE/http.port")
UP=$(cat "$OUTSIDE/udp.port")
URL="http://127.0.0.1:$HP/index.html"

cat >"$OUTSIDE/py.py" <<'PY'
import errno, socket, sys
def attempt(name, f):
    try:
        f(); print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
hp, up = int(sys.argv[1]), int(sys.argv[2])
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", hp), timeout=5))
attempt("tcp6", lambda: socket.socket(socket.AF_INET6).connect(("::ffff:127.0.0.1", hp)))
attempt("udp-sendto", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"sendto", ("127.0.0.1", up)))
def udp_connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("127.0.0.1", up)); s.send(b"connected")
attempt("udp-connect", udp_connect)
def udp_sendmsg():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendmsg([b"sendmsg"], [], 0, ("127.0.0.1", up))
attempt("udp-sendmsg", udp_sendmsg)
attempt("tcp-bind", lambda: socket.socket().bind(("127.0.0.1", 0)))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
# The same through socket(2) itself, with the high 32 bits of the int arguments set: the kernel
# reads only the low ones, and so must the filter.
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
NR_SOCKET = {"x86_64": 41, "aarch64": 198}[os.uname().machine]
def socket_hi(family, type_):
    def f():
        hi = 1 << 32
        fd = libc.syscall(NR_SOCKET, ctypes.c_long(hi | family), ctypes.c_long(hi | type_), ctypes.c_long(0))
        if fd < 0:
            e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
        os.close(fd)
    return f
attempt("raw-hi", socket_hi(socket.AF_INET, socket.SOCK_RAW))
attempt("packet-hi", socket_hi(socket.AF_PACKET, socket.SOCK_RAW))
PY

# ---- allow (default): everything as natively
is "$(brk run -- curl -sS "$URL" 2>&1 </dev/null)" "hello from 127.0.0.1" "allow: curl reaches the server"

# ---- deny
mkdir -p "$WS/.brokered"
echo '{"sandbox": {"network": {"mode": "deny"}}}' >"$WS/.brokered/settings.json"
brk run -- curl -sS --max-time 20 "$URL" </dev/null >"$TEST_DIR/out" 2>&1
st=$?
[ "$st" -ne 0 ] && ! grep -q hello "$TEST_DIR/out"
ok $? "deny: curl gets no connection (exit $st)"
brk run -- busybox wget -q -O- "$URL" </dev/null >"$TEST_DIR/out" 2>&1
st=$?
[ "$st" -ne 0 ] && ! grep -q hello "$TEST_DIR/out"
ok $? "deny: busybox wget (static) gets no connection (exit $st)"
brk run -- sh -c "echo smuggled | busybox nc -w 5 127.0.0.1 $HP" </dev/null >"$TEST_DIR/out" 2>&1
! grep -q HTTP "$TEST_DIR/out"
ok $? "deny: busybox nc gets no connection"
is "$(brk run -- python3 "$OUTSIDE/py.py" "$HP" "$UP" 2>&1 </dev/null)" "tcp EACCES
tcp6 EACCES
udp-sendto EACCES
udp-connect EACCES
udp-sendmsg EACCES
tcp-bind EACCES
raw EPERM
packet EAFNOSUPPORT
raw-hi EPERM
packet-hi EAFNOSUPPORT" "deny: python's TCP, UDP, bind, raw and packet sockets are refused (high bits set too)"
sleep 0.2
is "$(cat "$OUTSIDE/udp.log" 2>/dev/null)" "" "deny: the UDP server received nothing"
audit_log | grep 'phase=notify-net' | grep "path=inet:127.0.0.1:$HP" | grep -q 'decision=deny result=EACCES'
ok $? "deny: the refusal is in the audit log"

# ---- deny + allowLocalhost
echo '{"sandbox": {"network": {"mode": "deny", "allowLocalhost": true}}}' >"$WS/.brokered/settings.json"
is "$(brk run -- curl -sS "$URL" 2>&1 </dev/null)" "hello from 127.0.0.1" "allowLocalhost: curl reaches 127.0.0.1"
is "$(brk run -- busybox wget -q -O- "$URL" 2>&1 </dev/null)" "hello from 127.0.0.1" \
	"allowLocalhost: busybox wget reaches 127.0.0.1"
is "$(brk run -- python3 "$OUTSIDE/py.py" "$HP" "$UP" 2>&1 </dev/null)" "tcp ok
tcp6 ok
udp-sendto ok
udp-connect ok
udp-sendmsg ok
tcp-bind ok
raw EPERM
packet EAFNOSUPPORT
raw-hi EPERM
packet-hi EAFNOSUPPORT" "allowLocalhost: loopback TCP and UDP work, raw and packet sockets stay refused"
sleep 0.2
is "$(sort "$OUTSIDE/udp.log" 2>/dev/null | tr '\n' ' ')" "datagram connected datagram sendmsg datagram sendto " \
	"allowLocalhost: the UDP server received the three datagrams"
# a server inside the sandbox on the loopback, reached from inside
is "$(brk run -- python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname()); c.sendall(b"loop")
print(s.accept()[0].recv(4).decode())' 2>&1 </dev/null)" "loop" "allowLocalhost: a loopback server inside works"
is "$(brk run -- python3 -c '
import errno, socket
try:
    socket.socket().bind(("0.0.0.0", 0)); print("bound")
except OSError as e:
    print(errno.errorcode[e.errno])' 2>&1 </dev/null)" "EACCES" "allowLocalhost: binding all addresses is refused"

done_testing
