"""Running the tool calls of one assistant message: permission, hooks, execution, results in order.

Each call is asked about (when it needs a question) just before it runs, in order, so the screen shows
each call once: its header, its question, its result. Consecutive read-only calls allowed without a
question run concurrently. A call that would fail anyway (an Edit of a file not read, an old_string
not found) fails before its question is asked. A "no" ends the turn: the calls after it are neither
asked nor run, and ``Declined`` tells the loop to wait for the user. Every call gets exactly one
tool_result, so the conversation stays valid even when the user interrupts half-way or says no (calls
not run are answered with an error saying so).

A call whose input was not valid JSON (agent.runtime.sdk keeps it under ``INVALID_INPUT``) is answered with an
error asking for it again, and nothing runs. Two things happen before anything is decided: a relative
``file_path``/``path`` is made absolute against the working directory Bash has left the tools in, so the
permission check, the hooks and the tool all judge the same file; and after a tool runs, the API key is redacted from its output, so a dotfile or an
``env`` listing can be shown to the model and recorded without the key ever reaching the transcript.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable, TypeVar

from agent.runtime import checkpoints
from agent.runtime.sdk import INVALID_INPUT
from agent.runtime.session import Session
from compact.compaction import ledger, restore
from core.boundary import guarded
from core.declaration import declaration_of
from core.errors import Interrupted
from core.events import CallsInParallel, PermissionDenied, TodosChanged, ToolFinished, ToolStarted
from core.messages import Message, meta, tool_result_block, tool_results
from core.private import redact, secrets_of
from tools.base import Tool, ToolResult
from tools.runner import precheck, run_tool

INTERRUPTED = (
    "Interrupted by user: the tool call was stopped before it finished. Wait for the user's next message."
)
NOT_RUN = "Interrupted by user: this tool call was not run."
INTERRUPT_MARKER = "[Request interrupted by user]"
DECLINED = (
    "The user said no to this tool call, so it was not run and nothing changed. Stop here: do not "
    "retry it or try another way; wait for the user's next message."
)
NOT_RUN_DECLINED = "Not run: the user said no to an earlier tool call of this message."
# why a call was not run, as PermissionDenied says it: the REPL shows every other reason on a line of its
# own; these two it has shown already (the answer under the question, the interruption at the turn's end)
USER_SAID_NO = "the user said no"
NOBODY_TO_ASK = "and nobody can give it"
_T = TypeVar("_T")


class Declined(Exception):
    """The user answered "no": the turn ends once every call of the message has its result."""


_call = threading.local()  # the id of the call a tool thread is running (a Task names its subagent by it)


def current_call_id() -> str | None:
    return getattr(_call, "id", None)


class HookStopped(Exception):
    """A PreToolUse or PostToolUse hook answered ``{"continue": false}``: as with a "no", the turn ends once
    every call has its result. The message is the hook's ``stopReason``, for the user (not the model)."""


STOPPED = "Not run: a hook ended the turn. Wait for the user's next message."
# calls of one response running at once (readers, Task): the pool never holds more
MAX_PARALLEL = 4


def run_tools(session: Session, uses: list[dict[str, Any]]) -> Message:
    uses = [_with_absolute_path(session, use) for use in uses]
    stops: list[str] = []  # a hook's {"continue": false}: nothing more is asked or run
    results = _run_in_order(session, uses, stops)
    blocks = [tool_result_block(u["id"], r.content, r.is_error) for u, r in zip(uses, results)]  # type: ignore[union-attr]
    message = tool_results(blocks)
    facts = {u["id"]: r.facts for u, r in zip(uses, results) if r is not None and r.facts}
    if (
        facts
    ):  # the ledger's record of what the calls did (compact.compaction.ledger); never sent to the model
        message = message.replace(extra={ledger.FACTS_KEY: facts})
    if session.cancel.is_set():
        session.add(message)
        raise Interrupted("interrupted")
    if any(r is not None and r.content == DECLINED for r in results):
        session.add(message)
        raise Declined()
    if stops:
        session.add(message)
        raise HookStopped(stops[0])
    return message


