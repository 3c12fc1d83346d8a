#!/usr/bin/env bash
# Issue 10: `brokered integrate claude|codex|gemini` and the hook handlers, driven with the
# payloads the agents' documentation specifies (no agent needed). Integrate merges into existing
# settings without clobbering them, is idempotent, keeps a backup, --uninstall removes exactly its
# entries, --check reports, malformed settings are refused untouched. Per agent, one prompt's
# lifecycle: prompt → turn begin (the prompt as message), shell tool → rewritten to run under
# brokered (then run as the agent would), file edit tools → backed up before the "agent" writes,
# stop → turn commit; then `brokered log` shows one turn with the prompt and `brokered undo` puts
# everything back. A turn left open by a crashed agent is committed by the next prompt; edits the
# policy refuses and malformed payloads block the tool (exit 2); a failing stop does not.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
require_core
need python3

WSP=$(pwd -P)
export HOME="$TEST_DIR/home"
mkdir -p "$HOME"
SELF=$BROKERED

py() { "$BRK_PY" -c "$@"; }
# jget FILE EXPR: EXPR over J, the file's JSON
jget() { py 'import json,sys; J=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# ---- integrate: merge, idempotence, backup, check, uninstall ----
mkdir -p .claude
cat >.claude/settings.local.json <<'EOF'
{
  "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
  "model": "opus",
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo mine", "timeout": 5}]}],
    "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}]
  },
  "ratio": 0.1
}
EOF
cp .claude/settings.local.json "$TEST_DIR/orig.json"
out=$(brk integrate claude 2>&1)
is "$?" 0 "integrate claude exits 0"
F=.claude/settings.local.json
is "$(jget $F 'J["permissions"] == {"allow": ["Bash(ls:*)"], "deny": []} and J["model"] == "opus" and J["ratio"] == 0.1')" True \
	"the user's own settings are kept"
is "$(jget $F '[g for g in J["hooks"]["PreToolUse"] if g["hooks"][0]["command"] == "echo mine"][0]["hooks"][0]["timeout"]')" 5 \
	"the user's own PreToolUse hook is kept as it was"
is "$(jget $F 'J["hooks"]["Notification"][0]["hooks"][0]["command"]')" "notify-send hi" "the user's other events are kept"
want_cmd() { printf "'%s' hook %s %s" "$SELF" "$1" "$2"; }
is "$(jget $F '"|".join(g["hooks"][0]["command"] for g in J["hooks"]["UserPromptSubmit"])')" "$(want_cmd claude prompt)" \
	"UserPromptSubmit runs brokered hook claude prompt"
is "$(jget $F '[(g["matcher"], g["hooks"][0]["command"]) for g in J["hooks"]["PreToolUse"] if "brokered" in g["hooks"][0]["command"]]')" \
	"[('Bash', \"$(want_cmd claude bash)\"), ('Write|Edit|MultiEdit|NotebookEdit', \"$(want_cmd claude edit)\")]" \
	"PreToolUse: Bash → bash, Write|Edit|MultiEdit|NotebookEdit → edit"
is "$(jget $F '"|".join(g["hooks"][0]["command"] for g in J["hooks"]["Stop"])')" "$(want_cmd claude stop)" "Stop runs brokered hook claude stop"
bak=$(ls .claude/settings.local.json.brokered-backup-* 2>/dev/null)
ok "$(cmp -s "$bak" "$TEST_DIR/orig.json"; echo $?)" "a backup copy of the original is kept ($bak)"
cp $F "$TEST_DIR/installed.json"
out=$(brk integrate claude 2>&1)
is "$?" 0 "integrate again exits 0"
ok "$(cmp -s $F "$TEST_DIR/installed.json"; echo $?)" "integrate again: the file is unchanged (idempotent)"
is "$(ls .claude/ | grep -c brokered-backup)" 1 "integrate again: no second backup"
brk integrate claude --check >/dev/null
is "$?" 0 "--check: installed (exit 0)"
brk integrate claude --uninstall >/dev/null
is "$?" 0 "--uninstall exits 0"
is "$(py 'import json,sys; print(json.load(open(sys.argv[1])) == json.load(open(sys.argv[2])))' $F "$TEST_DIR/orig.json")" True \
	"--uninstall: exactly brokered's entries removed (the settings equal the original)"
brk integrate claude --check >/dev/null
is "$?" 1 "--check after uninstall: not installed (exit 1)"

