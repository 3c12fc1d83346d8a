#!/usr/bin/env bash
# sandbox.network.mode "proxy": an allowed name works through brokered's proxy (HTTP forwarding,
# CONNECT, SOCKS5, curl, busybox wget, git over http); an IP literal, a name not allowed, a denied
# name, curl --noproxy and direct sockets to the same server all fail; a name that resolves to the
# local host is not a way in; malformed and oversized requests are refused.
. "$(dirname "$0")/../lib.sh"
require_core
need python3 curl busybox git

pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; cleanup' EXIT

mkdir -p "$OUTSIDE/www"
echo "hello through the proxy" >"$OUTSIDE/www/index.html"
git init -q --bare "$OUTSIDE/www/repo.git"
git -C "$OUTSIDE" init -q src && git -C "$OUTSIDE/src" -c user.name=t -c user.email=t@t commit -q --allow-empty -m first &&
	git -C "$OUTSIDE/src" push -q "$OUTSIDE/www/repo.git" HEAD:refs/heads/main 2>/dev/null &&
	git -C "$OUTSIDE/www/repo.git" symbolic-ref HEAD refs/heads/main &&
	git -C "$OUTSIDE/www/repo.git" update-server-info
ok $? "a dumb-http git repository to serve"
(cd "$OUTSIDE/www" && exec python3 -c '
import http.server, socketserver, sys
class Q(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        open(sys.argv[2], "a").write(self.requestline + "\n")
class S(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), Q)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()' "$OUTSIDE/http.port" "$OUTSIDE/http.log") </dev/null >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$OUTSIDE/http.port" ] && break; sleep 0.05; done
P=$(cat "$OUTSIDE/http.port")

mkdir -p "$WS/.brokered"
setnet() { printf '{"sandbox": {"network": {"mode": "proxy", %s}}}\n' "$1" >"$WS/.brokered/settings.json"; }
setnet '"allowedDomains": ["localhost"]'

# ---- allowed
is "$(brk run -- curl -sS "http://localhost:$P/index.html" 2>&1 </dev/null)" "hello through the proxy" \
	"allowed name: curl through the proxy (HTTP forwarding)"
is "$(brk run -- curl -sS -p "http://localhost:$P/index.html" 2>&1 </dev/null)" "hello through the proxy" \
	"allowed name: curl through a CONNECT tunnel"
is "$(brk run -- sh -c 'exec curl -sS -x "$ALL_PROXY" "$1"' sh "http://localhost:$P/index.html" 2>&1 </dev/null)" \
	"hello through the proxy" "allowed name: curl through SOCKS5 (ALL_PROXY)"
is "$(brk run -- busybox wget -q -O- "http://localhost:$P/index.html" 2>&1 </dev/null)" "hello through the proxy" \
	"allowed name: busybox wget (static) through the proxy"
brk run -- git clone -q "http://localhost:$P/repo.git" clone </dev/null >"$TEST_DIR/git.out" 2>&1
ok $? "allowed name: git clone over http through the proxy"
is "$(git -C "$WS/clone" log --format=%s 2>/dev/null)" "first" "git clone: the commit arrived"
is "$(brk run -- sh -c 'echo "$HTTP_PROXY $https_proxy" | sed "s/:[0-9][0-9]*/:PORT/g"; echo "[$NO_PROXY]"' 2>&1 </dev/null)" \
	"http://127.0.0.1:PORT http://127.0.0.1:PORT
[]" "the proxy variables are set, NO_PROXY empty"

# ---- refused
: >"$OUTSIDE/http.log"
brk run --json -- curl -sS -f "http://127.0.0.1:$P/index.html" </dev/null >"$TEST_DIR/out" 2>"$TEST_DIR/err"
st=$?
is "$st" 120 "IP literal: refused, exit 120 (approval needed)"
grep '^{' "$TEST_DIR/err" | tail -1 >"$TEST_DIR/report"
is "$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["approvalNeeded"][0]; print(a["path"], a["access"])' "$TEST_DIR/report")" \
	"net:127.0.0.1 connect" "IP literal: --json names net:127.0.0.1"
brk run -- curl -sS -f "http://other.test:$P/index.html" </dev/null >"$TEST_DIR/out" 2>"$TEST_DIR/err"
is "$?" 120 "a name not allowed: refused, exit 120"
grep -q "net:other.test" "$TEST_DIR/err"
ok $? "a name not allowed: named on stderr"
brk run -- curl -sS --noproxy '*' "http://localhost:$P/index.html" </dev/null >"$TEST_DIR/out" 2>&1
st=$?
[ "$st" -ne 0 ] && ! grep -q hello "$TEST_DIR/out"
ok $? "curl --noproxy: no direct connection (exit $st)"
is "$(brk run -- python3 -c '
import errno, socket, sys
for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::ffff:127.0.0.1")):
    try:
        socket.socket(fam).connect((host, int(sys.argv[1]))); print("connected")
    except OSError as e:
        print(errno.errorcode[e.errno])' "$P" 2>&1 </dev/null)" "EACCES
EACCES" "a program that ignores the proxy variables: EACCES"
brk run -- sh -c "echo GET / | busybox nc -w 5 127.0.0.1 $P" </dev/null >"$TEST_DIR/out" 2>&1
! grep -q HTTP "$TEST_DIR/out"
ok $? "busybox nc (static) straight to the server: no connection"
is "$(cat "$OUTSIDE/http.log")" "" "the server saw none of the refused requests"

setnet '"allowedDomains": ["localhost", "*.test"], "deniedDomains": ["localhost"]'
brk run -- curl -sS -f "http://localhost:$P/index.html" </dev/null >"$TEST_DIR/out" 2>&1
st=$?
[ "$st" -ne 0 ] && ! grep -q hello "$TEST_DIR/out"
ok $? "deniedDomains wins over allowedDomains"
is "$(brk run --approve net:127.0.0.1 -- curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/index.html" 2>/dev/null </dev/null)" \
	"403" "--approve net:127.0.0.1 does not open the local host without allowLocalhost"

