"""Compaction: replace the conversation with a summary, then put the working state back (docs/compaction.md).

Triggers: ``/compact`` ("manual"), auto-compact over the threshold ("auto"), a prompt-too-long answer
(reactive: recorded and hooked as "auto", shown as "reactive").
Drops: the whole live history (or, on the session-memory path, all but a recent verbatim tail).
Keeps: the summary, the kept tail (its old tool results cleared as microcompact would, the newest kept
within 10% of T: the cached prefix is rewritten anyway; micro.in_tail — of those the stand-in saw, only
the newest once the session did not go back to the ones the last compaction kept:
notes_compaction.lean_tail), the working-state ledger
(compact.compaction.ledger), restored files and plan, SessionStart hook context — in that order.
Writes to disk: nothing until a summary is in hand; then the boundary, the summary and the new
messages are appended to the transcript (nothing before is touched), then a compact_result record
with the post-compaction count, so "a → b" reads the same after a resume.
Model calls: none on the notes path; one (plus up to 3 prompt-too-long retries) for the LLM summary.

    compact(conv, ports, trigger)
      ├─ DISABLE_COMPACT? ───────────────► notice, False
      ├─ PreCompact hooks (matcher = trigger; stdout → extra instructions)
      ├─ method: session-memory notes (no /compact instructions) ─► else LLM summary
      └─ finish(): ledger attachment + restore + SessionStart(compact) hooks   (computed first)
                   → boundary, summary, ledger, restored, hook context appended; live list swapped
                   → PostCompact hooks, post count recorded, token state reset, post-compaction guard

A failure of any kind — no summary, an API error, Ctrl-C — leaves the conversation and the transcript
exactly as they were and emits CompactFailed. Ctrl-C (errors.Interrupted) is then raised again, so the
turn (or the REPL command) ends as "interrupted"; every other failure returns False.

Failures of automatic compactions (auto and reactive) count toward the circuit breaker
``conv.breaker`` (compact.decision.breaker); any compaction that helps resets it. Whether one helped is the
post-compaction guard's call (compact.compaction.guard).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from compact.compaction import (
    backend,
    candidate,
    guard,
    ledger,
    notes_compaction,
    restore,
    server_summary,
    summary,
)
from compact.compaction.notes import save_version, template_for
from compact.context import context_editing, coverage, discovered
from compact.context.conversation import Conversation, LastCompaction, Ports, Trigger
from compact.context.result import Compaction
from compact.stages import binding, micro
from compact.stages.state import microcompact_record, notes_record, thinking_record
from core.errors import CompactionError, Interrupted, describe
from core.events import CompactFailed, CompactFinished, CompactStarted, MessageRecorded, Notice
from core.messages import Message, meta
from core.tokens import estimate_text

DISABLED = "Compaction is disabled (DISABLE_COMPACT is set)"
CANCELLED = "cancelled"
NOTHING = "there is nothing to compact yet"
# below the least a compaction leaves (the summary's frame and the working state it must attach) there is
# nothing to compact: the conversation would only grow (the reason starts with NOTHING_TO_COMPACT)
NOTHING_TO_COMPACT = "nothing to compact"
SMALL = NOTHING_TO_COMPACT + " ({pre:,} tokens; a compaction would leave {post:,})"
SET_ASIDE_LOOP = "prepared candidate set aside: a tool loop's thinking can't follow a summary written here"
# the attachments and the restored files may fill the context up to this share of T, no further
RESTORE_SHARE = 0.48
# what a compaction leaves is estimated; on a tiny history the server counted it 1.03-1.10x the original
# while the estimate said "4.8k -> 4.8k" (the calibration is fitted on whole requests, where the system
# prompt and tools weigh most): a compaction must leave less than the original by this margin as well
SHRINK_MARGIN = 0.05
ATTACH_OF_ROOM = 0.9
_bounded = candidate.bounded  # (finish's own ``candidate`` is the note on a prepared one)
# of T: the most a compaction leaves (beside a server summary or a tail it can't shrink), less what the
# view adds to the estimate here (the messages' id tags): half of T as the view counts it
POST_SHARE = 0.47
SUMMARY_FLOOR = 200  # tokens a summary of ours keeps however tight the room  # of what is left of that share: the attachments' bound (the rest: restored files)


def compact(
    conv: Conversation,
    ports: Ports,
    trigger: Trigger,
    instructions: str | None = None,
    reactive: bool = False,
    *,
    prepared: Compaction | None = None,
    note: str = "",
    waited: float = 0.0,
    hooked: list[str] | None = None,
    calls: bool = True,
) -> bool:
    """Compact the conversation; True when it was replaced.

    ``prepared``: a compaction made in the background (compact.workers.preparer), used instead of making one
    now unless a PreCompact hook adds instructions it could not have followed; ``hooked``: the lines of
    the PreCompact hooks that already ran when it was prepared (their instructions are in it: they do not
    run again); ``note`` says what became of a candidate (shown on the compaction line); ``waited``:
    seconds the user already waited for it; ``calls=False``: an early compaction (compact.decision.decide),
    which makes no model call — ``prepared`` is used even when a PreCompact hook adds instructions."""
    if ports.config.disable_compact:
        ports.emit(Notice(DISABLED, "warning"))
        return False
    if conv.compacting:
        return False  # never from inside another compaction (a hook, a side request)
    if trigger == "manual":
        conv.cancel.clear()  # a command of its own: an earlier Ctrl-C must not cancel it
    conv.compacting = True
    try:
        shown = "reactive" if reactive else trigger
        return _attempt(conv, ports, trigger, instructions, shown, prepared, note, waited, hooked, calls)
    finally:
        conv.compacting = False


def _attempt(
    conv: Conversation,
    ports: Ports,
    trigger: Trigger,
    instructions: str | None,
    shown: str,
    prepared: Compaction | None = None,
    note: str = "",
    waited: float = 0.0,
    hooked: list[str] | None = None,
    calls: bool = True,
) -> bool:
    """One compaction, every failure turned into CompactFailed (Ctrl-C raised again afterwards)."""
    started = time.monotonic() - waited
    conv.last_failure = ""
    ports.emit(CompactStarted(shown))
    if prepared is not None and not backend.keeps_thinking_valid(prepared):
        prepared, hooked, note = None, None, SET_ASIDE_LOOP
    try:
        made = _make(conv, ports, trigger, instructions, prepared, hooked, calls, shown == "reactive")
        if made is None:
            conv.last_failure = NOTHING
            ports.emit(CompactFailed(shown, NOTHING))
            return False
        compaction, pre_tokens, hook_lines, custom = made
        if prepared is not None and compaction is not prepared:
            note = "prepared candidate set aside: a PreCompact hook added instructions"
        try:
            return finish(
                conv,
                ports,
                compaction,
                trigger,
                pre_tokens,
                started,
                shown=shown,
                hook_lines=hook_lines,
                candidate=note,
            )
        except CompactionError as e:
            # the server's summary keeps the kept turns whole and re-attaches the working state after
            # them: with little to replace, that can leave more than there was. The local summary keeps
            # less (its tail without thinking), so it is tried before the compaction, and with it a
            # reactive one's turn, is given up (issue 31: every failure falls back)
            if compaction.stand_in is None or not str(e).startswith(NOTHING_TO_COMPACT):
                raise
            local = _local(conv, ports, trigger, instructions, custom)
            lines = [*hook_lines, f"the server's summary would leave more ({e}); summarized here instead"]
            return finish(
                conv,
                ports,
                local,
                trigger,
                pre_tokens,
                started,
                shown=shown,
                hook_lines=lines,
                candidate=note,
            )
    except Interrupted:
        ports.emit(CompactFailed(shown, CANCELLED))
        raise
    except CompactionError as e:
        return _failed(conv, ports, trigger, shown, str(e))
    except Exception as e:  # noqa: BLE001 - API errors, hook or disk trouble: the conversation stays as it was
        if conv.cancel.is_set():  # a stream closed by Ctrl-C can surface as a transport error
            ports.emit(CompactFailed(shown, CANCELLED))
            raise Interrupted("interrupted") from None
        return _failed(conv, ports, trigger, shown, describe(e))


def _make(
    conv: Conversation,
    ports: Ports,
    trigger: Trigger,
    instructions: str | None,
    prepared: Compaction | None = None,
    hooked: list[str] | None = None,
    calls: bool = True,
    reactive: bool = False,
) -> tuple[Compaction, int, list[str], list[str]] | None:
    """The compaction, the tokens before it, the lines to show and the PreCompact hooks' instructions
    (``custom``, for a fallback made after it); None when there is nothing to
    compact. A prepared one, else the backend compact.compaction.backend chooses: the server's summary where kept
    turns hold thinking, else the notes (not with /compact instructions, nor in a tool loop that holds
    thinking), else the LLM summary — and every failure of the server's ends in one of those."""
    pre = conv.view()
    if not pre.messages:
        return None
    least = least_left(conv, ports, pre.messages)
    if shrunk(conv, least, 0.0 if reactive else SHRINK_MARGIN) >= counted(
        conv, pre.raw_tokens
    ):  # no summary, however short, makes it smaller: no model call
        raise CompactionError(SMALL.format(pre=pre.raw_tokens, post=least))
    if prepared is not None and hooked is not None:
        return prepared, counted(conv, pre.raw_tokens), hooked, []  # its hooks ran when it was prepared
    custom, hook_lines = pre_compact(ports, trigger, instructions)
    if prepared is not None and (not hook_lines or not calls):
        return prepared, counted(conv, pre.raw_tokens), hook_lines, custom
    if not (instructions and instructions.strip()) and (made := _bare(conv, ports)) is not None:
        return made, pre.tokens, hook_lines, custom
    plan = backend.server_plan(conv, ports)
    if plan is not None:
        try:
            made = server_summary.summarize(
                conv, ports, plan.sent, plan.kept, server_summary.instructions(custom)
            )
            return made, counted(conv, pre.raw_tokens), hook_lines, custom
        except CompactionError as e:
            hook_lines = [*hook_lines, f"{e}; summarized here instead"]
    return (
        _local(conv, ports, trigger, instructions, custom),
        counted(conv, pre.raw_tokens),
        hook_lines,
        custom,
    )


