#!/usr/bin/env bash
# Issue 10: the real Claude Code CLI (@anthropic-ai/claude-code from npm, cached across runs) with
# `brokered integrate claude`, driven offline by a scripted model endpoint on 127.0.0.1 that
# answers one prompt with tool calls: a Bash `rm -rf src`, a Read and a Write of an existing file.
# Then `brokered log` shows one turn with the prompt as its message, and `brokered undo` restores
# everything byte for byte.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/lib/agent-cli.sh"
require_core
want_agent_cli claude
need python3
need_npm_package "$AGENT_CLIENTS/claude-code" CC_DIR
CLAUDE="$CC_DIR/node_modules/.bin/claude"
[ -x "$CLAUDE" ] || skip_all "the claude CLI is not in $CC_DIR"

WSP=$(pwd -P)
agent_fixture 11
brk integrate claude >/dev/null
is "$?" 0 "brokered integrate claude"
snap0=$(tree_snapshot_full "$WSP")

cat >"$TEST_DIR/script.json" <<EOF
[{"name": "Bash", "input": {"command": "rm -rf src", "description": "remove the sources"}},
 {"name": "Read", "input": {"file_path": "$WSP/notes.txt"}},
 {"name": "Write", "input": {"file_path": "$WSP/notes.txt", "content": "new notes\\n"}}]
EOF
start_endpoint "$TEST_DIR/script.json"

PROMPT="tidy the project: drop src and refresh the notes"
mkdir -p "$TEST_DIR/home"
HOME="$TEST_DIR/home" ANTHROPIC_BASE_URL="http://127.0.0.1:$PORT" ANTHROPIC_API_KEY=test-key \
	CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 \
	timeout 300 "$CLAUDE" -p "$PROMPT" --output-format json --allowedTools Bash Read Write Edit \
	</dev/null >"$TEST_DIR/claude.out" 2>"$TEST_DIR/claude.err"
is "$?" 0 "claude -p exits 0"
sed 's/^/# claude: /' "$TEST_DIR/claude.err" | head -10
is "$("$BRK_PY" -c 'import json,sys; J=json.load(open(sys.argv[1])); print(J["subtype"], J["is_error"])' "$TEST_DIR/claude.out")" \
	"success False" "claude reports success"
is "$("$BRK_PY" -c '
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
main = [l for l in L if l["tools"]]
print(max(l["results"] for l in main), sum(len(l["errors"]) for l in main))' "$TEST_DIR/model.log")" "3 0" \
	"the model got three tool results, none an error"
grep -q "brokered' run --workspace" "$TEST_DIR/home/.claude/projects"/*/*.jsonl 2>/dev/null
is "$?" 0 "Claude's transcript shows the Bash command rewritten to brokered run"
check_turn_and_undo "$PROMPT" "$snap0"
done_testing
