#!/usr/bin/env bash
# PostCompact hook: append one line per compaction to .claude/compactions.log in the project.
# Input (stdin, JSON): session_id, transcript_path, cwd, hook_event_name, trigger, compact_summary.
set -u
input=$(cat)

field() {  # field NAME: a top-level value of the JSON input, with python3 or jq if present
    if command -v python3 >/dev/null 2>&1; then
        printf '%s' "$input" | python3 -c 'import json,sys; v=json.load(sys.stdin).get(sys.argv[1]); print("" if v is None else v, end="")' "$1" 2>/dev/null
    elif command -v jq >/dev/null 2>&1; then
        printf '%s' "$input" | jq -j --arg k "$1" '.[$k] // ""' 2>/dev/null
    fi
}

trigger=$(field trigger)
session=$(field session_id)
summary_chars=$(field compact_summary | wc -c | tr -d ' ')

log_dir="${CLAUDE_PROJECT_DIR:-.}/.claude"
mkdir -p "$log_dir" 2>/dev/null || exit 0
printf '%s trigger=%s session=%s summary_chars=%s\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${trigger:-?}" "${session:-?}" "${summary_chars:-0}" \
    >>"$log_dir/compactions.log"
exit 0
