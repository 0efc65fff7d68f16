"""One main request's cycle: everything that happens to the conversation around it, after the view (docs/compaction.md).

``before_request`` runs before every model call of the main conversation (tool loops included): the
view (compact.stages.view), auto-compact when the policy says so, the snip nudge, the token state;
``send`` makes the call and recovers from a prompt that is still too long; ``after_response`` keeps
the session notes current and prepares the next compaction in the background (compact.workers.preparer: in
compact/, "prepare" means only that). The one diagram of the whole order is compact/stages/view.py's docstring.
"""

from __future__ import annotations

import json

from compact import autocompact
from compact.compaction import backend, compactor, economics, notes_compaction, notes_updater
from compact.context import cache_health, context_editing, coverage
from compact.context.conversation import Conversation, Ports
from compact.decision import thresholds
from compact.decision.tokens import CLEARED
from compact.stages import binding, micro, refused, snip
from compact.stages.binding import THINKING
from compact.stages.state import clearing_record, context_edit_record, thinking_record
from compact.stages.view import View
from compact.workers import preparer
from core.errors import CONTEXT_LIMIT, ContextLimitReached, MaxTokensOverflow, PromptTooLong, RefusedBlock
from core.events import MessageRecorded, Notice, TokenState
from core.messages import Message
from core.model import Request, in_context
from core.tokens import estimate_text, usage_total

NEAR_FULL = "The context is nearly full; the next request will compact or stop."
# messages no usage measured must weigh this share of T before a decision to compact is checked against
# the server's count of them (compact.request_cycle ``measure``)
MEASURE_SHARE = 0.05


def before_request(conv: Conversation, ports: Ports) -> View:
    """The view to send next, after whatever compaction it needs; ContextLimitReached at the blocking limit."""
    current = conv.view()
    if measure(conv, ports, current):
        current = conv.view()
    # due on what the history weighs; put off by what the server counts (the same without clearing)
    if autocompact.maybe_autocompact(
        conv, ports, current.raw_tokens, current.messages, counted=counted(conv, ports, current)
    ):
        current = conv.view()
    if maybe_nudge(conv, ports, counted(conv, ports, current)):
        current = conv.view()
    state = token_state(conv, counted(conv, ports, current))
    ports.emit(state)
    if state.blocking:
        raise ContextLimitReached(CONTEXT_LIMIT)
    return current


def measure(conv: Conversation, ports: Ports, current: View) -> bool:
    """Before a decision to compact that rests on messages no usage has measured (a run of tool results
    since the last reply: our estimate of a file can be twice the server's count), ask the server to
    count the request (count_tokens), and scale such messages by what it says (compact.decision.tokens
    ``measured``): every figure the decision uses is then in the server's unit. Once per such tail;
    True when the calibration changed."""
    if not ports.config.auto_enabled or conv.compacting:
        return False
    with conv.lock:
        messages = list(current.messages)
    at = max((i for i, m in enumerate(messages) if m.role == "assistant" and m.usage), default=-1)
    tail = messages[at + 1 :]
    th = conv.window.thresholds().auto_compact
    unmeasured = sum(m.tokens for m in tail)
    if not tail or unmeasured < th * MEASURE_SHARE or conv.measured_at == tail[-1].uuid:
        return False
    if not autocompact.decision(conv, ports, current.raw_tokens, current.messages).compacts:
        return False
    conv.measured_at = tail[-1].uuid
    req = ports.request(current.api)
    real = ports.count(req)
    if real is None:
        return False
    usage = messages[at].usage if at >= 0 else None
    known = usage_total(usage) + int(usage.get(CLEARED) or 0) if usage else 0  # with what it cleared
    estimated = unmeasured + (0 if usage else conv.calibration.fixed_tokens())
    conv.calibration.measured(real - known, estimated)
    return True


def token_state(conv: Conversation, tokens: int) -> TokenState:
    """The warning bar's numbers for a count of ``tokens``."""
    return thresholds.token_state(tokens, conv.window.thresholds())


def maybe_nudge(conv: Conversation, ports: Ports, tokens: int) -> bool:
    """Remind the model, now and then, that old turns can be snipped (docs/compaction.md); True if it did."""
    if ports.config.disable_compact or not snip.nudge_needed(tokens, conv.state):
        return False
    conv.state.tokens_at_last_nudge = tokens
    message = snip.nudge_message()
    conv.append(message)
    ports.emit(MessageRecorded(message))
    return True


