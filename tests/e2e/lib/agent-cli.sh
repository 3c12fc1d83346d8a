# shellcheck shell=bash
# The common parts of the real agent CLI tests (t0720 Claude Code, t0730 Gemini CLI, t0740 Codex
# CLI): the scripted model endpoint on 127.0.0.1, and the checks every one ends with.
. "$(dirname "${BASH_SOURCE[0]}")/npm.sh"
AGENT_CLIENTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../clients" && pwd)

# start_endpoint SCRIPT.json: serve the script in the background (requests logged to
# $TEST_DIR/model.log); PORT is its port; it is stopped when the script exits.
start_endpoint() {
	MODEL_LOG="$TEST_DIR/model.log" node "$AGENT_CLIENTS/model-endpoint.mjs" "$1" \
		>"$TEST_DIR/endpoint.out" 2>&1 &
	EP=$!
	trap 'kill $EP 2>/dev/null; cleanup' EXIT
	for _ in $(seq 200); do grep -q '^PORT ' "$TEST_DIR/endpoint.out" && break; sleep 0.1; done
	PORT=$(awk '/^PORT /{print $2}' "$TEST_DIR/endpoint.out")
	ok "$([ -n "$PORT" ]; echo $?)" "the scripted model endpoint listens on 127.0.0.1:$PORT"
}

# agent_fixture: a tree to destroy with an existing notes.txt, as every agent test scripts it
agent_fixture() {
	make_fixture_tree "$WSP" "$1"
	printf 'old notes\n' >"$WSP/notes.txt"
}

# check_turn_and_undo PROMPT SNAPSHOT: after the agent's prompt, src is gone and notes.txt new; one
# committed turn with the prompt as message holds both; undo brings back SNAPSHOT byte for byte.
check_turn_and_undo() {
	ok "$([ ! -e "$WSP/src" ]; echo $?)" "the shell command ran: src is gone"
	is "$(cat "$WSP/notes.txt")" "new notes" "the second tool call ran: notes.txt has the new content"
	is "$(brk log --json | "$BRK_PY" -c 'import json,sys; T=json.load(sys.stdin); print(len(T), T[0]["state"], T[0]["message"])')" \
		"1 committed $1" "brokered log: one turn, committed, the prompt as its message"
	is "$(brk show last --json | "$BRK_PY" -c '
import json, sys
P = {p["path"][len(sys.argv[1]):]: p["operation"] for p in json.load(sys.stdin)["paths"]}
print(P.get("/src"), P.get("/src/lib/f1.txt"), P.get("/notes.txt"))' "$WSP")" "deleted deleted modified" \
		"the turn holds the shell command's deletes and notes.txt's change"
	brk undo >/dev/null
	is "$?" 0 "brokered undo"
	is_snap "$(tree_snapshot_full "$WSP")" "$2" "undo: src and notes.txt are back, byte for byte"
}
