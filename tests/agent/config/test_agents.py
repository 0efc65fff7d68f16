"""Agent types (agent/config/agent_types.py), the read-only Bash rules (tools/shell/readonly.py), the Task tool's checks
(tools/task.py) and the ledger's delegated tasks (compact/compaction/ledger.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config.agent_types import EXPLORE, GENERAL, load_agents, parse_agent, withheld_agents
from agent.config.settings import load_settings
from agent.config.trust import dialog_lines
from compact.compaction import ledger
from core.messages import assistant, tool_result_block, tool_results
from tools.base import ToolContext, ToolError
from tools.shell.readonly import refusal
from tools.task import AgentType, TaskTool

AGENT = (
    "---\nname: {name}\ndescription: Reviews code\ntools: [Read, Grep]\nmodel: {model}\n---\nBODY of {name}\n"
)


def write_agent(directory: Path, name: str, model: str = "sonnet") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.md"
    path.write_text(AGENT.format(name=name, model=model))
    return path


def test_an_agent_file_gives_name_description_tools_model_and_prompt() -> None:
    agent = parse_agent(AGENT.format(name="reviewer", model="haiku"), "x.md")
    assert (agent.name, agent.description, agent.tools) == ("reviewer", "Reviews code", ("Read", "Grep"))
    assert agent.model == "claude-haiku-4-5" and agent.prompt == "BODY of reviewer"
    assert parse_agent("---\nname: a\ntools: Read, Bash\nmodel: inherit\n---\n", "y").tools == (
        "Read",
        "Bash",
    )
    assert parse_agent("---\nname: a\nmodel: inherit\n---\n", "y").model is None
    with pytest.raises(ValueError, match="no name"):
        parse_agent("---\ndescription: nameless\n---\nbody", "z.md")


def test_user_and_project_agents_and_the_trust_rules(tmp_path: Path) -> None:
    root, home, user = tmp_path / "project", tmp_path / "home", tmp_path / "user"
    write_agent(user / ".claude" / "agents", "mine")
    write_agent(home / "agents", "ours")
    project_file = write_agent(root / ".claude" / "agents", "theirs")
    write_agent(root / ".claude" / "agents", "Explore")  # may not take a built-in name
    (root / ".claude" / "agents" / "broken.md").write_text("no front matter here")
    trusted = load_agents(root, home, user, trusted=True)
    assert [a.name for a in trusted.types] == [GENERAL, EXPLORE, "mine", "ours", "theirs"]
    assert any("broken.md" in w for w in trusted.warnings) and any("built-in" in w for w in trusted.warnings)
    untrusted = load_agents(root, home, user, trusted=False)
    assert [a.name for a in untrusted.types] == [GENERAL, EXPLORE, "mine", "ours"]
    assert ("theirs", str(project_file)) in untrusted.skipped
    # the trust dialog and print mode's line name them (agent.config.settings adds them to LoadReport.ignored)
    withheld = withheld_agents(root)
    assert [i.what for i in withheld] == ["agent Explore: Reviews code", "agent theirs: Reviews code"]
    assert "Offer these subagents" in "\n".join(dialog_lines(withheld))
    s = load_settings(cwd=root, environ={"HOME": str(user)}, cli={})
    assert [i.what for i in s.report.ignored if i.kind == "agent"] == [i.what for i in withheld]


def test_a_project_agent_file_that_resolves_outside_the_project_is_not_read(tmp_path: Path) -> None:
    """Like instruction files and custom commands: even in a trusted project, an agent file linking out of
    it (a secret, /proc/self/environ) is never read into a subagent's system prompt; the user's own may."""
    root, home, outside = tmp_path / "project", tmp_path / "home", tmp_path / "outside"
    secret = write_agent(outside, "secret")  # a valid agent file, so only the link decides
    (root / ".claude" / "agents").mkdir(parents=True)
    (root / ".claude" / "agents" / "linked.md").symlink_to(secret)
    (home / "agents").mkdir(parents=True)
    (home / "agents" / "mine.md").symlink_to(secret)
    agents = load_agents(root, home, None, trusted=True)
    assert [a.name for a in agents.types] == [GENERAL, EXPLORE, "secret"]  # the user's own link only
    assert [a.source for a in agents.types][-1] == str(home / "agents" / "mine.md")
    [warning] = agents.warnings
    assert "linked.md: it resolves outside the project" in warning and str(secret) in warning
    assert withheld_agents(root) == []


@pytest.mark.parametrize(
    "command",
    [
        "ls -la src",
        "grep -rn foo . | head -5",
        "git log --oneline -5",
        "find . -name '*.py' | wc -l",
        "cat a 2>/dev/null",
        "sort -t, -k2,2 -n data.csv | uniq -c",
        "uniq -d sorted.txt",
        "file -b --mime-type src/a.py",
        "git reflog -5",
        "git reflog show HEAD@{2}",
        "date +%F",
        "tree -L 2 src",
        "sed -n '1,20p' README.md",
    ],
)
def test_looking_commands_are_read_only(command: str, tmp_path: Path) -> None:
    assert refusal(command, tmp_path) is None


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("rm -rf build", "rm is not on the read-only list"),
        ("echo hi > out.txt", "writes to out.txt"),
        ("find . -delete", "find -delete"),
        ("sed -i s/a/b/ f", "writes to f"),  # the shell reader knows sed -i writes its file
        ("git commit -m x", "git commit"),
        ("$CMD", "can't be determined"),
        # issue 30: read-only is proven by an allow list of forms, not by spotting write options
        ("sort --outp=x f", "--outp is not one of its read-only options"),  # an abbreviation of --output
        ("sort -ox f", "writes to x"),
        ("sort --compress-program=gzip f", "can't be determined"),
        ("sort --random-source=f --files0-from=g --bogus f", "--bogus"),
        ("uniq in out", "writes to out"),
        ("uniq -c -f1 in out", "writes to out"),
        ("file -C", "writes to magic.mgc"),
        ("file -bC -m x", "writes to magic.mgc"),
        ("file --compile -m x", "writes to magic.mgc"),
        ("git reflog expire --expire=now --all", "git reflog expire changes the reflog"),
        ("git reflog delete HEAD@{1}", "git reflog delete"),
        ("git -C . reflog drop", "git reflog drop"),
        ("git -c core.fsmonitor='touch x' status", "sets git configuration"),
        ("git diff --ext-diff", "--ext-diff runs a configured program"),
        ("git log -p --textconv", "--textconv"),
        ("git show --output=x HEAD", "writes to x"),
        ("git log --ext HEAD", "may abbreviate"),
        ("git grep -Ovim x", "-Ovim"),
        ("tree -o listing.txt", "writes to listing.txt"),
        ("tree -R -H . src", "tree -R writes files"),
        ("date -s 2020-01-01", "date -s"),
        ("date --set=2020-01-01", "date --set"),
        ("sed --in-pl s/a/b/ f", "writes to f"),
        ("sed -n 'w out' f", "writes to out"),
        ("sed --posix --follow-symlinks -n p f", "--follow-symlinks"),
        ("find . -fprint out", "find -fprint"),
        ("rg --pre ./x.sh foo", "--pre"),
        ("mytool --list", "not a program known here"),
        ("LESSOPEN='|rm %s' cat f", "sets LESSOPEN"),
    ],
)
def test_commands_that_change_things_are_refused(command: str, why: str, tmp_path: Path) -> None:
    reason = refusal(command, tmp_path)
    assert reason is not None and why in reason


def test_the_task_tool_names_the_agent_types_and_refuses_unknown_or_withheld_ones(tmp_path: Path) -> None:
    tool = TaskTool(
        [AgentType("Explore", "reads", "Read")], withheld={"theirs": "/p/.claude/agents/theirs.md"}
    )
    assert "- Explore: reads (Tools: Read)" in tool.description
    assert tool.input_schema["required"] == ["description", "prompt", "subagent_type"]
    ctx = ToolContext(project_dir=tmp_path, session_dir=tmp_path, cwd=tmp_path)
    with pytest.raises(ToolError, match="Available: Explore"):
        tool.check({"description": "d", "prompt": "p", "subagent_type": "nope"}, ctx)
    with pytest.raises(ToolError, match="not trusted"):
        tool.check({"description": "d", "prompt": "p", "subagent_type": "theirs"}, ctx)
    with pytest.raises(ToolError, match="not available"):  # no service: a subagent's context
        tool.run({"description": "d", "prompt": "p", "subagent_type": "Explore"}, ctx)


def test_the_ledger_lists_delegated_tasks_and_keeps_them_across_a_snapshot() -> None:
    use = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "Task",
        "input": {"description": "Find", "prompt": "p", "subagent_type": "Explore"},
    }
    facts = {
        "agentId": "a1b2c3d",
        "status": "interrupted",
        "description": "Find",
        "subagentType": "Explore",
        "sidechain": "/s/agent-a1b2c3d.jsonl",
    }
    result = tool_results([tool_result_block("toolu_1", "Interrupted", True)]).replace(
        extra={ledger.FACTS_KEY: {"toolu_1": facts}}
    )
    state = ledger.derive([assistant([use]), result], "/p")
    assert state.tasks == {
        "a1b2c3d": {
            "description": "Find",
            "subagentType": "Explore",
            "status": "interrupted",
            "sidechain": "/s/agent-a1b2c3d.jsonl",
            "answer": "Interrupted",  # the task's result text joins the ledger (issue 33)
        }
    }
    assert "- a1b2c3d [interrupted] Find (Explore) → /s/agent-a1b2c3d.jsonl" in ledger.render(state)
    assert ledger.Ledger.from_dict(state.to_dict()).tasks == state.tasks