def after_response(conv: Conversation, ports: Ports) -> None:
    """After each main response: prepare the next compaction in the background from the preparation
    level on (compact.workers.preparer), and keep the session notes current — unless this cycle's candidate
    already owns them, or a compaction is due at the next request and can use the notes as they are,
    which would throw the update away, or (cost-aware compaction) the server's summary is the next
    compaction's backend, which never reads them."""
    tokens = conv.view().raw_tokens  # what a compaction would replace (old results the server clears too)
    if turn_end_notes(conv, ports, tokens):
        return
    if preparer.start_if_due(conv, ports, tokens):
        return
    if ports.config.auto_enabled and not conv.compacting:
        due = autocompact.threshold_reached(conv, ports, tokens)
        if due and notes_compaction.plan(conv, ports) is not None:
            return
        if ports.config.cost_aware and backend.server_expected(conv, ports):
            return  # the server's summary will compact: notes kept current for it would be paid for unused
    notes_updater.update_if_due(conv, ports)


def turn_end_notes(conv: Conversation, ports: Ports, tokens: int) -> bool:
    """Cost-aware compaction on a model that keeps its thinking: a reply that ends the turn past
    BOUNDARY_SHARE of T, when a next turn as long as this one would reach T, brings the notes up to it, so the next prompt compacts from them at the boundary
    (compact.autocompact.at_boundary: no kept thinking, no call) rather than the coming tool loop
    reaching T, where only the server's summary would do. True when the update was started."""
    c = ports.config
    if not (c.cost_aware and c.auto_enabled and c.notes_enabled) or conv.compacting:
        return False
    with conv.lock:
        last = conv.messages[-1] if conv.messages else None
    if last is None or last.role != "assistant" or last.tool_uses or not backend.server_expected(conv, ports):
        return False
    th = conv.window.thresholds().auto_compact
    if tokens < th * economics.BOUNDARY_SHARE:
        return False
    with conv.lock:
        messages = list(conv.messages)
    start = max((i for i, m in enumerate(messages) if m.is_typed_prompt), default=0)
    if tokens + sum(m.tokens for m in messages[start:]) < th:
        return False  # a next turn like this one ends under T: no compaction to save it from yet
    notes_updater.update_in_background(conv, ports)
    return True


# --- the call ----------------------------------------------------------------------------------------


def counted(conv: Conversation, ports: Ports, current: View) -> int:
    """What the server will count of the next request over ``current``: its count, less what the automatic
    clearing takes out that no reported usage has measured yet (right after a compaction point the count
    is an estimate of the whole history as kept). Moves the clearing point first when it is due
    (compact.context.context_editing ``advance``; recorded, so a resume asks for the same clearing)."""
    if not context_editing.automatic_on(ports):
        return current.tokens
    state = conv.state
    moved = context_editing.advance(
        current.messages,
        state.server_clear_through,
        current.tokens,
        conv.window.thresholds().auto_compact,
        ports.config.keep_recent,
        rewritten=conv.view_ctx is not None and conv.view_ctx.sent is None,  # a compaction point
        # nothing cleared unseen — unless automatic compaction has stopped (the breaker): then the
        # clearing alone keeps the session going, as microcompact's would
        seen=None
        if conv.breaker.open
        else coverage.seen_count(current.messages, state.last_summarized_uuid, conv.summary_seen),
    )
    if moved is not None and moved != state.server_clear_through:
        state.server_clear_through = moved
        conv.record(clearing_record(moved))
    if any(m.role == "assistant" and m.usage for m in current.messages):
        # the server's own count, with what it cleared, stands — less what the point moved since the
        # request it measured (the next response's usage will show it)
        newly = context_editing.clearable_tokens(
            current.messages, state.server_clear_through
        ) - context_editing.clearable_tokens(current.messages, conv.measured_clear_through)
        return max(0, current.tokens - conv.calibration.scale(max(0, newly)))
    unmeasured = context_editing.clearable_tokens(current.messages, state.server_clear_through)
    return max(0, current.tokens - conv.calibration.scale(unmeasured))


def request_for(conv: Conversation, ports: Ports, current: View) -> Request:
    """The main request for a view: extended thinking when on, and server-side context editing parameters
    when configured (clearing older turns' thinking too, when the request thinks), or, on a model with
    preserved thinking, the automatic clearing of old tool results up to the point ``counted`` moved."""
    req = ports.request(current.api)
    ports.thinking(req)
    req.extra_body, req.betas = context_editing.for_ports(
        ports, req.thinking is not None, current.messages, conv.state.server_clear_through
    )
    return req


