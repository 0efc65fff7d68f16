"""The words of session memory: the notes template and the instruction of a notes-update request.

Kept apart from the mechanics (compact.session_memory) so the prompts can be read, and changed, in one
place. The ten section names are docs/compaction.md's; every sentence here is our own.
"""

from __future__ import annotations

from compact.decision.thresholds import window_scale

SECTIONS: tuple[tuple[str, str], ...] = (
    ("Session Title", "A short, specific name for this session: five to ten words, no filler."),
    (
        "Current State",
        "What is being done right now, what is finished, what is still open, and the very next step.",
    ),
    (
        "Task specification",
        "What the user asked for, in their terms: goals, requirements, constraints and "
        "design decisions taken along the way.",
    ),
    (
        "Files and Functions",
        "The files, functions and classes that matter, with full paths, and one line "
        "each on why they matter.",
    ),
    (
        "Workflow",
        "Commands that build, test, lint or run the project, in the order they are used, and how "
        "to read their output.",
    ),
    (
        "Errors & Corrections",
        "Errors met and how they were fixed, corrections the user made, and approaches "
        "that failed and should not be tried again.",
    ),
    (
        "Codebase and System Documentation",
        "How the pieces fit together: components, their jobs, data flow, conventions worth following.",
    ),
    (
        "Learnings",
        "What worked, what did not, what to avoid; surprises about the code, the tools or the "
        "user's preferences.",
    ),
    ("Key results", "Exact results the user asked for (answers, numbers, tables, output), copied in full."),
    ("Worklog", "One terse line per step taken, oldest first."),
)

TEMPLATE = "\n".join(f"# {name}\n_{guide}_\n" for name, guide in SECTIONS)

# An update's size rules (docs/compaction.md): the model is told, and told which sections to condense when over.
# At the reference window; smaller windows give (and trim to) less, never below MIN_SECTION_TOKENS.
SECTION_TOKENS = 2_000
NOTES_TOKENS = 12_000
MIN_SECTION_TOKENS = 250


def section_tokens(threshold: int | None = None) -> int:
    """The size each section is promised to fit (the update instruction says it; a notes compaction
    trims to it, compact.compaction.notes.trim_sections): SECTION_TOKENS at the reference window, scaled down
    with T."""
    if threshold is None:
        return SECTION_TOKENS
    return max(MIN_SECTION_TOKENS, int(SECTION_TOKENS * window_scale(threshold)))


def update_instruction(
    path: str, notes: str, oversized: list[str], total_tokens: int, section: int = SECTION_TOKENS
) -> str:
    """The final user message of a notes-update request; ``section``: the tokens each section may take
    (``section_tokens``), the size a notes compaction trims to, keeping the newest lines."""
    total = min(NOTES_TOKENS, section * len(SECTIONS))
    return f"""\
This message comes from the agent, not from the user. Set the task aside for one reply: your only job \
now is to bring the session notes up to date, so the work could continue from them alone if the \
conversation above were lost.

Notes file: {path}

Its current content:
<current-notes>
{notes}
</current-notes>

Add what the conversation above holds that the notes do not, and correct what has changed. Rules:
- The only tool you may use is Edit, and only with file_path {path}. Calls to any other tool, or on any \
other file, are refused. Make all your Edit calls in this one reply, then stop; do not go on with the task.
- Every line starting with "# " and the italic line under it stay exactly as they are. Write below the \
italic line; each of those lines is unique, so it makes a good old_string anchor.
- Write dense facts, not prose: full file paths, function and class names, exact commands, error \
messages and what fixed them, decisions and why they were taken. Leave out anything that can be \
re-derived cheaply.
- Rewrite "Current State" every time so it describes this moment and the next step, not the past.
- Keep each section under about {section:,} tokens and the whole file under about \
{total:,}: condense older detail instead of appending forever. A section over its size is cut from \
the top when the notes replace the conversation: its newest lines stay.
- If nothing new is worth recording, reply with a short sentence and no tool call.
{_size_warning(oversized, total_tokens, section, total)}"""


def _size_warning(
    oversized: list[str], total_tokens: int, section: int = SECTION_TOKENS, total: int = NOTES_TOKENS
) -> str:
    lines = []
    if total_tokens > total:
        lines.append(
            f"The notes are about {total_tokens:,} tokens now, over the {total:,} limit: "
            "shorten them in this update."
        )
    if oversized:
        names = ", ".join(f'"{name}"' for name in oversized)
        lines.append(f"Condense these sections, each over about {section:,} tokens: {names}.")
    return "\n".join(lines)
