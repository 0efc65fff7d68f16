"""Files a write must always ask about, whatever the rules and the mode (bypassPermissions aside).

Two kinds: files that change what the agent itself will do next — its hooks and settings, instructions
(CLAUDE.md) outside the project, git hooks and config (git runs them), shell start-up files (every shell
runs them), anything in the agent's home except the session's own directory — and files with more than one
hard link, whose other name may be outside the project.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from tools.permissions.path_rules import below, inside, path_forms

# below the user's home: run by every shell, or read by git in every repository
_SHELL_STARTUP = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".mkshrc",
    ".config/fish",
)
_GIT_USER_CONFIG = (".gitconfig", ".config/git")


@dataclass(frozen=True)
class Places:
    """The directories that decide whether a file steers the agent."""

    project_dir: Path
    agent_home: Path
    session_dir: Path | None
    user_home: Path | None


def why_protected(path: Path, places: Places) -> str | None:
    """Why writing ``path`` always needs the user's approval, as a clause, or None."""
    if what := steers_agent(path, places):
        return f"it controls the agent's own behaviour ({what}), so it always needs the user's approval"
    links = hard_links(path)
    if links > 1:
        return (
            f"it has {links} hard links, so changing it changes the same file elsewhere too (perhaps outside "
            "the project); that needs the user's approval"
        )
    return None


def tree_steers_agent(directory: Path, places: Places) -> str | None:
    """What a directory filled with names that can't be told (``tar -x``, ``cp -r``, ``rsync``) may come to
    hold that steers the agent: its own settings or hooks, or, for the project or the home directory (or
    a directory above them), ``.claude``, ``.git`` and shell start-up files inside them."""
    children = ["settings.json", "hooks/x", "config", "CLAUDE.md"]
    roots = [r for r in (places.project_dir, places.user_home) if r is not None]
    if any(below(root, form) is not None for root in roots for form in path_forms(directory)):
        children += [".claude/settings.json", ".claude/hooks/x", ".git/hooks/x", ".git/config", ".bashrc"]
    for child in children:
        if what := steers_agent(directory / child, places):
            return what
    return None


def steers_agent(path: Path, places: Places) -> str | None:
    """What ``path`` is when changing it changes what the agent will do, or None."""
    for form in path_forms(path):
        parts = form.parts
        for i, part in enumerate(parts[:-1]):
            rest = parts[i + 1 :]
            if part == ".claude" and (
                rest[0] == "hooks" or rest in (("settings.json",), ("settings.local.json",))
            ):
                return "hooks/settings"
            if part == ".claude" and rest[0] == "commands" and len(rest) > 1:
                return "custom commands: prompts with allowed-tools"
            if part == ".git" and ("hooks" in rest[:-1] or rest[-1] in ("config", "config.worktree")):
                return "git hooks/config"  # also .git/worktrees/<name>/config
        if form.name in ("CLAUDE.md", "CLAUDE.local.md") and not inside(form, [places.project_dir]):
            return "instructions: a CLAUDE.md outside the project"
        if places.user_home is not None and (home_part := below(form, places.user_home)) is not None:
            if _under_any(home_part, _SHELL_STARTUP):
                return "shell start-up files"
            if _under_any(home_part, _GIT_USER_CONFIG):
                return "git hooks/config"
        own = places.session_dir is not None and below(form, places.session_dir) is not None
        if not own and below(form, places.agent_home) is not None:
            return "hooks/settings: the agent's home"
    return None


def hard_links(path: Path) -> int:
    """How many names an existing regular file has (0 when it doesn't exist or isn't one)."""
    try:
        st = os.stat(path)
    except OSError:
        return 0
    return st.st_nlink if stat.S_ISREG(st.st_mode) else 0


def _under_any(relative: Path, names: tuple[str, ...]) -> bool:
    text = relative.as_posix()
    return any(text == name or text.startswith(name + "/") for name in names)