def _local(
    conv: Conversation, ports: Ports, trigger: Trigger, instructions: str | None, custom: list[str]
) -> Compaction:
    """The notes (not with /compact instructions, nor in a tool loop that holds thinking), else the LLM
    summary of the whole view."""
    pre = conv.view()
    whole = bool(instructions and instructions.strip()) or backend.tool_loop_running(pre.messages)
    compaction = None if whole else _notes(conv, ports, trigger)
    if compaction is None:
        compaction = summary.summarize(conv, ports, pre.tagged, custom)
    return compaction


def counted(conv: Conversation, estimate: int) -> int:
    """The view's size: our estimate, or the server's count when it refused the request as too long and
    counted more (a reactive compaction trusts the server)."""
    return max(estimate, conv.server_count or 0)


def shrunk(conv: Conversation, tokens: int, margin: float = SHRINK_MARGIN) -> int:
    """``tokens`` (what a compaction would leave, estimated and calibrated) with the estimate's margin on
    what it writes (the system prompt and tools are the same before and after): a compaction goes ahead
    only when this is below what it replaces, so it is never larger by the server's count. A reactive
    compaction goes without the margin: the server refused the request as it was, and any room helps."""
    fixed = conv.calibration.scale(conv.calibration.fixed_tokens())
    return fixed + int(max(0, tokens - fixed) / (1 - margin))