def _run_in_order(session: Session, uses: list[dict[str, Any]], stops: list[str]) -> list[ToolResult | None]:
    """Each call checked, asked about and run in order; consecutive calls allowed without a question
    that may run side by side (readers, Task) run together. After a "no" or a hook's stop nothing more is
    asked or run (the calls before a PreToolUse stop have run)."""
    results: list[ToolResult | None] = [None] * len(uses)
    group: list[int] = []  # waiting to run side by side

    def run_group() -> None:
        if len(group) > 1:
            session.emit(CallsInParallel(tuple(str(uses[k]["id"]) for k in group)))
            with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(group))) as pool:
                for k, res in zip(
                    list(group), pool.map(lambda k: _execute_guarded(session, uses[k], stops), group)
                ):
                    results[k] = res
        elif group:
            results[group[0]] = _execute_guarded(session, uses[group[0]], stops)
        group.clear()

    for i, use in enumerate(uses):
        declined = any(r is not None and r.content == DECLINED for r in results)
        if declined or stops:
            run_group()
            results[i] = ToolResult(NOT_RUN_DECLINED if declined else STOPPED, is_error=True)
            continue
        parallel = _read_only(session, use)
        if not parallel:
            run_group()
        asked: list[bool] = []
        verdict = _guarded(_permit, "checking", session, use, _touched(uses[:i]), stops, run_group, asked)
        if isinstance(verdict, ToolResult):
            results[i] = verdict
            continue
        group.append(i)
        if not parallel or asked:  # a call asked about runs right under its question
            run_group()
    run_group()
    return results


def _guarded(
    step: Callable[..., _T], doing: str, session: Session, use: dict[str, Any], *rest: Any
) -> _T | ToolResult:
    """``step(session, use, *rest)``, or, when it fails in any way, the error result that answers the call.

    Whatever goes wrong while a call is checked or run (a command nested past the parser's
    depth, a NUL byte in a path, a rule or a hook setting that can't be used) ends that call, never the
    turn: every tool_use still gets its tool_result, so the conversation stays valid. Only the user's
    interrupt and "no" leave through here, as they are meant to.
    """

    def call() -> _T | ToolResult:
        return step(session, use, *rest)

    def failed(exc: Exception) -> _T | ToolResult:
        return _failure(use, doing, exc)

    return guarded(call, failed)


def _execute_guarded(session: Session, use: dict[str, Any], stops: list[str]) -> ToolResult:
    """As ``_guarded``; the front end is told the call ended."""

    def failed(exc: Exception) -> ToolResult:
        result = _failure(use, "running", exc)
        session.emit(ToolFinished(use["id"], use.get("name", "?"), result.content, True, result.summary))
        return result

    return guarded(lambda: _execute(session, use, stops), failed)


def _failure(use: dict[str, Any], doing: str, exc: Exception) -> ToolResult:
    """The error result that answers a call which failed; the user's interrupt and "no" are raised on."""
    if isinstance(exc, (Interrupted, Declined)):
        raise exc
    detail = " ".join(str(exc).split())[:300]
    what = type(exc).__name__ + (f": {detail}" if detail else "")
    return ToolResult(
        f"The {use.get('name', '?')} call failed while {doing} it ({what}), so it did not run (or did not "
        "finish). Try it another way, or tell the user what went wrong.",
        is_error=True,
        summary=f"failed while {doing} it",
    )


