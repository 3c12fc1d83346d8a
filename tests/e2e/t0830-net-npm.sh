#!/usr/bin/env bash
# npm through brokered's proxy (network mode "proxy") against a local registry on 127.0.0.1,
# reached by the allowed name localhost; the same install straight to 127.0.0.1 is refused.
. "$(dirname "$0")/../lib.sh"
require_core
need python3 npm

pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; cleanup' EXIT

# A one-package registry: the packument and the tarball.
mkdir -p "$OUTSIDE/reg"
python3 - "$OUTSIDE/reg" <<'PY'
import hashlib, io, json, sys, tarfile
d = sys.argv[1]
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    for name, data in (("package/package.json", b'{"name":"tiny-brokered","version":"1.0.0","main":"index.js"}'),
                       ("package/index.js", b'module.exports = "tiny through the proxy";\n')):
        i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
open(d + "/tiny.tgz", "wb").write(buf.getvalue())
open(d + "/sha1", "w").write(hashlib.sha1(buf.getvalue()).hexdigest())
PY
(cd "$OUTSIDE/reg" && exec python3 -c '
import http.server, json, socketserver, sys
class Q(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        open(sys.argv[2], "a").write(self.requestline + "\n")
    def do_GET(self):
        port = self.server.server_address[1]
        if self.path.rstrip("/").endswith("/tiny-brokered"):
            body = json.dumps({"name": "tiny-brokered", "dist-tags": {"latest": "1.0.0"},
                "versions": {"1.0.0": {"name": "tiny-brokered", "version": "1.0.0",
                    "dist": {"tarball": "http://localhost:%d/tiny.tgz" % port,
                             "shasum": open("sha1").read()}}}}).encode()
            ctype = "application/json"
        elif self.path == "/tiny.tgz":
            body, ctype = open("tiny.tgz", "rb").read(), "application/octet-stream"
        else:
            self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
        self.send_response(200); self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
class S(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), Q)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()' "$OUTSIDE/port" "$OUTSIDE/reg.log") </dev/null >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$OUTSIDE/port" ] && break; sleep 0.05; done
P=$(cat "$OUTSIDE/port")

mkdir -p "$WS/.brokered"
echo '{"sandbox": {"network": {"mode": "proxy", "allowedDomains": ["localhost"]}}}' >"$WS/.brokered/settings.json"
echo '{"name": "app", "version": "1.0.0"}' >"$WS/package.json"
npm_run() { # npm_run REGISTRY: install the package, npm's cache in the scratch dir
	brk run -- sh -c 'export npm_config_cache="$TMPDIR/npm-cache" npm_config_update_notifier=false
		exec npm install --no-audit --no-fund --registry "$1" tiny-brokered' sh "$1" </dev/null
}
npm_run "http://localhost:$P/" >"$TEST_DIR/npm.out" 2>&1
st=$?
ok $st "npm install through the proxy (registry http://localhost)"
[ "$st" -eq 0 ] || sed 's/^/#   /' "$TEST_DIR/npm.out" | tail -15
is "$(cat "$WS/node_modules/tiny-brokered/index.js" 2>/dev/null)" 'module.exports = "tiny through the proxy";' \
	"npm: the package is installed in the workspace"
grep -q '"tiny-brokered"' "$WS/package.json"
ok $? "npm: package.json records the dependency"

rm -rf "$WS/node_modules" "$WS/package-lock.json"
: >"$OUTSIDE/reg.log"
npm_run "http://127.0.0.1:$P/" >"$TEST_DIR/npm.out" 2>&1
st=$?
[ "$st" -ne 0 ] && [ ! -e "$WS/node_modules/tiny-brokered" ]
ok $? "npm with the registry as an IP literal: refused (exit $st)"
is "$(cat "$OUTSIDE/reg.log")" "" "the registry saw no request"

done_testing
