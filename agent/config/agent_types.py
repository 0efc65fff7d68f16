"""The agent types a Task call may name: the two built in, and custom agents from Markdown files.

Custom agents are Claude Code's files: ``.claude/agents/*.md`` in the project (its root) and ``~/.claude/agents/*.md``
(and ``H/agents/*.md``) for the user, each with a front matter block::

    ---
    name: reviewer
    description: Reviews a diff for bugs
    tools: Read, Grep, Glob        # optional: a list (agent.config.frontmatter); omitted = every tool but Task
    model: haiku                   # optional: sonnet / opus / haiku / inherit, or a full model id
    ---
    The body is the agent's system prompt.

A project's own agents follow the trust rules of its settings files (agent/config/trust.py): until the user
trusts the project they are not offered, since their prompts would act with the user's permissions; each
one left out is listed in ``skipped``. A project agent replaces a user agent of the same name, and a
custom one may not take a built-in name. A file that can't be read or lacks a name is skipped with a
warning, never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agent.config import frontmatter
from agent.config.project import FileProblem, read_inside
from agent.config.trust import Ignored

GENERAL = "general-purpose"
EXPLORE = "Explore"
# the short names Claude Code's agent files use for a model
MODEL_ALIASES = {"sonnet": "claude-sonnet-4-5", "opus": "claude-opus-4-1", "haiku": "claude-haiku-4-5"}

GENERAL_PROMPT = """You are a subagent of Compact Agent, a coding assistant. The main agent handed you one task; \
do it with the tools you have and then answer.

- You see only the task below, not the main conversation: work from what it says.
- Search and read before concluding; report facts you found, with file paths (and line numbers where they \
help).
- Your final message is your report to the main agent, not to the user. Make it complete and compact: \
what was asked, what you found or changed, and anything left open. Do not paste whole files unless the \
task asks for them."""

EXPLORE_PROMPT = """You are an exploration subagent of Compact Agent, a coding assistant. You search and read \
a codebase to answer the main agent's question; you never change anything.

- You may use Read, Grep, Glob, and Bash for commands that only look (ls, find, git log, ...). Anything that \
writes is refused.
- You see only the question below, not the main conversation.
- Be efficient: Grep and Glob to find candidates, Read what matters.
- Your final message is your report to the main agent: the answer first, then the evidence (paths, line \
numbers, short excerpts). Do not paste whole files unless asked."""


@dataclass(frozen=True)
class AgentDef:
    name: str
    description: str
    prompt: str
    tools: tuple[str, ...] | None = None  # None: every tool the main agent has (but Task)
    model: str | None = None  # None: the main agent's model
    source: str = "built-in"  # the file it came from
    # only the tools whose declaration reads or touches nothing, and Bash under the read-only rules
    # (tools.shell.readonly)
    read_only: bool = False

    @property
    def tools_text(self) -> str:
        if self.read_only:
            return "Read, Grep, Glob, Bash (read-only)"
        return ", ".join(self.tools) if self.tools is not None else "All tools"


BUILT_IN = (
    AgentDef(
        GENERAL,
        "General-purpose agent for multi-step tasks: researching questions, searching code, making changes",
        GENERAL_PROMPT,
    ),
    AgentDef(
        EXPLORE,
        "Fast read-only agent for exploring a codebase: finding files, searching code, answering questions "
        "about how it works",
        EXPLORE_PROMPT,
        read_only=True,
    ),
)


@dataclass
class Agents:
    """The agent types of a session, and what was left out (untrusted, malformed) and why."""

    types: list[AgentDef]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # untrusted project agents: (name, file)
    warnings: list[str] = field(default_factory=list)

    def get(self, name: str) -> AgentDef | None:
        return next((a for a in self.types if a.name == name), None)


def load_agents(root: Path, home: Path, user_home: Path | None, *, trusted: bool) -> Agents:
    """The agent types for a project whose root (agent.config.project) is ``root``."""
    out = Agents(list(BUILT_IN))
    user_dirs = [d for d in ((user_home / ".claude" / "agents") if user_home else None, home / "agents") if d]
    found: dict[str, AgentDef] = {}
    for directory in user_dirs:
        for agent in _read_dir(directory, out.warnings, None):
            found[agent.name] = agent
    for agent in _read_dir(root / ".claude" / "agents", out.warnings, root):
        if trusted:
            found[agent.name] = agent
        else:
            out.skipped.append((agent.name, agent.source))
    for name, agent in found.items():
        if name in (GENERAL, EXPLORE):
            out.warnings.append(f"{agent.source}: an agent may not be named {name} (a built-in); skipped")
            continue
        out.types.append(agent)
    return out


def withheld_agents(root: Path) -> list[Ignored]:
    """The project's agents an untrusted project does not get, for the trust dialog and print mode's line."""
    found = _read_dir(root / ".claude" / "agents", [], root)
    return [Ignored("agent", f"agent {a.name}: {_one_line(a.description)}", a.source) for a in found]


def _one_line(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _read_dir(directory: Path, warnings: list[str], root: Path | None) -> list[AgentDef]:
    """The agents of one directory; ``root``: a project's, whose files may not resolve outside it."""
    if not directory.is_dir():
        return []
    agents = []
    for path in sorted(directory.glob("*.md")):
        try:
            text = read_inside(path, root)
            if text is not None:
                agents.append(parse_agent(text, str(path)))
        except (FileProblem, ValueError) as e:
            warnings.append(f"{path}: {e}; agent skipped")
    return agents


def parse_agent(text: str, source: str) -> AgentDef:
    """One agent file (front matter + body); ValueError says what is wrong with it."""
    doc = frontmatter.parse(text)
    name = doc.text("name").strip()
    if not name:
        raise ValueError("its front matter has no name")
    model = doc.text("model").strip() or None
    if model == "inherit":
        model = None
    return AgentDef(
        name=name,
        description=doc.text("description").strip() or name,
        prompt=doc.body.strip(),
        tools=tuple(doc.items("tools")) if doc.meta.get("tools") else None,
        model=MODEL_ALIASES.get(model, model) if model else None,
        source=source,
    )