# malformed settings: a clear error, the file untouched, no backup
printf '{"hooks": {"Stop": [}\n' >$F
cp $F "$TEST_DIR/bad.json"
rm -f .claude/*.brokered-backup-*
err=$(brk integrate claude 2>&1)
is "$?" 1 "malformed settings: exit 1"
case $err in *settings.local.json:1:*) ok 0 "the error names the file, line and column" ;; *) ok 1 "error names file:line (got: $err)" ;; esac
ok "$(cmp -s $F "$TEST_DIR/bad.json"; echo $?)" "malformed settings: the file is untouched"
is "$(ls .claude | grep -c brokered-backup)" 0 "malformed settings: no backup written"
echo '{"hooks": {"PreToolUse": {"matcher": "Bash"}}}' >$F
brk integrate claude >/dev/null 2>&1
is "$?" 1 "an event that is not an array: refused (exit 1)"
is "$(cat $F)" '{"hooks": {"PreToolUse": {"matcher": "Bash"}}}' "... and the file untouched"
rm -rf .claude
brk integrate claude bogus >/dev/null 2>&1
is "$?" 2 "integrate with an extra operand: usage error (2)"
brk integrate vim >/dev/null 2>&1
is "$?" 2 "integrate an unknown agent: usage error (2)"

# --user, through a symlinked settings file (dotfiles)
mkdir -p "$HOME/.claude" "$TEST_DIR/dotfiles"
echo '{"theme": "dark"}' >"$TEST_DIR/dotfiles/claude.json"
ln -s "$TEST_DIR/dotfiles/claude.json" "$HOME/.claude/settings.json"
brk integrate claude --user >/dev/null
is "$?" 0 "integrate claude --user"
ok "$([ -L "$HOME/.claude/settings.json" ]; echo $?)" "--user: the symlink stays a symlink"
is "$(jget "$TEST_DIR/dotfiles/claude.json" 'J["theme"] + " " + str(len(J["hooks"]))')" "dark 3" \
	"--user: its target got the hooks, the theme kept"
brk integrate claude --user --uninstall >/dev/null
is "$(jget "$TEST_DIR/dotfiles/claude.json" 'J')" "{'theme': 'dark'}" "--user --uninstall: back to the user's file"

# codex and gemini files
brk integrate codex >/dev/null
is "$?" 0 "integrate codex"
is "$(jget .codex/hooks.json 'sorted(J["hooks"])')" "['PreToolUse', 'Stop', 'UserPromptSubmit']" \
	"codex: .codex/hooks.json with UserPromptSubmit, PreToolUse, Stop"
is "$(jget .codex/hooks.json '[g["matcher"] for g in J["hooks"]["PreToolUse"]]')" "['Bash', 'apply_patch|Edit|Write']" \
	"codex: PreToolUse on Bash and apply_patch"
mkdir -p .gemini
echo '{"general": {"vimMode": true}, "hooks": {"enabled": true}}' >.gemini/settings.json
brk integrate gemini >/dev/null
is "$?" 0 "integrate gemini"
is "$(jget .gemini/settings.json 'J["general"]["vimMode"] and J["hooks"]["enabled"]')" True "gemini: other settings kept"
is "$(jget .gemini/settings.json '[(k, [g.get("matcher") for g in J["hooks"][k]]) for k in ("BeforeAgent", "BeforeTool", "AfterAgent")]')" \
	"[('BeforeAgent', [None]), ('BeforeTool', ['run_shell_command', 'write_file|replace']), ('AfterAgent', [None])]" \
	"gemini: BeforeAgent, BeforeTool on run_shell_command and write_file|replace, AfterAgent"
rm -rf .codex .gemini

# ---- the hook handlers with documented payloads ----
hook() { # hook AGENT EVENT JSON: HOUT = stdout, HERR = stderr, HST = status
	printf '%s' "$3" | "$BROKERED" hook "$1" "$2" >"$TEST_DIR/hout" 2>"$TEST_DIR/herr"
	HST=$?
	HOUT=$(cat "$TEST_DIR/hout")
	HERR=$(cat "$TEST_DIR/herr")
}
# run_rewritten JSONPATH: run the rewritten command as the agent would (sh -c, in the workspace)
run_rewritten() {
	local cmd
	cmd=$(printf '%s' "$HOUT" | py 'import json,sys; J=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1")
	(cd "$WSP" && sh -c "$cmd")
}
fresh_tree() {
	rm -rf "$WSP"/* "$XDG_STATE_HOME/brokered"
	mkdir -p "$WSP/src/lib"
	printf 'int main(void) { return 0; }\n' >"$WSP/src/main.c"
	head -c 5000 /dev/urandom >"$WSP/src/lib/blob.bin"
	printf 'alpha\nbeta\n' >"$WSP/notes.txt"
	printf 'old\n' >"$WSP/old.txt"
	touch -d @1500000000 "$WSP/notes.txt" "$WSP/src/main.c"
}
base() { printf '"session_id":"s-1","transcript_path":"%s/t.jsonl","cwd":"%s"' "$TEST_DIR" "$WSP"; }
turns() { brk log --json | py 'import json,sys; T=json.load(sys.stdin); print(len(T), T[0]["state"] if T else "", T[0]["message"] if T else "")'; }

# -- Claude Code --
fresh_tree
snap0=$(tree_snapshot_full "$WSP")
hook claude prompt "{$(base),\"permission_mode\":\"default\",\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":\"tidy the project\"}"
is "$HST" 0 "claude UserPromptSubmit: exit 0"
is "$HOUT" "" "claude UserPromptSubmit: nothing on stdout (it would become context)"
is "$(turns)" "1 open tidy the project" "a turn is open with the prompt as message"
hook claude bash "{$(base),\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"rm -rf src && echo gone\",\"description\":\"remove src\",\"timeout\":120000},\"tool_use_id\":\"toolu_01\"}"
is "$HST" 0 "claude PreToolUse Bash: exit 0"
is "$(printf '%s' "$HOUT" | py 'import json,sys; J=json.load(sys.stdin)["hookSpecificOutput"]; print(J["hookEventName"], J["updatedInput"]["description"], J["updatedInput"]["timeout"], "permissionDecision" in J)')" \
	"PreToolUse remove src 120000 False" "claude: updatedInput keeps the other fields and makes no permission decision"
is "$(printf '%s' "$HOUT" | py 'import json,sys; print(json.load(sys.stdin)["hookSpecificOutput"]["updatedInput"]["command"])')" \
	"'$SELF' run --workspace '$WSP' -c 'rm -rf src && echo gone'" "claude: the command runs under brokered run"
is "$(run_rewritten 'J["hookSpecificOutput"]["updatedInput"]["command"]')" gone "the rewritten command runs (output passes through)"
ok "$([ ! -e "$WSP/src" ]; echo $?)" "... and removed src"
hook claude bash "$(printf '%s' "$HOUT" | py 'import json,sys; print(json.dumps({"tool_name":"Bash","tool_input":json.load(sys.stdin)["hookSpecificOutput"]["updatedInput"],"cwd":sys.argv[1]}))' "$WSP")"
is "$HST/$HOUT" "0/" "a command already brokered is left as it is"
hook claude edit "{$(base),\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Write\",\"tool_input\":{\"file_path\":\"$WSP/notes.txt\",\"content\":\"new\\n\"}}"
is "$HST" 0 "claude PreToolUse Write: exit 0 (backed up)"
echo new >"$WSP/notes.txt"
hook claude edit "{$(base),\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Edit\",\"tool_input\":{\"file_path\":\"$WSP/docs/new.md\",\"old_string\":\"\",\"new_string\":\"x\"}}"
is "$HST" 0 "claude PreToolUse Edit of a new file: exit 0 (its absence recorded)"
mkdir -p "$WSP/docs" && echo x >"$WSP/docs/new.md"
hook claude edit "{$(base),\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"NotebookEdit\",\"tool_input\":{\"notebook_path\":\"$WSP/old.txt\",\"new_source\":\"y\"}}"
is "$HST" 0 "claude PreToolUse NotebookEdit (notebook_path): exit 0"
echo changed >"$WSP/old.txt"
hook claude edit "{$(base),\"tool_name\":\"Write\",\"tool_input\":{\"file_path\":\"$OUTSIDE/evil.txt\",\"content\":\"x\"}}"
is "$HST" 2 "a Write outside the workspace: exit 2 (the agent's tool is blocked)"
case $HERR in *"$OUTSIDE/evil.txt"*"not writable"*) ok 0 "... saying which path and why" ;; *) ok 1 "... saying which path (got: $HERR)" ;; esac
hook claude stop "{$(base),\"permission_mode\":\"default\",\"hook_event_name\":\"Stop\",\"stop_hook_active\":false}"
is "$HST" 0 "claude Stop: exit 0"
is "$(turns)" "1 committed tidy the project" "brokered log: one turn, committed, the prompt as message"
is "$(brk show last --json | py 'import json,sys; print(" ".join(sorted(p["path"].replace(sys.argv[1], "") + ":" + p["operation"] for p in json.load(sys.stdin)["paths"])))' "$WSP")" \
	"/docs:created /notes.txt:modified /old.txt:modified /src/lib/blob.bin:deleted /src/lib:deleted /src/main.c:deleted /src:deleted" \
	"the turn holds the shell command's and the edit tools' paths"
brk undo >/dev/null
is "$?" 0 "brokered undo"
is_snap "$(tree_snapshot_full "$WSP")" "$snap0" "undo: everything back, byte for byte"

# a crashed agent: prompt, a command, no Stop; the next prompt commits the turn left open
hook claude prompt "{$(base),\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":\"first prompt\"}"
first=$(last_turn_id)
hook claude bash "{$(base),\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"echo 1 > one.txt\"}}"
run_rewritten 'J["hookSpecificOutput"]["updatedInput"]["command"]'
hook claude prompt "{$(base),\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":\"second prompt\"}"
is "$HST" 0 "the next prompt after a crash: exit 0"
is "$(printf '%s' "$HOUT" | py 'import json,sys; print(json.load(sys.stdin)["systemMessage"])')" \
	"brokered: turn $first was left open by an interrupted turn; committed it" "... and it tells the user which turn it committed"
is "$(turn_state "$first")" committed "the turn left open is committed"
is "$(brk log --json | py 'import json,sys; print([t["message"] for t in json.load(sys.stdin) if t["id"]==sys.argv[1]][0])' "$first")" \
	"first prompt (interrupted)" "... with its prompt, marked interrupted"
is "$(turns)" "4 open second prompt" "the second prompt's turn is open"
hook claude stop "{$(base),\"hook_event_name\":\"Stop\",\"stop_hook_active\":false}"

# a command of the open turn still runs (the agent did not crash, it backgrounded something):
# the next prompt does not commit the turn under it, it reports it
mkfifo "$TEST_DIR/go"
brk turn begin -m "busy turn" >/dev/null
brk run -c "echo started > started.txt; cat '$TEST_DIR/go'" >/dev/null 2>&1 &
bgrun=$!
for _ in $(seq 600); do [ -e "$WSP/started.txt" ] && break; sleep 0.1; done
busy=$(last_turn_id)
err=$(brk turn begin --commit-open -m next 2>&1)
is "$?" 1 "turn begin --commit-open while a command runs in the open turn: refused (1)"
case $err in *"still runs"*"$busy"*) ok 0 "... naming the turn" ;; *) ok 1 "... naming the turn (got: $err)" ;; esac
hook claude prompt "{$(base),\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":\"third prompt\"}"
is "$HST" 0 "the prompt hook meanwhile: exit 0 (the prompt goes ahead)"
case $HOUT in *systemMessage*"$busy"*"still runs"*) ok 0 "... and tells the user the turn is busy" ;; *) ok 1 "... tells the user (got: $HOUT)" ;; esac
is "$(turn_state "$busy")" open "the busy turn is not committed under the running command"
echo >"$TEST_DIR/go"
wait "$bgrun"
hook claude stop "{$(base),\"hook_event_name\":\"Stop\"}"
is "$(turn_state "$busy")" committed "the Stop commits it once the command is done"

# malformed payloads block the tool; a failing Stop does not keep the agent going
hook claude bash 'not json'
is "$HST" 2 "a malformed PreToolUse payload: exit 2 (blocked)"
hook claude bash "{$(base),\"tool_name\":\"Bash\",\"tool_input\":{}}"
is "$HST" 2 "a Bash payload without a command: exit 2"
hook claude edit "{$(base),\"tool_name\":\"Write\",\"tool_input\":{\"content\":\"x\"}}"
is "$HST" 2 "a Write payload without a path: exit 2"
hook claude stop '[1'
is "$HST" 1 "a malformed Stop payload: exit 1 (reported, not blocking)"
hook claude nonsense '{}'
is "$HST" 2 "an unknown hook event: exit 2"
# the policy refuses an edit: blocked, nothing recorded
mkdir -p "$WSP/.brokered"
echo '{"sandbox": {"fileSafety": {"rules": [{"path": "notes.txt", "access": "write", "decision": "deny"}]}}}' >"$WSP/.brokered/settings.json"
hook claude edit "{$(base),\"tool_name\":\"Edit\",\"tool_input\":{\"file_path\":\"$WSP/notes.txt\"}}"
is "$HST" 2 "an Edit of a path the policy denies: exit 2"
rm -rf "$WSP/.brokered"
hook claude stop "{$(base),\"hook_event_name\":\"Stop\"}"

# -- Codex CLI --
fresh_tree
snap0=$(tree_snapshot_full "$WSP")
hook codex prompt "{$(base),\"turn_id\":\"t1\",\"hook_event_name\":\"UserPromptSubmit\",\"model\":\"gpt\",\"prompt\":\"codex prompt\"}"
is "$HST/$HOUT" "0/" "codex UserPromptSubmit: exit 0, quiet"
hook codex bash "{$(base),\"turn_id\":\"t1\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"rm -rf src\"},\"tool_use_id\":\"c1\"}"
is "$(printf '%s' "$HOUT" | py 'import json,sys; J=json.load(sys.stdin)["hookSpecificOutput"]; print(J["permissionDecision"], J["updatedInput"]["command"].split()[1])')" \
	"allow run" "codex: updatedInput with the allow decision Codex needs to apply it"
run_rewritten 'J["hookSpecificOutput"]["updatedInput"]["command"]'
PATCH='*** Begin Patch\n*** Update File: notes.txt\n@@\n-alpha\n+ALPHA\n*** Add File: added.txt\n+hi\n*** Delete File: old.txt\n*** End Patch'
hook codex edit "{$(base),\"turn_id\":\"t1\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"apply_patch\",\"tool_input\":{\"command\":\"$PATCH\"}}"
is "$HST" 0 "codex apply_patch: exit 0 (the three files it names backed up)"
printf 'ALPHA\nbeta\n' >"$WSP/notes.txt" && echo hi >"$WSP/added.txt" && rm "$WSP/old.txt"
hook codex stop "{$(base),\"turn_id\":\"t1\",\"hook_event_name\":\"Stop\",\"stop_hook_active\":false,\"last_assistant_message\":\"done\"}"
is "$(turns)" "1 committed codex prompt" "codex: one turn, the prompt as message"
brk undo >/dev/null
is_snap "$(tree_snapshot_full "$WSP")" "$snap0" "codex: undo puts the shell command's and apply_patch's files back"

# -- Gemini CLI --
fresh_tree
snap0=$(tree_snapshot_full "$WSP")
hook gemini prompt "{$(base),\"hook_event_name\":\"BeforeAgent\",\"timestamp\":\"2026-12-02T00:00:00Z\",\"prompt\":\"gemini prompt\"}"
is "$HST/$HOUT" "0/" "gemini BeforeAgent: exit 0, quiet"
hook gemini bash "{$(base),\"hook_event_name\":\"BeforeTool\",\"tool_name\":\"run_shell_command\",\"tool_input\":{\"command\":\"rm -rf src\",\"description\":\"rm\"}}"
is "$(printf '%s' "$HOUT" | py 'import json,sys; J=json.load(sys.stdin)["hookSpecificOutput"]; print(J["hookEventName"], list(J["tool_input"]))')" \
	"BeforeTool ['command']" "gemini: hookSpecificOutput.tool_input carries the rewritten command (merged by Gemini)"
run_rewritten 'J["hookSpecificOutput"]["tool_input"]["command"]'
hook gemini edit "{$(base),\"hook_event_name\":\"BeforeTool\",\"tool_name\":\"write_file\",\"tool_input\":{\"file_path\":\"notes.txt\",\"content\":\"w\"}}"
is "$HST" 0 "gemini write_file (a relative path, from cwd): exit 0"
echo w >"$WSP/notes.txt"
hook gemini edit "{$(base),\"hook_event_name\":\"BeforeTool\",\"tool_name\":\"replace\",\"tool_input\":{\"file_path\":\"$WSP/old.txt\",\"old_string\":\"old\",\"new_string\":\"new\"}}"
is "$HST" 0 "gemini replace: exit 0"
echo new >"$WSP/old.txt"
hook gemini stop "{$(base),\"hook_event_name\":\"AfterAgent\",\"prompt\":\"gemini prompt\",\"prompt_response\":\"ok\",\"stop_hook_active\":false}"
is "$(turns)" "1 committed gemini prompt" "gemini: one turn, the prompt as message"
brk undo >/dev/null
is_snap "$(tree_snapshot_full "$WSP")" "$snap0" "gemini: undo puts everything back"
done_testing