def least_left(conv: Conversation, ports: Ports, messages: list[Message]) -> int:
    """The least a compaction of ``messages`` leaves, as the view counts: the system prompt and tools,
    the summary message with an empty summary, and the working state it attaches (compact.compaction.ledger; the
    user's words are in it whole while they fit its budget). A conversation at or under this size has
    nothing to compact."""
    frame = _summary_message(conv, Compaction(method="", summary=""), "manual")
    state = ledger.attachment(
        messages, [], str(conv.tools.project_dir), conv.window.thresholds().auto_compact
    )
    cal = conv.calibration
    return cal.scale(cal.fixed_tokens() + frame.tokens + state.message.tokens)


def _bare(conv: Conversation, ports: Ports) -> Compaction | None:
    """Cost-aware, on a model that keeps its thinking: at a turn boundary the notes, current up to the new
    prompt, replace everything before it — no call, no kept turn holding thinking — where the server's
    summary would be a read of the whole context and the notes make no call (compact.compaction.economics)."""
    if not (ports.config.cost_aware and ports.config.notes_enabled) or not backend.server_expected(
        conv, ports
    ):
        return None
    try:
        return notes_compaction.bare(conv, ports)
    except OSError:
        return None


def _failed(conv: Conversation, ports: Ports, trigger: Trigger, shown: str, reason: str) -> bool:
    if trigger == "auto":
        conv.breaker.failed()
    conv.last_failure = reason
    ports.emit(CompactFailed(shown, reason))
    return False