def _with_absolute_path(session: Session, use: dict[str, Any]) -> dict[str, Any]:
    """The call with its path argument made absolute where the tool would resolve it (the Bash cwd).

    A path that can't be resolved (a NUL byte in it) is left as written: the check and the tool then
    fail on it, and that becomes the call's error result."""
    decl = declaration_of(str(use.get("name", "")))
    key, args = (decl.path_arg if decl is not None else None), use.get("input")
    if key is None or not isinstance(args, dict) or not isinstance(args.get(key), str) or not args[key]:
        return use
    try:
        resolved = str(session.tool_ctx.resolve(args[key]))
    except (ValueError, OSError, RuntimeError):  # see above
        return use
    return use if resolved == args[key] else {**use, "input": {**args, key: resolved}}


def _redacted(session: Session, result: ToolResult) -> ToolResult:
    secrets = secrets_of(session.settings.api_key, session.settings.auth_token)
    if not secrets:
        return result
    if isinstance(result.content, str):
        return replace(
            result, content=redact(result.content, secrets), summary=redact(result.summary, secrets)
        )
    blocks = [
        {**b, "text": redact(b["text"], secrets)} if isinstance(b.get("text"), str) else b
        for b in result.content
    ]
    return replace(result, content=blocks, summary=redact(result.summary, secrets))


def _read_only(session: Session, use: dict[str, Any]) -> bool:
    """Whether the call may run beside its neighbours: its declaration says so (readers, Task)."""
    tool = session.find_tool(use.get("name", ""))
    return tool is not None and tool.declaration.parallel


def _touched(uses: list[dict[str, Any]]) -> set[str]:
    """The files earlier calls of the message name: they may be read or written before a later call runs."""
    return {
        str(u["input"]["file_path"])
        for u in uses
        if isinstance(u.get("input"), dict) and isinstance(u["input"].get("file_path"), str)
    }


def _permit(
    session: Session,
    use: dict[str, Any],
    touched: set[str] | None = None,
    stops: list[str] | None = None,
    before_ask: Callable[[], None] | None = None,
    asked: list[bool] | None = None,
) -> ToolResult | None:
    """None when the call may run; otherwise the error result to send instead.

    ``touched``: files earlier calls of the same message name; a call on one of them is not checked
    ahead (a Read just before it in the message has not run yet). ``stops`` collects the stopReason of
    a PreToolUse hook that ends the turn. ``before_ask`` runs before the user is asked (the calls
    waiting to run beside this one run first); ``asked`` gets True when the user was asked."""
    name, args = use["name"], use.get("input") or {}
    if isinstance(args, dict) and isinstance(args.get(INVALID_INPUT), dict):
        problem = str(args[INVALID_INPUT].get("error", ""))[:300]
        return ToolResult(
            f"The tool input was not valid JSON ({problem}), so the {name} call was not run. "
            "Send the call again, with its input as one valid JSON object.",
            is_error=True,
        )
    tool = session.find_tool(name)
    if tool is None:
        names = ", ".join(t.name for t in session.tools)
        return ToolResult(f"There is no tool named {name}. Available tools: {names}.", is_error=True)
    decision = session.permissions.check(name, args, cwd=session.tool_ctx.cwd)
    if decision.behavior == "deny":
        _denied(session, use, decision.reason)
        return ToolResult(
            f"Permission to use {name} was denied: {decision.reason}. Do not retry this call; "
            "choose another approach or ask the user.",
            is_error=True,
        )
    if decision.behavior == "ask":
        refused = _ask_user(session, use, tool, decision.reason, touched, before_ask, asked)
        if refused is not None:
            return refused
    return _pre_tool_hooks(session, use, stops)


