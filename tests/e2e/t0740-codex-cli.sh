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
. "$HERE/lib/agent-cli.sh"
require_core
want_agent_cli codex
need python3
need_npm_package "$AGENT_CLIENTS/codex" CX_DIR
CODEX="$CX_DIR/node_modules/.bin/codex"
[ -x "$CODEX" ] || skip_all "the codex CLI is not in $CX_DIR"

WSP=$(pwd -P)
agent_fixture 17
brk integrate codex >/dev/null
is "$?" 0 "brokered integrate codex"
snap0=$(tree_snapshot_full "$WSP")

cat >"$TEST_DIR/script.json" <<'JSON'
[{"name": "exec_command", "input": {"cmd": "rm -rf src"}},
 {"name": "exec_command", "input": {"cmd": "printf 'new notes\\n' > notes.txt"}}]
JSON
start_endpoint "$TEST_DIR/script.json"

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
check_turn_and_undo "$PROMPT" "$snap0"
done_testing