def pre_compact(ports: Ports, trigger: str, instructions: str | None) -> tuple[list[str], list[str]]:
    """Run PreCompact hooks; the custom instructions in order: /compact args, hook output, CLAUDE.md."""
    hook_text = ports.hooks("PreCompact", trigger, trigger=trigger, custom_instructions=instructions or None)
    custom = [t for t in (instructions, hook_text, ports.instructions()) if t and t.strip()]
    lines = ["PreCompact hook output added to the summary instructions"] if hook_text else []
    return custom, lines


def _notes(conv: Conversation, ports: Ports, trigger: str) -> Compaction | None:
    """The session-memory compaction, when its notes are usable (None: use the LLM summary)."""
    if not ports.config.notes_enabled:
        return None
    try:
        return notes_compaction.compact_with_notes(conv, ports, trigger)
    except (CompactionError, OSError):
        return None


# --- the common finishing steps ---------------------------------------------------------------------


# the paragraphs around the summary in the message that stands in for the history (a person reading the
# summary sees it without them: agent.runtime.lifecycle)
WRAPPER_OPENING = "This session continues an earlier conversation that grew too long for the context window."
WRAPPER_KEPT = "The most recent messages of that conversation follow this summary word for word."
WRAPPER_TRANSCRIPT = "Every message of the earlier conversation is in the transcript "
WRAPPER_CARRY_ON = "Carry on with the task from where it stopped."
WRAPPER_CLOSINGS = (WRAPPER_KEPT, WRAPPER_TRANSCRIPT, WRAPPER_CARRY_ON)


def summary_text(conv: Conversation, compaction: Compaction, trigger: str) -> str:
    """The user message that stands in for the compacted history."""
    parts = [f"{WRAPPER_OPENING} What happened before is summarized below.", compaction.summary.strip()]
    if compaction.kept:
        parts.append(WRAPPER_KEPT)
    parts.append(
        f"{WRAPPER_TRANSCRIPT}{conv.transcript_path}; read it when you need an exact detail the summary "
        "leaves out."
    )
    if trigger == "auto":
        parts.append(
            f"{WRAPPER_CARRY_ON} Do not recap what was done and do not ask the user anything first: "
            "continue with the next step of the current work."
        )
    return "\n\n".join(parts)


def _summary_message(conv: Conversation, compaction: Compaction, trigger: str) -> Message:
    return Message(
        "user", [{"type": "text", "text": summary_text(conv, compaction, trigger)}], kind="summary"
    )


def _segment(compaction: Compaction, kept: list[Message], anchor: str) -> dict[str, str] | None:
    if not kept:
        return None
    seg = dict(compaction.preserved_segment or {})
    seg.setdefault("headUuid", kept[0].uuid)
    seg.setdefault("tailUuid", kept[-1].uuid)
    seg["anchorUuid"] = anchor
    return seg


