#!/usr/bin/env bash
# SessionStart hook (matcher "compact"): what this prints reaches the model right after a compaction.
# Input (stdin, JSON): session_id, transcript_path, cwd, hook_event_name, source.
set -u
cat >/dev/null

cd "${CLAUDE_PROJECT_DIR:-.}" 2>/dev/null || exit 0
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit 0

branch=$(git branch --show-current 2>/dev/null)
echo "Reminder after the compaction: you are on git branch ${branch:-(detached HEAD)}."
changed=$(git status --short 2>/dev/null)
if [ -n "$changed" ]; then
    echo "Uncommitted changes (git status --short):"
    echo "$changed"
else
    echo "The working tree is clean."
fi
exit 0