# a name that resolves to the local host (as a rebinding DNS name would) is not a way in
alias=$(awk '$1 ~ /^127\./ { for (i = 2; i <= NF; i++) if ($i != "localhost") { print $i; exit } }' /etc/hosts)
if [ -n "$alias" ]; then
	setnet "\"allowedDomains\": [\"$alias\"]"
	is "$(brk run -- curl -s -o /dev/null -w '%{http_code}' "http://$alias:$P/index.html" 2>/dev/null </dev/null)" \
		"403" "an allowed name that resolves to 127.0.0.1 is refused ($alias)"
	setnet "\"allowedDomains\": [\"$alias\"], \"allowLocalhost\": true"
	is "$(brk run -- curl -sS "http://$alias:$P/index.html" 2>&1 </dev/null)" "hello through the proxy" \
		"... and allowed with allowLocalhost"
else
	skip "a name that resolves to 127.0.0.1" "no such alias in /etc/hosts"
	skip "the same with allowLocalhost" "no such alias in /etc/hosts"
fi

# ---- hostile requests to the proxy itself
setnet '"allowedDomains": ["localhost"]'
is "$(brk run -- python3 -c '
import os, socket
host, port = os.environ["HTTP_PROXY"].rsplit("/", 1)[1].split(":")
def ask(data):
    s = socket.create_connection((host, int(port)))
    s.sendall(data)
    return s.recv(100).split(b"\r\n")[0]
stalled = [socket.create_connection((host, int(port))) for _ in range(8)]
for st in stalled:
    st.sendall(b"GET http://localhost/ HTTP/1.1\r\nX: slow")
print(ask(b"GET http://localhost/ HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n").decode())
print(ask(b"GET http://localhost\nevil/ HTTP/1.1\r\n\r\n").decode())
print(ask(b"GET http://user@localhost/ HTTP/1.1\r\n\r\n").decode())
print(ask(b"GET https://localhost/ HTTP/1.1\r\n\r\n").decode())
print(list(ask(b"\x05\x01\x02")))' 2>&1 </dev/null)" "HTTP/1.1 431 Request Header Fields Too Large
HTTP/1.1 400 Bad Request
HTTP/1.1 400 Bad Request
HTTP/1.1 400 Bad Request
[5, 255]" "the proxy refuses oversized and malformed requests, SOCKS without no-auth, while slow clients stall"

done_testing