def _session_start(ports: Ports) -> tuple[list[Message], list[str]]:
    context = ports.hooks("SessionStart", "compact", source="compact")
    if not context:
        return [], []
    message = meta(f"Output of the SessionStart hook after the compaction:\n{context}", hookContext=True)
    return [message], ["SessionStart hook output added to the context"]


def finish(
    conv: Conversation,
    ports: Ports,
    compaction: Compaction,
    trigger: Trigger,
    pre_tokens: int,
    started: float,
    *,
    shown: str | None = None,
    hook_lines: list[str] | None = None,
    candidate: str = "",
) -> bool:
    """Write the compaction and swap the live list (the steps every method shares); True on success.

    Everything is computed before the first write, so a failure up to the commit changes nothing.
    """
    shown = shown or trigger
    old = list(conv.messages)
    th = conv.window.thresholds()
    compaction, invented = _checked(conv, ports, compaction, old, th.auto_compact)
    kept = [m.replace(usage=None) if m.usage is not None else m for m in compaction.kept]  # stale now
    server = compaction.stand_in is not None
    # the server's summary keeps the kept turns' thinking valid as long as they stay as they were sent:
    # their old results are not cleared then
    unseen = frozenset() if server else _unseen(conv, compaction, old)
    lean = notes_compaction.lean_tail(conv, ports, trigger)
    stale = [] if server else _stale_in_kept(conv, ports, kept, unseen, lean)
    visible = micro.without_calls(kept, stale)  # files whose reads stay visible in the kept tail
    summary_msg = (
        compaction.stand_in
        if compaction.stand_in is not None
        else _summary_message(conv, compaction, trigger)
    )
    summary_msg = _with_base(conv, summary_msg, old, kept)
    cal = conv.calibration
    fixed = cal.fixed_tokens() + summary_msg.tokens + micro.size_after(kept, stale)
    # the attachments are bounded together by what is left of RESTORE_SHARE of T beside the system
    # prompt, the tools, the summary and the tail (so a 43K window lands at or under half of T too)
    left = round((th.auto_compact * RESTORE_SHARE - cal.scale(fixed)) / cal.ratio)
    state = ledger.attachment(
        old,
        kept,
        str(conv.tools.project_dir),
        th.auto_compact,
        conv.session_dir,
        compaction.summary,
        room=max(0, int(left * ATTACH_OF_ROOM)),
        invented=invented,
    )
    state = dataclasses.replace(state, message=discovered.stamp(state.message, old))  # found tools outlive it
    base = cal.scale(fixed + state.message.tokens)  # as the server counts (the tail's old results cleared)
    over = round((base - th.auto_compact * POST_SHARE) / cal.ratio)
    if over > 0 and compaction.stand_in is None and compaction.summary:
        # the attachments passed their room (the user's words keep their floor, the working state its
        # essentials): a summary of ours gives the difference back, so the context stays within half of T
        limit = max(SUMMARY_FLOOR, estimate_text(compaction.summary) - over)
        text, cut = _bounded(compaction.summary, [], limit)
        if cut:
            compaction = dataclasses.replace(compaction, summary=text)
            summary_msg = _with_base(conv, _summary_message(conv, compaction, trigger), old, kept)
            fixed = cal.fixed_tokens() + summary_msg.tokens + micro.size_after(kept, stale)
            base = cal.scale(fixed + state.message.tokens)
    room = round((th.auto_compact * RESTORE_SHARE - base) / cal.ratio)  # in estimated tokens, like the files
    cost_aware = ports.config.cost_aware and ports.config.auto_enabled
    restored = restore.plan_restore(conv, ports, visible, old, room=room, tail=kept if cost_aware else None)
    # never larger than what it replaced (the history as kept, old results the server clears included:
    # compact.decision.tokens raw; the same as the server's count without clearing): the restored files go
    # first (they can be read again), and when the summary, the tail and the working state alone are not
    # smaller, nothing is compacted
    before = counted(
        conv, conv.view().raw_tokens
    )  # as kept: a compaction replaces what the server clears too
    margin = 0.0 if shown == "reactive" else SHRINK_MARGIN
    if shrunk(conv, base, margin) >= before:
        raise CompactionError(SMALL.format(pre=before, post=base))
    if (
        shrunk(
            conv, cal.scale(fixed + state.message.tokens + sum(m.tokens for m in restored.messages)), margin
        )
        >= before
    ):
        restored = restore.Restored()
    hook_msgs, start_lines = _session_start(ports)
    added = [state.message, *restored.messages, *hook_msgs]
    found = discovered.found_so_far(old)
    if found and ports.preserves_thinking():
        # the tools found before stay deferred in ``tools`` (the kept thinking is bound to them) and are
        # made available again here, after every other attachment: a system message follows a user one
        added.append(discovered.additions(found))
    if server and kept and kept[-1].role == "user":
        # after the kept turns, as system messages: nothing may stand between the block and them. A
        # system message may only follow a user message, so when the kept turns end with the model's
        # answer (a compaction between turns: /compact) or nothing was kept, they stay user messages:
        # appended all the same, and merged with the next prompt into one user turn
        added = [_as_system(m) for m in added]

    _commit(conv, ports, trigger, pre_tokens, old, compaction, summary_msg, kept, added)
    _settle_thinking(conv, kept, server)
    _move_coverage(conv, compaction, summary_msg, kept, added)
    if stale:
        conv.state.cleared.update(stale)
        conv.record(microcompact_record(stale))
    restore.apply_read_state(conv, restored, visible)
    post_text = ports.hooks("PostCompact", trigger, trigger=trigger, compact_summary=compaction.summary)
    post_tokens = conv.view().tokens
    kept_seen = () if server else _kept_seen(conv, kept, stale, unseen)
    economics_facts: dict[str, Any] = {
        "tail_uuid": conv.messages[-1].uuid,
        "written": max(0, post_tokens - cal.scale(cal.fixed_tokens() + _unsent(kept, stale))),
        "kept_seen": kept_seen,
        "kept_seen_tokens": cal.scale(micro.size_after(kept, []) - micro.size_after(kept, kept_seen)),
        "lean": lean,
    }
    # the "a → b" figure and what the next compaction's arithmetic reads of this one: recorded once, so
    # /summary after a resume shows the same b as the live line and the resumed session decides as it would
    conv.record(
        compact_result_record(post_tokens, compaction, trigger, pre_tokens, candidate, economics_facts)
    )
    conv.state.reset_after_compaction(post_tokens)
    conv.last_compaction = LastCompaction(
        summary=compaction.summary,
        trigger=trigger,
        pre_tokens=pre_tokens,
        post=post_tokens,
        method=compaction.method,
        replaced=lambda: old,
        candidate=candidate,
        **economics_facts,
    )
    early = conv.decision.line() if conv.decision is not None else ""
    lines = [
        *([early] if early else []),
        *(hook_lines or []),
        *start_lines,
        *([f"PostCompact hook: {post_text}"] if post_text else []),
    ]
    ports.emit(
        CompactFinished(
            shown,
            pre_tokens,
            post_tokens,
            time.monotonic() - started,
            compaction.method,
            compaction.summary,
            tuple(lines),
            state.summary,
            candidate,
        )
    )
    guard.check(conv, ports, trigger, shown, pre_tokens, post_tokens, clears=context_editing.clears(ports))
    return True


