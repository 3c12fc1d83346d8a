#!/usr/bin/env bash
# Issue 10: the real Codex CLI (@openai/codex from npm, cached across runs) with `brokered
# integrate codex`, driven offline by a scripted OpenAI Responses API endpoint on 127.0.0.1 (a
# custom model provider) that answers one prompt with two exec_command calls: `rm -rf src`, then a
# rewrite of an existing file. Both run rewritten to `brokered run` by the PreToolUse hook; then
# `brokered log` shows one turn with the prompt as its message, and `brokered undo` restores
# everything byte for byte. Codex's own sandbox is off (brokered is the sandbox here), and its hook
# trust is bypassed for this run (the test wrote the hooks itself).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/lib/npm.sh"
require_core
want_agent_cli codex
need python3
CLIENTS=$(cd "$HERE/../clients" && pwd)
need_npm_package "$CLIENTS/codex" CX_DIR
CODEX="$CX_DIR/node_modules/.bin/codex"
[ -x "$CODEX" ] || skip_all "the codex CLI is not in $CX_DIR"

WSP=$(pwd -P)
make_fixture_tree "$WSP" 17
printf 'old notes\n' >notes.txt
brk integrate codex >/dev/null
is "$?" 0 "brokered integrate codex"
snap0=$(tree_snapshot_full "$WSP")

cat >"$TEST_DIR/script.json" <<'JSON'
[{"name": "exec_command", "input": {"cmd": "rm -rf src"}},
 {"name": "exec_command", "input": {"cmd": "printf 'new notes\\n' > notes.txt"}}]
JSON
MODEL_LOG="$TEST_DIR/model.log" node "$CLIENTS/model-endpoint.mjs" "$TEST_DIR/script.json" \
	>"$TEST_DIR/endpoint.out" 2>&1 &
EP=$!
trap 'kill $EP 2>/dev/null; cleanup' EXIT
for _ in $(seq 200); do grep -q '^PORT ' "$TEST_DIR/endpoint.out" && break; sleep 0.1; done
PORT=$(awk '/^PORT /{print $2}' "$TEST_DIR/endpoint.out")
ok "$([ -n "$PORT" ]; echo $?)" "the scripted model endpoint listens on 127.0.0.1:$PORT"

export CODEX_HOME="$TEST_DIR/home/.codex"
mkdir -p "$CODEX_HOME"
cat >"$CODEX_HOME/config.toml" <<TOML
model = "gpt-5.1-codex"
model_provider = "scripted"
[model_providers.scripted]
name = "scripted"
base_url = "http://127.0.0.1:$PORT/v1"
wire_api = "responses"
TOML
PROMPT="tidy the project: drop src and refresh the notes"
HOME="$TEST_DIR/home" OPENAI_API_KEY=test-key timeout 300 "$CODEX" exec --skip-git-repo-check \
	--trust --dangerously-bypass-hook-trust --dangerously-bypass-approvals-and-sandbox "$PROMPT" \
	</dev/null >"$TEST_DIR/codex.out" 2>"$TEST_DIR/codex.err"
is "$?" 0 "codex exec exits 0"
grep -E "^hook:|^exec|^/bin/bash" "$TEST_DIR/codex.err" | sed 's/^/# codex: /' | head -20
is "$(grep -c "^hook: PreToolUse Completed" "$TEST_DIR/codex.err")" 2 "Codex ran the PreToolUse hook for both commands"
is "$(grep -c "brokered' run --workspace '$WSP' -c" "$TEST_DIR/codex.err")" 2 \
	"both commands ran rewritten to brokered run"
is "$("$BRK_PY" -c '
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
print(max(l["results"] for l in L), sum("exited with code 0" in o for o in L[-1]["outputs"]))' "$TEST_DIR/model.log")" "2 2" \
	"the model got two results, both exit code 0"
ok "$([ ! -e src ]; echo $?)" "rm -rf src ran: src is gone"
is "$(cat notes.txt)" "new notes" "the second command rewrote notes.txt"

is "$(brk log --json | "$BRK_PY" -c 'import json,sys; T=json.load(sys.stdin); print(len(T), T[0]["state"], T[0]["message"])')" \
	"1 committed $PROMPT" "brokered log: one turn, committed, the prompt as its message"
is "$(brk show last --json | "$BRK_PY" -c '
import json, sys
P = {p["path"][len(sys.argv[1]):]: p["operation"] for p in json.load(sys.stdin)["paths"]}
print(P.get("/src"), P.get("/src/lib/f1.txt"), P.get("/notes.txt"))' "$WSP")" "deleted deleted modified" \
	"the turn holds both commands' changes"

brk undo >/dev/null
is "$?" 0 "brokered undo"
is_snap "$(tree_snapshot_full "$WSP")" "$snap0" "undo: src and notes.txt are back, byte for byte"
done_testing