def send(conv: Conversation, ports: Ports, current: View) -> Message:
    """Send the view; on prompt-too-long compact once per turn and retry (docs/compaction.md). The request names
    its predecessor and a cache miss is kept (compact.context.cache_health)."""
    req = request_for(conv, ports, current)
    if _tell_lost_loop(conv, req):  # the API would refuse it: told as text before it is sent
        current = conv.view()
        req = request_for(conv, ports, current)
    at_compaction = cache_health.chain(conv, req)
    # the compaction request of a cycle whose server's summary would lose the race started after its
    # reply: that summary goes now, over exactly what this request sends (compact.workers.preparer)
    preparer.start_with(conv, ports, current.tagged)
    shrunk, refusals = False, 0
    while True:
        try:
            reply = ports.model.stream(req, cancel=conv.cancel)
        except MaxTokensOverflow as e:
            if shrunk:
                raise
            req.max_tokens, shrunk = e.smaller_max_tokens(), True
            continue
        except PromptTooLong as e:
            if not reactive_compact(conv, ports, e):
                raise ContextLimitReached(CONTEXT_LIMIT) from None
            current = conv.view()  # what is sent now, and what the reply's usage measures
            req = request_for(conv, ports, current)
            at_compaction = cache_health.chain(conv, req)
            continue
        except RefusedBlock as e:
            # one block the API can't take (a thinking block whose signature was edited on disk, a
            # compaction block it can't read, a picture): left out of the conversation once, recorded, and
            # the request goes again; a refusal never outlives its request (issue 40)
            if refusals >= MAX_REFUSED_BLOCKS or not leave_out(conv, req, e):
                raise
            refusals += 1
            ports.emit(
                Notice(
                    f"The API refused one block of the conversation ({e.path}: {_short(e)}); it is "
                    "left out and the request goes again.",
                    "info",
                )
            )
            current = conv.view()
            req = request_for(conv, ports, current)
            at_compaction = cache_health.chain(conv, req)
            continue
        cache_health.observe(conv, reply, at_compaction)
        conv.measured_clear_through = conv.state.server_clear_through  # what this usage measured
        dropped = settle_dropped(conv, req, current, reply)
        reply = with_cleared(reply)
        after_reply(conv, ports, current, reply, req)
        sent(conv, current, dropped)
        return reply


MAX_REFUSED_BLOCKS = 8  # blocks left out for one request before its refusal is given up as it is
REFUSED_BLOCK = refused.REFUSED_BLOCK  # the transcript record of a block left out


def _short(e: RefusedBlock) -> str:
    text = str(e).split(": ", 1)[-1]
    return text if len(text) <= 160 else text[:159] + "…"


def _loop_refused(e: RefusedBlock) -> bool:
    """The 400 a tool loop earns when its latest assistant message comes back without its thinking."""
    text = str(e)
    return "must start with a thinking block" in text or "Expected `thinking` or `redacted_thinking`" in text


def leave_out(conv: Conversation, req: Request, e: RefusedBlock) -> bool:
    """Change the conversation so the block the API refused is not sent again (compact.stages.refused):
    a thinking block goes, a compaction block becomes its summary as text, a picture or a document a line
    saying it was left out, and a tool loop whose latest step lost its thinking is told as text. Found
    by what was sent (the request's block is the message's own object, or equal to it); False when it
    can't be found or is of a kind that can't be left out (a tool call, a result: the conversation would
    break). Recorded, so a resume makes the same change (``refused.apply``)."""
    n, m, inner = e.where
    try:
        sent_block = req.messages[n]["content"][m]
        if inner is not None:
            sent_block = sent_block["content"][inner]
    except (IndexError, KeyError, TypeError):
        return False
    if not isinstance(sent_block, dict):
        return False
    kind = sent_block.get("type")
    if _loop_refused(e) and inner is None and req.messages[n].get("role") == "assistant":
        return _tell_loop(conv, e, sent_block)
    if kind not in refused.REMOVABLE:
        return False

    def is_target(block: dict) -> bool:
        return block is sent_block or block == sent_block

    with conv.lock:
        for i, message in enumerate(conv.messages):
            originals = {id(b): b for b in _blocks_deep(message.content)}
            changed = refused.without(message.content, is_target)
            if changed is not None:
                target = next((b for b in originals.values() if is_target(b)), sent_block)
                conv.messages[i] = message.replace(content=changed)
                conv.record(
                    refused.record(
                        message.uuid, str(kind), e.path, _short(e), block=refused.block_key(target)
                    )
                )
                return True
    return False