def _checked(
    conv: Conversation, ports: Ports, compaction: Compaction, old: list[Message], threshold: int
) -> tuple[Compaction, list[str]]:
    """The compaction with every passage that invents the user's words taken out (compact.compaction.candidate:
    the same check for a prepared or a foreground one, a summary or the notes; the user's words are the
    prompts they typed, never an earlier summary), and its text within SUMMARY_SHARE of T (a copy of
    a paste left out, then the middle of a long one); and the passages found. The server's summary block
    stays as the server made it (its thinking is bound to it): what it invents is flagged in the working
    state instead, first."""
    said = ledger.derive(old, str(conv.tools.project_dir)).prompts
    text, removed = candidate.scrub(
        compaction.summary, said, template_for(ports)
    )  # its guide lines: nobody's words
    cut: list[str] = []
    if compaction.stand_in is None:
        text, cut = candidate.bounded(text, said, int(threshold * candidate.SUMMARY_SHARE))
    changed = dataclasses.replace(compaction, summary=text) if removed or cut else compaction
    return changed, removed if compaction.stand_in is not None else []


COMPACT_RESULT = "compact_result"


def _with_base(conv: Conversation, summary_msg: Message, old: list[Message], kept: list[Message]) -> Message:
    """The summary message carrying the ledger of what it replaced (compact.compaction.ledger.BASE_KEY): a
    /rewind into the kept tail cuts the attachment after it, and the working state must survive that."""
    ids = {m.uuid for m in kept}
    base = ledger.derive([m for m in old if m.uuid not in ids], str(conv.tools.project_dir))
    return summary_msg.replace(extra={**summary_msg.extra, ledger.BASE_KEY: base.to_dict()})


