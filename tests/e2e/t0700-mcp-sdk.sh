#!/usr/bin/env bash
# Issue 10: `brokered mcp` against the official MCP SDK client from npm (@modelcontextprotocol/sdk):
# initialize, tools/list with the eight tools and their schemas, ping, a `run` of `rm -rf src` whose
# result names the turn and the deleted paths, log/show/diff of that turn, then `undo` puts every
# file back byte for byte; bounded output with a truncation flag, a timeout, a command that prints
# JSON-RPC on its stdout, tool errors for bad arguments, a JSON-RPC error for an unknown tool,
# turn_begin/turn_commit around two runs and a turn left open committed by the next turn_begin,
# restore of one path.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/lib/npm.sh"
require_core
need python3
CLIENTS=$(cd "$HERE/../clients" && pwd)
need_npm_package "$CLIENTS" SDK_DIR
cp "$CLIENTS/mcp-client.mjs" "$TEST_DIR/"
# The ESM client resolves the SDK from its own directory: run it from the cached install.
ln -s "$SDK_DIR/node_modules" "$TEST_DIR/node_modules"

WSP=$(pwd -P)
make_fixture_tree "$WSP" 7
printf 'alpha\nbeta\n' >notes.txt
snap0=$(tree_snapshot_full "$WSP")

# steps: python-side helpers over the client's JSON lines
q() { # q EXPR: evaluate EXPR over the result lines (list R), print the value
	"$BRK_PY" -c '
import json, sys
R = [json.loads(l) for l in open(sys.argv[1])]
print(eval(sys.argv[2]))' "$TEST_DIR/out.jsonl" "$1"
}

cat >"$TEST_DIR/scenario.json" <<EOF
[
 {"list": true},
 {"ping": true},
 {"call": "run", "args": {"command": "rm -rf src && echo removed", "message": "remove the sources"}},
 {"sh": "test ! -e $WSP/src"},
 {"call": "log"},
 {"call": "show", "args": {"turn": "last"}},
 {"call": "diff", "args": {"turn": "last", "paths": ["src/lib/mid.bin", "src/f1.txt"]}},
 {"call": "undo"},
 {"sh": "test -f $WSP/src/lib/f1.txt"},
 {"call": "run", "args": {"command": "head -c 200000 /dev/zero | tr '\\\\0' a"}},
 {"call": "run", "args": {"command": "echo oops >&2; exit 3"}},
 {"call": "run", "args": {"command": "printf '{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\\\\n'"}},
 {"call": "run", "args": {"command": "sleep 60", "timeout_s": 1}},
 {"call": "run", "args": {"command": 5}},
 {"call": "run", "args": {"command": "true", "bogus": 1}},
 {"call": "show", "args": {"turn": "--help"}},
 {"call": "no_such_tool", "args": {}},
 {"call": "turn_begin", "args": {"message": "two runs"}},
 {"call": "run", "args": {"command": "echo one > one.txt"}},
 {"call": "run", "args": {"command": "echo gamma >> notes.txt"}},
 {"call": "turn_commit", "args": {"message": "two runs, one turn"}},
 {"call": "log"},
 {"call": "turn_begin", "args": {"message": "left open by a crash"}},
 {"call": "run", "args": {"command": "echo crash > crash.txt"}},
 {"call": "turn_begin", "args": {"message": "the next prompt"}},
 {"call": "turn_commit", "args": {"message": "the next prompt"}},
 {"call": "log"},
 {"call": "restore", "args": {"turn": "TWO_RUNS", "paths": ["notes.txt"]}},
 {"ping": true}
]
EOF

run_client() {
	(cd "$TEST_DIR" && timeout 600 node mcp-client.mjs scenario.json "$BROKERED" mcp --workspace "$WSP") \
		>"$TEST_DIR/out.jsonl" 2>"$TEST_DIR/client.err"
}
# The restore step names the "two runs" turn, known only once it exists: run in two halves.
"$BRK_PY" - "$TEST_DIR/scenario.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
json.dump(s[:27], open(sys.argv[1] + ".1", "w"))
json.dump(s[27:], open(sys.argv[1] + ".2", "w"))
PYEOF
mv "$TEST_DIR/scenario.json.1" "$TEST_DIR/scenario.json"
run_client
is "$?" 0 "the SDK client ran the scenario (exit 0)"
sed 's/^/# client: /' "$TEST_DIR/client.err" | head -20

is "$(q 'R[0]["server"]["name"]')" brokered "initialize: serverInfo.name is brokered"
is "$(q 'R[0]["tools"]')" True "initialize: the server announces the tools capability"
is "$(q '" ".join(t["name"] for t in R[1]["tools"])')" "run log show diff undo restore turn_begin turn_commit" \
	"tools/list: exactly the eight tools, in order"
is "$(q '[t for t in R[1]["tools"] if t["name"]=="run"][0]["required"]')" "['command']" \
	"tools/list: run requires command"
is "$(q '[t for t in R[1]["tools"] if t["name"]=="restore"][0]["required"]')" "['turn', 'paths']" \
	"tools/list: restore requires turn and paths"
is "$(q 'all(t["type"]=="object" for t in R[1]["tools"])')" True "tools/list: every input schema is an object schema"
is "$(q 'R[2]["result"]')" "{}" "ping answers {}"

# run rm -rf src
is "$(q 'R[3]["isError"]')" False "run rm -rf src: no tool error"
is "$(q 'R[3]["structured"]["exitStatus"]')" 0 "run: exit status 0"
is "$(q 'R[3]["structured"]["stdout"]')" removed "run: the command's stdout"
is "$(q 'R[3]["structured"]["stdoutTruncated"]')" False "run: stdout not truncated"
tid=$(q 'R[3]["structured"]["turn"]')
ok "$([ -n "$tid" ] && [ "$tid" != None ]; echo $?)" "run: the result names the turn ($tid)"
is "$(q 'sorted(p["path"] for p in R[3]["structured"]["paths"] if p["operation"]=="deleted")[0]')" "$WSP/src" \
	"run: the paths changed include the deleted src"