LOST_THINKING = "thinkingDropped"  # set on a loaded message whose thinking the transcript left out (the key)


def _tell_lost_loop(conv: Conversation, req: Request) -> bool:
    """A request that thinks with a budget (the 4.x rules) and continues a tool loop whose latest step
    lost its thinking when it was saved (it held the key) is refused: a final assistant message must
    start with its thinking. Told as text before it is sent, and recorded, as after that refusal."""
    if (req.thinking or {}).get("type") != "enabled":
        return False
    with conv.lock:
        at = next(
            (i for i in range(len(conv.messages) - 1, -1, -1) if conv.messages[i].role == "assistant"), None
        )
        if at is None:
            return False
        last = conv.messages[at]
        if not last.tool_uses or not last.extra.get(LOST_THINKING) or binding.holds_thinking(last):
            return False
        if len(refused.loop_messages(conv.messages, at)) < 2:
            return False  # its results are not in yet: nothing continues the loop
        for i in refused.loop_messages(conv.messages, at):
            conv.messages[i] = refused.told(conv.messages[i])
        conv.record(
            refused.record(
                last.uuid, refused.LOOP, "", "its thinking was left out of the transcript (it held the key)"
            )
        )
        return True


def _blocks_deep(blocks: list) -> list[dict]:
    out = []
    for b in blocks:
        if isinstance(b, dict):
            out.append(b)
            if isinstance(b.get("content"), list):
                out += _blocks_deep(b["content"])
    return out


def _tell_loop(conv: Conversation, e: RefusedBlock, sent_block: dict) -> bool:
    """The assistant message holding ``sent_block`` called tools and came back without the thinking it
    was written with (the transcript could not keep it): the API refuses the loop going on without it,
    and it can't be put back, so the step is told as text, with its results."""
    with conv.lock:
        at = next(
            (
                i
                for i, msg in reversed(list(enumerate(conv.messages)))
                if msg.role == "assistant"
                and msg.tool_uses
                and any(b is sent_block or b == sent_block for b in msg.content)
            ),
            None,
        )
        if at is None:
            return False
        uuid = conv.messages[at].uuid
        for i in refused.loop_messages(conv.messages, at):
            conv.messages[i] = refused.told(conv.messages[i])
        conv.record(refused.record(uuid, refused.LOOP, e.path, _short(e)))
        return True


def settle_dropped(conv: Conversation, req: Request, current: View, reply: Message) -> set[str]:
    """A request sent with drop_block (its thinking failed the prefix check): the server left out the
    thinking its reply lists (``inputTransformations``, by path in the request's messages). The messages
    that held it lose their thinking from now on — a sticky decision, recorded, replayed on resume — so
    every later request is what the server saw, with no escape hatch (docs/preserved-thinking.md)."""
    dropped = (reply.extra or {}).get("inputTransformations") or []
    signatures = set()
    for item in dropped:
        where = str(item.get("path") or "").split(".") if isinstance(item, dict) else []
        if len(where) != 4 or where[0] != "messages" or not (where[1].isdigit() and where[3].isdigit()):
            continue
        i, j = int(where[1]), int(where[3])
        blocks = req.messages[i].get("content") if i < len(req.messages) else None
        if isinstance(blocks, list) and j < len(blocks) and isinstance(blocks[j], dict):
            signatures.add(blocks[j].get("signature") or blocks[j].get("data"))
    signatures.discard(None)
    uuids = [
        m.uuid
        for m in current.messages
        if m.role == "assistant"
        and any(
            b.get("signature", b.get("data")) in signatures for b in m.content if b.get("type") in THINKING
        )
    ]
    new = [u for u in uuids if u not in conv.state.thinking_dropped]
    if new:
        conv.state.thinking_dropped.update(new)
        conv.record(thinking_record(new, "drop-block"))
    return set(uuids)


