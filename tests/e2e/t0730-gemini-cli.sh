#!/usr/bin/env bash
# Issue 10: the real Gemini CLI (@google/gemini-cli from npm, cached across runs) with `brokered
# integrate gemini`, driven offline by a scripted Gemini API endpoint on 127.0.0.1
# (GOOGLE_GEMINI_BASE_URL) that answers one prompt with function calls: run_shell_command
# `rm -rf src`, then write_file over an existing file. Then `brokered log` shows one turn with the
# prompt as its message, and `brokered undo` restores everything byte for byte.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/lib/agent-cli.sh"
require_core
want_agent_cli gemini
need python3
need_npm_package "$AGENT_CLIENTS/gemini-cli" GM_DIR
GEMINI="$GM_DIR/node_modules/.bin/gemini"
[ -x "$GEMINI" ] || skip_all "the gemini CLI is not in $GM_DIR"

WSP=$(pwd -P)
agent_fixture 13
brk integrate gemini >/dev/null
is "$?" 0 "brokered integrate gemini"
snap0=$(tree_snapshot_full "$WSP")

cat >"$TEST_DIR/script.json" <<JSON
[{"name": "run_shell_command", "input": {"command": "rm -rf src", "description": "remove the sources"}},
 {"name": "write_file", "input": {"file_path": "$WSP/notes.txt", "content": "new notes\\n"}}]
JSON
start_endpoint "$TEST_DIR/script.json"

# API-key auth, no folder-trust prompt, nothing sent anywhere else.
mkdir -p "$TEST_DIR/home/.gemini"
cat >"$TEST_DIR/home/.gemini/settings.json" <<'JSON'
{"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
 "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
 "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false}}
JSON
PROMPT="tidy the project: drop src and refresh the notes"
# An explicit model: the default ("auto") asks a router model first, which this endpoint does not play.
HOME="$TEST_DIR/home" GOOGLE_GEMINI_BASE_URL="http://127.0.0.1:$PORT" GEMINI_API_KEY=test-key \
	timeout 300 "$GEMINI" -m gemini-2.5-flash -p "$PROMPT" --output-format json --yolo \
	</dev/null >"$TEST_DIR/gemini.out" 2>"$TEST_DIR/gemini.err"
is "$?" 0 "gemini -p exits 0"
grep -iE 'error' "$TEST_DIR/gemini.err" | sed 's/^/# gemini: /' | head -10
is "$("$BRK_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["response"])' "$TEST_DIR/gemini.out")" \
	"Done." "gemini finished the prompt"
is "$("$BRK_PY" -c '
import json, sys
L = [json.loads(l) for l in open(sys.argv[1])]
main = [l for l in L if l["tools"]]
print(max(l["results"] for l in main), sum(len(l["errors"]) for l in main))' "$TEST_DIR/model.log")" "2 0" \
	"the model got two function results, none an error"
check_turn_and_undo "$PROMPT" "$snap0"
done_testing