is "$(q 'any(p["path"]=="'"$WSP"'/src/lib/mid.bin" and p["operation"]=="deleted" for p in R[3]["structured"]["paths"])')" True \
	"run: ... and a file below it"
is "$(q 'R[3]["structured"]["approvalNeeded"]')" "[]" "run: no approval needed"
is "$(q 'json.loads(R[3]["text"]) == R[3]["structured"]')" True "run: the text content is the structured result as JSON"
is "$(q 'R[4]["status"]')" 0 "src is really gone after the run"
is "$(q 'R[5]["structured"]["turns"][0]["message"]')" "remove the sources" "log: the turn's message is run's message"
is "$(q 'R[5]["structured"]["turns"][0]["id"]')" "$tid" "log: the newest turn is the run's"
is "$(q 'R[6]["structured"]["turn"]')" "$tid" "show last: the run's turn"
is "$(q 'any(p["path"]=="'"$WSP"'/src/f1.txt" and p["operation"]=="deleted" for p in R[6]["structured"]["paths"])')" True \
	"show: src/f1.txt deleted"
is "$(q '"--- a/src/f1.txt" in R[7]["structured"]["diff"]')" True "diff with paths: src/f1.txt's pre-image, named relative to the workspace as git does"
is "$(q '"+++ /dev/null" in R[7]["structured"]["diff"] and "Binary" in R[7]["structured"]["diff"] or "mid.bin" in R[7]["structured"]["diff"]')" True \
	"diff with paths: the binary file named too"
is "$(q 'R[8]["isError"]')" False "undo: no tool error"
is "$(q 'R[8]["structured"]["turn"]')" "$tid" "undo: undid the run's turn"
is "$(q 'R[8]["structured"]["failed"]')" 0 "undo: nothing failed"
is "$(q 'R[9]["status"]')" 0 "src is back after undo"

# bounded output, exit status, stdout that looks like JSON-RPC, timeout
is "$(q 'R[10]["structured"]["stdoutTruncated"]')" True "200000 bytes of stdout: truncated flag set"
is "$(q 'len(R[10]["structured"]["stdout"])')" 65536 "... and 64 KiB kept"
is "$(q 'R[11]["structured"]["exitStatus"]')" 3 "exit 3: exitStatus 3"
is "$(q 'R[11]["structured"]["stderr"]')" "oops" "stderr: the command's own (brokered's report is not part of it)"
is "$(q 'R[11]["isError"]')" False "a failing command is a result, not a tool error"
is "$(q 'R[12]["structured"]["stdout"]')" '{"jsonrpc":"2.0","id":3,"result":{}}' \
	"a command printing JSON-RPC: it is data in stdout; the stream is intact"
is "$(q 'R[13]["structured"]["timedOut"]')" True "timeout_s 1 on sleep 60: timedOut"
is "$(q 'R[13]["isError"]')" True "... and a tool error"

# bad arguments, unknown tool
is "$(q 'R[14]["isError"]')" True "command 5 (not a string): a tool error"
is "$(q '"must be a string" in R[14]["text"]')" True "... saying why"
is "$(q 'R[15]["isError"]')" True "an unknown argument: a tool error"
is "$(q 'R[16]["isError"]')" True "show turn --help (looks like an option): a tool error, not an option"
is "$(q 'R[17]["error"]["code"]')" -32602 "an unknown tool: JSON-RPC error -32602"

# turn_begin / two runs / turn_commit
is "$(q 'R[18]["isError"]')" False "turn_begin"
is "$(q 'R[19]["structured"]["turn"] == R[18]["structured"]["turn"] == R[20]["structured"]["turn"]')" True \
	"both runs joined the begun turn"
is "$(q 'R[22]["structured"]["turns"][0]["message"]')" "two runs, one turn" "turn_commit: the turn carries the commit message"
is "$(q 'R[22]["structured"]["turns"][0]["paths"]')" 2 "the turn holds both runs' paths"
two=$(q 'R[18]["structured"]["turn"]')
open_id=$(q 'R[23]["structured"]["turn"]')
is "$(q 'R[25]["structured"].get("committedInterrupted")')" "$open_id" \
	"turn_begin with a turn left open: it is committed first and named"
is "$(q '[t["message"] for t in R[27]["structured"]["turns"] if t["id"]=="'"$open_id"'"][0]')" \
	"left open by a crash (interrupted)" "the turn left open is committed with its message, marked interrupted"
is "$(q '[t["state"] for t in R[27]["structured"]["turns"] if t["id"]=="'"$open_id"'"][0]')" committed "... and committed"
is "$(cat crash.txt)" crash "its change stays (committed, not undone)"

# second half: restore one path of the "two runs" turn
sed "s/TWO_RUNS/$two/" "$TEST_DIR/scenario.json.2" >"$TEST_DIR/scenario.json"
run_client
is "$?" 0 "the SDK client ran the restore scenario"
is "$(q 'R[1]["isError"]')" False "restore notes.txt of the two-runs turn"
is "$(cat notes.txt)" "$(printf 'alpha\nbeta')" "notes.txt is back as before the turn"
is "$(cat one.txt)" one "a path not named stays as it is"
is "$(q 'R[2]["result"]')" "{}" "the server still answers ping"

# The whole round trip: remove one.txt and crash.txt (made later), and everything else is as before.
rm -f one.txt crash.txt
is_snap "$(tree_snapshot_full "$WSP")" "$snap0" "after undo and restore the tree is as it was, byte for byte"
done_testing
