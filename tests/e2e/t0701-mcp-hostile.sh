#!/usr/bin/env bash
# Issue 10: `brokered mcp` fed raw hostile lines on stdin: garbage, batches, wrong versions and id
# types, bad params, nesting bombs, an oversized line, invalid UTF-8, duplicate keys, NUL bytes,
# unknown methods and notifications, CRLF, a last line without newline. Every message gets the
# JSON-RPC answer the specification gives it (or none, for a notification), stdout carries nothing
# but those answers, and the server keeps serving to the end (exit 0 at end of input).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
need python3

"$BRK_PY" - "$TEST_DIR/in" <<'PYEOF'
import sys
L = []
L.append(b"not json")
L.append(b"[]")
L.append(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
L.append(b'{"jsonrpc":"2.0","id":1}')
L.append(b'{"jsonrpc":"1.0","id":2,"method":"ping"}')
L.append(b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}')
L.append(b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"x"}')
L.append(b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run","arguments":[1]}}')
L.append(b"[" * 100000)
L.append(b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"' + b"a" * (2 << 20) + b'"}}')
L.append(b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":"\xff\xfe"}}')
L.append(b'{"jsonrpc":"2.0","method":"notifications/whatever","params":{"x":[1,2]}}')
L.append(b'{"jsonrpc":"2.0","id":7,"method":"resources/list"}')
L.append(b'{"jsonrpc":"2.0","id":8,"id":9,"method":"ping"}')
L.append(b'{"jsonrpc":"2.0","id":10,"method":"ping"}\r')
L.append(b"")
L.append(b'{"jsonrpc":"2.0","id":"n\x00ul","method":"ping"}')
L.append(b'{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}')
L.append(b'{"jsonrpc":"2.0","id":12,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}')
L.append(b'{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"diff","arguments":{"turn":"x","paths":' +
         b"[" + b",".join([b'"p"'] * 2000) + b"]}}}")
L.append(b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"run","arguments":{"command":"true","timeout_s":1.5}}}')
L.append(b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}')
L.append(b'{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"turn_commit","arguments":{"message":"m"}}}')
L.append(b'{"jsonrpc":"2.0","id":"last","method":"ping"}')
open(sys.argv[1], "wb").write(b"\n".join(L))  # the last line has no newline
PYEOF

timeout 120 "$BROKERED" mcp <"$TEST_DIR/in" >"$TEST_DIR/out" 2>"$TEST_DIR/err"
is "$?" 0 "the server reads everything and exits 0 at end of input"

check() { # check PYTHON-EXPR DESCRIPTION: EXPR over A, the answers in order
	local v
	v=$("$BRK_PY" -c '
import json, sys
A = [json.loads(l) for l in open(sys.argv[1], "rb").read().split(b"\n") if l]
E = lambda i: (A[i].get("id"), A[i]["error"]["code"]) if "error" in A[i] else (A[i].get("id"), "result")
print(eval(sys.argv[2]))' "$TEST_DIR/out" "$1" 2>&1)
	is "$v" True "$2"
}

check 'all(a.get("jsonrpc") == "2.0" for a in A)' "stdout holds nothing but JSON-RPC answers (each line parses)"
check 'len(A) == 22' "one answer per message except the notification and the blank line ($(grep -c '' "$TEST_DIR/out") lines)"
check 'E(0) == (None, -32700)' "garbage: parse error, id null"
check 'E(1) == (None, -32600)' "empty batch: invalid request"
check 'E(2) == (None, -32600)' "a batch: invalid request (batches are not part of MCP)"
check 'E(3) == (1, -32600)' "no method: invalid request, with the id"
check 'E(4) == (2, -32600)' "jsonrpc 1.0: invalid request"
check 'E(5) == (None, -32600)' "an object as id: invalid request, id null"
check 'E(6) == (3, -32602)' "params a string: invalid params"
check 'E(7)[1] == "result" and A[7]["result"]["isError"] is True' "arguments an array: a tool error (isError)"
check 'E(8) == (None, -32700)' "100000 nested brackets: refused, no crash"
check 'E(9) == (None, -32600) and "too large" in A[9]["error"]["message"]' "a 2 MiB line: message too large"
check 'E(10) == (None, -32700)' "invalid UTF-8: parse error"
check 'E(11) == (7, -32601)' "unknown method: method not found (the notification before it got no answer)"
check 'E(12) == (None, -32700)' "duplicate id keys: refused"
check 'E(13) == (10, "result")' "a CRLF line is answered"
check 'E(14) == (None, -32700)' "a NUL byte in a string: refused"
check 'A[15]["result"]["protocolVersion"] == "2025-11-25"' "initialize with an unknown version: the server's newest"
check 'A[16]["result"]["protocolVersion"] == "2025-03-26"' "initialize with a supported older version: that version"
check 'A[17]["result"]["isError"] is True and "too many" in A[17]["result"]["content"][0]["text"]' \
	"2000 paths: a tool error (bounded)"
check 'A[18]["result"]["isError"] is True' "timeout_s 1.5 (not an integer): a tool error"
check 'E(19) == (None, -32600)' "a fractional id: invalid request"
check 'A[20]["result"]["isError"] is True and "No open turn" in A[20]["result"]["content"][0]["text"]' \
	"turn_commit with no open turn: a tool error with brokered's message"
check 'E(21) == ("last", "result")' "the last line, without newline, is answered: the server kept serving"
done_testing