def _ask_user(
    session: Session,
    use: dict[str, Any],
    tool: Tool,
    reason: str,
    touched: set[str] | None,
    before_ask: Callable[[], None] | None = None,
    asked: list[bool] | None = None,
) -> ToolResult | None:
    """A call the rules ask about: None once the user approved it; else the result to send instead (it
    would fail anyway, nobody can approve it, or the user said no)."""
    name, args = use["name"], use.get("input") or {}
    if before_ask is not None:  # the calls waiting to run beside this one run first, above its question
        before_ask()
    failure = None if args.get("file_path") in (touched or ()) else precheck(tool, args, session.tool_ctx)
    if failure is not None:  # it would fail anyway: nobody is asked to approve it
        session.emit(ToolStarted(use["id"], name, args))
        session.emit(ToolFinished(use["id"], name, failure.content, True, failure.summary))
        return failure
    if session.ask is None or session.cancel.is_set():
        _denied(session, use, f"needs approval ({reason}) {NOBODY_TO_ASK}")
        return ToolResult(
            f"{name} needs the user's approval ({reason}), and nobody can approve it in this "
            "non-interactive session, so it was not run. Continue without it or tell the "
            "user which permission to grant (for example with --allowedTools).",
            is_error=True,
        )
    if asked is not None:
        asked.append(True)
    answer = session.ask(name, args, session.permissions.describe(name, args))
    if answer == "always":
        session.permissions.allow_for_session(session.permissions.suggest_rule(name, args))
    elif answer != "yes":
        _denied(session, use, USER_SAID_NO)
        return ToolResult(DECLINED, is_error=True)
    return None


def _pre_tool_hooks(session: Session, use: dict[str, Any], stops: list[str] | None) -> ToolResult | None:
    """The PreToolUse hooks: None when they let the call run; a stop (collected in ``stops``) or a block
    (on screen as a refusal, with the hook's reason)."""
    name, args = use["name"], use.get("input") or {}
    outcomes = session.run_hooks("PreToolUse", name, tool_name=name, tool_input=args)
    stop = session.hooks.stop_reason(outcomes)
    if stop is not None:  # Claude Code's protocol: "continue": false wins over any decision
        if stops is not None:
            stops.append(stop)
        return ToolResult(STOPPED, is_error=True)
    reason = session.hooks.blocked(outcomes)
    if reason is not None:
        _denied(session, use, f"a PreToolUse hook blocked it: {' '.join(reason.split())[:200]}")
        return ToolResult(f"A PreToolUse hook blocked this call: {reason}", is_error=True)
    return None


def _denied(session: Session, use: dict[str, Any], reason: str) -> None:
    args = use.get("input")
    session.emit(PermissionDenied(use["id"], use["name"], args if isinstance(args, dict) else {}, reason))


def _execute(session: Session, use: dict[str, Any], stops: list[str] | None = None) -> ToolResult:
    if session.cancel.is_set():
        return ToolResult(NOT_RUN, is_error=True)
    name, args = use["name"], use.get("input") or {}
    tool = session.find_tool(name)
    assert tool is not None  # _permit answered calls of unknown tools already
    session.emit(ToolStarted(use["id"], name, args))
    unchanged = restore.unchanged_since_restore(session.conv, args) if name == "Read" else None
    if unchanged is not None:
        session.emit(ToolFinished(use["id"], name, unchanged, False, "unchanged since restored"))
        return ToolResult(unchanged, summary="unchanged since restored")
    _call.id = use["id"]
    was = checkpoints.before(name, args)  # the file as it is: /rewind can put it back
    try:
        result = _redacted(session, run_tool(tool, args, session.tool_ctx))
    finally:
        _call.id = None
    if was is not None and not result.is_error:
        prompt = session.conv.current_prompt_uuid or "start"
        try:
            checkpoints.after(session.checkpoint_dir, prompt, was)
        except OSError:
            pass  # no rewind point for this change: the change itself stands
    if _says_interrupted(result):
        pass  # the tool said itself what was stopped (a Task names its subagent's transcript)
    elif session.cancel.is_set() and not result.is_error:
        result = ToolResult(
            f"{INTERRUPTED}\n\nPartial output:\n{result.content}"
            if isinstance(result.content, str)
            else INTERRUPTED,
            is_error=True,
        )
    elif session.cancel.is_set():  # what it printed before it was stopped (Bash says so) reaches the model
        said = result.content if isinstance(result.content, str) and result.content.strip() else ""
        result = ToolResult(f"{INTERRUPTED}\n\n{said}" if said else INTERRUPTED, is_error=True)
    session.emit(ToolFinished(use["id"], name, result.content, result.is_error, result.summary))
    if name == "TodoWrite" and not result.is_error:
        session.emit(TodosChanged(tuple(dict(t) for t in args.get("todos") or [])))
    outcomes = session.run_hooks(
        "PostToolUse",
        name,
        tool_name=name,
        tool_input=args,
        tool_response={
            "content": _hook_text(result.content),
            "is_error": result.is_error,
        },
    )
    stop = session.hooks.stop_reason(outcomes)
    if stop is not None and stops is not None:
        stops.append(stop)
    feedback = session.hooks.blocked(outcomes)  # exit 2's stderr (or a "block" reason) is for the model
    return result if feedback is None else _with_feedback(result, feedback)


