"""What a tool is, declared once on the tool: what it touches, which argument names its path, how it is
shown, whether its old results may be cleared and past what size one goes to disk, what the working-state
ledger records of it, and whether a file it touched is re-read after a compaction.

Every table that used to name tools reads this instead: the permission engine (tools/permissions), the
tool runner and the UI (agent/), the view's stages and the compaction (compact/). A tool the engine
finds no declaration for **asks** (and is refused in print mode): an unknown tool is never taken to be
harmless.

Built-in tools carry ``declaration`` as a class attribute and are declared when the registry loads
(tools/registry.py); an MCP tool is declared when its server's listing arrives (agent/mcp/tools.py).
Claude Code's own tools that this agent does not implement (``MultiEdit``, ``WebFetch`` ...) are
declared below, since a resumed Claude Code transcript holds their calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# nothing: only the conversation (a todo list, a snip); reads: files, never changes them;
# writes: files; runs: programs, or anything outside the agent's sight (a server's tool)
Touches = Literal["nothing", "reads", "writes", "runs"]
# what the working-state ledger makes of a call: a file changed, a file read, a search, the todo list,
# a subagent's answer, a command and its exit code, an outcome line, or nothing (context housekeeping)
Records = Literal["edit", "read", "search", "todo", "answer", "command", "outcome", "nothing"]


@dataclass(frozen=True)
class Declaration:
    touches: Touches
    # the argument naming the path it touches (Grep, Glob, LS: the root searched); a rule with a path
    # specifier ("Read(~/.ssh/**)") applies to a tool only through it
    path_arg: str | None = None
    # the argument shown beside the tool's name on screen
    key_arg: str | None = None
    # its one-line summary ("Read 120 lines") says more than its output
    show_summary: bool = False
    # its old results may be cleared (microcompact, a compaction's kept tail, the server's clearing)
    clearable: bool = False
    # a result longer than this many characters goes to disk with a preview (the tool-result budget)
    result_limit: float = 50_000
    records: Records = "outcome"
    # a file it read or wrote may be re-read from disk after a compaction
    restorable: bool = False
    # it may run beside the calls next to it (no file written, no shared state)
    parallel: bool = False

    @property
    def reads_files(self) -> bool:
        return self.touches == "reads" and self.path_arg is not None

    @property
    def writes_files(self) -> bool:
        return self.touches == "writes" and self.path_arg is not None

    @property
    def changes_things(self) -> bool:
        """Plan mode refuses it: it writes files or runs programs."""
        return self.touches in ("writes", "runs")


_DECLARED: dict[str, Declaration] = {}


def declare(name: str, declaration: Declaration) -> None:
    """Make ``name``'s declaration known (a later declaration of the same name replaces it)."""
    _DECLARED[name] = declaration


def declaration_of(name: str) -> Declaration | None:
    """The declaration of the tool called ``name``; None for a tool nobody declared."""
    return _DECLARED.get(name)


def declared(predicate: str) -> frozenset[str]:
    """The names of the declared tools for which the declaration's attribute ``predicate`` is true."""
    return frozenset(n for n, d in _DECLARED.items() if getattr(d, predicate))


# Claude Code's tools this agent does not implement: a resumed Claude Code transcript calls them
for _name, _decl in {
    "MultiEdit": Declaration("writes", "file_path", "file_path", True, True, records="edit", restorable=True),
    "NotebookEdit": Declaration("writes", "notebook_path", "notebook_path", True, True, records="edit"),
    "WebFetch": Declaration("runs", key_arg="url", clearable=True),
    "WebSearch": Declaration("runs", key_arg="query", clearable=True),
}.items():
    declare(_name, _decl)
