#!/usr/bin/env bash
# PreCompact hook: whatever this prints is added to the summary instructions.
# Input (stdin, JSON): session_id, transcript_path, cwd, hook_event_name, trigger, custom_instructions.
set -u
cat >/dev/null  # the input is not needed here; read it so the agent's write never blocks

cat <<'TEXT'
In "Files and Code Sections", list every file that was created, modified or deleted in this session,
one per line with its full path and a few words on what changed, even if it was only touched once.
Under "Pending Tasks", note any test that was failing the last time it ran, with the command used.
TEXT

# Files git already sees as changed are a reliable list: hand it to the summary as well.
cd "${CLAUDE_PROJECT_DIR:-.}" 2>/dev/null || exit 0
if changed=$(git status --short 2>/dev/null) && [ -n "$changed" ]; then
    printf '\nFiles with uncommitted changes right now (git status --short):\n%s\n' "$changed"
fi
exit 0