def sent(conv: Conversation, current: View, dropped: set[str] | None = None) -> None:
    """Remember what a main request sent: until the next compaction point, every later request must
    extend it (compact.stages.binding). ``dropped``: messages whose thinking the server left out of it
    (drop_block): what it saw, and what the reply's thinking is bound to, is without it."""

    def seen(messages: list[Message]) -> list[Message]:
        return [binding.without_thinking(m) if dropped and m.uuid in dropped else m for m in messages]

    if conv.view_ctx is not None:
        conv.view_ctx.sent = seen(list(current.messages))
        conv.view_ctx.sent_tagged = seen(list(current.tagged))


def resumed(conv: Conversation) -> None:
    """A conversation loaded from its transcript was last sent as its view stood at its last reply: that
    is what the thinking in it is bound to, and what the next request must extend (compact.stages.binding).
    Built with the clock stopped at that reply, so a stage that decides by the time since then (the
    time-based microcompact after a long pause) makes its decision at the next request, where it counts
    as an edit of what was sent — not before, where nothing would tell it had changed anything."""
    ctx = conv.view_ctx
    if ctx is None or not any(binding.holds_thinking(m) for m in conv.messages):
        return
    stamps = [m.timestamp for m in conv.messages if m.role == "assistant" and m.timestamp]
    last = micro.parse_time(stamps[-1]) if stamps else None
    if last is None:
        return
    clock = ctx.now
    ctx.now = lambda: last
    try:
        sent(conv, conv.view())
    finally:
        ctx.now = clock


def reactive_compact(conv: Conversation, ports: Ports, error: PromptTooLong) -> bool:
    """Compact once per turn after a prompt-too-long answer (also with auto-compact off)."""
    if ports.config.disable_compact or conv.reactive_compacted:
        return False
    conv.reactive_compacted = True
    learned = conv.window.learn(error.maximum)  # the server told us its real limit
    ports.emit(Notice(refused_text(error, learned), "warning"))
    # the refusal is the server's count, and it outranks our estimate (a transcript holding one 30 MB
    # message, or usage recorded before the history was edited, can estimate far below it): a compaction
    # is due even when the view looks small (issue 40)
    limit = error.maximum or conv.window.thresholds().window
    conv.server_count = error.actual if error.actual else limit + 1
    try:
        return compactor.compact(conv, ports, "auto", reactive=True)
    finally:
        conv.server_count = None


def refused_text(error: PromptTooLong, learned: bool) -> str:
    """What the user is told before a reactive compaction: the server's refusal and what was learned."""
    sizes = f" ({error.actual:,} tokens, limit {error.maximum:,})" if error.actual and error.maximum else ""
    window = f"; the context window is taken as {error.maximum:,} tokens from now on" if learned else ""
    return f"The server refused the request as too long{sizes}{window}. Compacting the conversation."


def with_cleared(reply: Message) -> Message:
    """The reply with the tokens the server's clearing left out of its count in its usage (compact.decision.tokens
    CLEARED): the history weighs that much more than the server counted."""
    applied = context_editing.applied_edits({"context_management": reply.extra.get("contextManagement")})
    n = context_editing.cleared_tokens(applied)
    if not n or reply.usage is None:
        return reply
    return reply.replace(usage={**reply.usage, CLEARED: n})


def after_reply(conv: Conversation, ports: Ports, current: View, reply: Message, req: Request) -> None:
    """Learn from the reply's usage (calibration), record applied context edits, warn when nearly full."""
    usage = reply.usage or {}
    real = usage_total({**usage, "output_tokens": 0})
    fixed = overhead_tokens(req)  # the system prompt and tools as last sent: counted once a request
    conv.calibration.overhead = fixed
    if real:  # keep the estimate honest: the server's count of this whole request against ours
        # (what it cleared added back: our estimate is of the history as sent)
        conv.calibration.observe(
            real + int(usage.get(CLEARED) or 0), fixed + sum(m.tokens for m in current.tagged)
        )
    applied = context_editing.applied_edits({"context_management": reply.extra.get("contextManagement")})
    if applied:
        conv.record(context_edit_record(applied))
    if thresholds.level(real, conv.window.thresholds()).blocking:
        ports.notice(NEAR_FULL, "warning")


_overhead: dict[str, int] = {}


def overhead_tokens(req: Request) -> int:
    """Estimated tokens of a request's system prompt and tool definitions (the last answer is kept)."""
    key = json.dumps([req.system, in_context(req.tools)], sort_keys=True)
    if key not in _overhead:
        _overhead.clear()
        _overhead[key] = estimate_text(key)
    return _overhead[key]