def _with_feedback(result: ToolResult, feedback: str) -> ToolResult:
    """The call's result with a PostToolUse hook's feedback after it (the call has run either way)."""
    note = f"PostToolUse hook feedback:\n{feedback}"
    if isinstance(result.content, str):
        return replace(result, content=f"{result.content}\n\n{note}")
    return replace(result, content=[*result.content, {"type": "text", "text": note}])


def _hook_text(content: str | list[dict[str, Any]]) -> str:
    """A result's text for a PostToolUse hook: text blocks joined (a Task's answer); "[blocks]" for media."""
    if isinstance(content, str):
        return content
    if all(b.get("type") == "text" for b in content):
        return "\n\n".join(str(b.get("text", "")) for b in content)
    return "[blocks]"


def _says_interrupted(result: ToolResult) -> bool:
    return result.is_error and isinstance(result.content, str) and result.content.startswith(INTERRUPTED)


def record_interruption(session: Session) -> None:
    """After Ctrl-C: answer any unanswered tool call and leave a marker, so the next request is valid."""
    answer_open_calls(session, NOT_RUN)
    session.add(meta(INTERRUPT_MARKER, interrupted=True))


def answer_open_calls(session: Session, text: str) -> None:
    """Answer, with the error ``text``, the tool calls of a last assistant message that has no results."""
    last = session.messages[-1] if session.messages else None
    if last is not None and last.role == "assistant" and last.tool_uses:
        session.add(tool_results([tool_result_block(u["id"], text, True) for u in last.tool_uses]))


CUT_HEAD = 2_000  # characters of a cut input value kept in the history


def for_history(message: Message, limit: int) -> Message:
    """The message as the conversation keeps it: a tool input of more than ``limit`` characters is cut.

    The call itself runs with the whole input (a 200 MB Write still writes 200 MB); only the history
    holds the head of each long value and a note. Otherwise one input larger than the context window
    would make every later request, the summary request included, too long to send.
    """
    if message.role != "assistant" or not message.tool_uses:
        return message
    content, changed = [], False
    for block in message.content:
        if block.get("type") == "tool_use" and _chars(block.get("input")) > limit:
            block, changed = {**block, "input": _cut(block.get("input"))}, True
        content.append(block)
    return message.replace(content=content) if changed else message


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(str(k)) + _chars(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_chars(v) for v in value)
    return 8


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > CUT_HEAD:
        return (
            f"{value[:CUT_HEAD]}\n[… {len(value) - CUT_HEAD:,} more characters cut from the conversation "
            "history to keep it within the context window; the tool call had the whole input]"
        )
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list):
        # a long list of short items (a TodoWrite of 50,000 tasks) is cut by items: its head, then a note
        head: list[Any] = []
        used = 0
        for item in value:
            used += _chars(item)
            if used > CUT_HEAD and head:
                break
            head.append(_cut(item))
        if len(head) < len(value):
            head.append(
                f"[… {len(value) - len(head):,} more items cut from the conversation history to keep it within "
                "the context window; the tool call had the whole input]"
            )
        return head
    return value