def _as_system(m: Message) -> Message:
    """An attachment as an appended ``role: "system"`` message (text only; anything else stays a user
    message, which follows the kept turns just as well)."""
    if all(b.get("type") == "text" for b in m.content):
        return m.replace(role="system")
    return m


def _settle_thinking(conv: Conversation, kept: list[Message], server: bool) -> None:
    """After a local compaction the kept turns follow a summary the client wrote, which invalidates all
    of their thinking: it is left out from now on, recorded once. After the server's it stays valid."""
    counts = conv.view_ctx.thinking if conv.view_ctx is not None else binding.Counts()
    holding = [m.uuid for m in kept if binding.holds_thinking(m)]
    if server:
        counts.kept_at_compaction += len(holding)
        return
    if holding:
        conv.state.thinking_dropped.update(holding)
        conv.record(thinking_record(holding, "compaction"))
        counts.dropped_at_compaction += len(holding)


def compact_result_record(
    post_tokens: int,
    compaction: Compaction | None = None,
    trigger: str = "",
    pre_tokens: int = 0,
    candidate: str = "",
    economics_facts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a compaction left, written right after its messages (the boundary can't know it yet): the
    "a → b" figures and the summary as a person reads it, whatever wrote it (a local summary, the notes,
    the server), so /summary shows after a resume what it showed live (agent.runtime.lifecycle); and, as
    ``economics``, the facts of ``LastCompaction`` the next compaction's arithmetic reads (its tail, what it
    wrote to the cache, the seen results it kept), so a resumed session decides as the live one would."""
    rec: dict[str, Any] = {
        "type": "system",
        "subtype": COMPACT_RESULT,
        "isMeta": True,
        "postTokens": int(post_tokens),
    }
    if compaction is not None:
        rec.update(
            preTokens=int(pre_tokens),
            trigger=trigger,
            method=compaction.method,
            summary=compaction.summary,
            **({"candidate": candidate} if candidate else {}),
        )
    if economics_facts:
        rec["economics"] = {k: list(v) if isinstance(v, tuple) else v for k, v in economics_facts.items()}
    return rec


def _move_coverage(
    conv: Conversation,
    compaction: Compaction,
    summary_msg: Message,
    kept: list[Message],
    added: list[Message],
) -> None:
    """Carry "summarized up to here" onto the new list (compact.context.coverage): the notes keep covering what
    they covered, and nothing of an LLM summary; recorded so a resume finds the same point."""
    notes_path = compaction.method == notes_compaction.METHOD
    marker = coverage.covered_after(summary_msg, kept, added, conv.state.last_summarized_uuid, notes_path)
    conv.state.last_summarized_uuid = marker
    if marker:
        conv.record(notes_record(marker))
        save_version(conv.notes_path, marker)  # what /rewind puts back (agent.runtime.rewind)


def _unsent(kept: list[Message], stale: list[str]) -> int:
    """The kept messages no request has sent yet (after the last reply: the newest tool results), as the
    view will count them: the next request writes them to the cache whether or not a compaction ran."""
    last = max((i for i, m in enumerate(kept) if m.role == "assistant"), default=-1)
    return micro.size_after(kept[last + 1 :], stale)


def _stale_in_kept(
    conv: Conversation,
    ports: Ports,
    kept: list[Message],
    unseen: frozenset[str] = frozenset(),
    lean: bool = False,
) -> list[str]:
    """Old tool results of a kept tail: the compaction rewrites the cached prefix anyway, so microcompact's
    clearing (all but the most recent few, within their share of T as the server counts) costs nothing
    extra now and saves on every later request — except results no notes update or summary saw
    (``unseen``): those stay, or they would leave the context unseen. ``lean`` (``notes_compaction.lean_tail``): of the
    results they saw, only the newest stays."""
    c = ports.config
    if not kept or not c.microcompact or c.disable_compact:
        return []
    th = conv.window.thresholds().auto_compact
    keep = 1 if lean else c.keep_recent
    return micro.in_tail(kept, conv.state, keep, th, ratio=conv.calibration.ratio, unseen=unseen)


def _kept_seen(
    conv: Conversation, kept: list[Message], stale: list[str], unseen: frozenset[str]
) -> tuple[str, ...]:
    """The tool calls whose results the kept tail holds whole although the stand-in saw them (those
    microcompact could clear)."""
    gone = set(stale) | set(unseen) | conv.state.cleared
    calls = {str(b.get("id")) for m in kept for b in m.tool_uses if micro.clearable(str(b.get("name")))}
    return tuple(
        str(b.get("tool_use_id"))
        for m in kept
        for b in m.tool_results
        if str(b.get("tool_use_id")) in calls - gone and micro.holds_output(b)
    )


def _unseen(conv: Conversation, compaction: Compaction, old: list[Message]) -> frozenset[str]:
    """The tool calls of ``old`` whose results the stand-in did not see: after the notes' marker on the
    notes path, after the last message a prepared summary saw, none for a summary of everything."""
    if compaction.method == notes_compaction.METHOD:
        seen = coverage.covered_count(old, compaction.seen_through or conv.state.last_summarized_uuid)
    elif compaction.seen_through is not None:
        seen = coverage.covered_count(old, compaction.seen_through)
    else:
        return frozenset()
    return coverage.unseen_results(old, seen)


def _commit(
    conv: Conversation,
    ports: Ports,
    trigger: Trigger,
    pre_tokens: int,
    old: list[Message],
    compaction: Compaction,
    summary_msg: Message,
    kept: list[Message],
    added: list[Message],
) -> None:
    """Append the boundary, the summary and the new messages; swap the live list."""
    with conv.lock:
        conv.writer.append_boundary(
            trigger,
            pre_tokens,
            logical_parent_uuid=old[-1].uuid if old else None,
            preserved_segment=_segment(compaction, kept, summary_msg.uuid),
            decision=_decision_record(conv, compaction, trigger),
        )
        for m in [summary_msg, *added]:  # kept messages are in the transcript already
            conv.writer.append_message(m)
        conv.messages = [summary_msg, *kept, *added]
        if conv.view_ctx is not None:
            conv.view_ctx.sent = conv.view_ctx.sent_tagged = (
                None  # a compaction point: the next request starts a new prefix
            )
    for m in [summary_msg, *added]:
        ports.emit(MessageRecorded(m))


def _decision_record(conv: Conversation, compaction: Compaction, trigger: Trigger) -> dict[str, Any]:
    """What the boundary records of the decision that made this compaction (compact.decision.decide):
    the automatic one's, else the command's."""
    d = conv.decision
    if d is not None:
        return {**d.record(), "method": compaction.method}
    why = "/compact" if trigger == "manual" else "the server refused the request as too long"
    return {
        "action": "manual" if trigger == "manual" else "reactive",
        "reason": why,
        "method": compaction.method,
    }


def nothing_new_since_compaction(conv: Conversation) -> bool:
    """True when nothing was added since the last compaction (compacting again would change nothing)."""
    last = conv.last_compaction
    return bool(last and conv.messages and conv.messages[-1].uuid == last.tail_uuid)
