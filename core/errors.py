"""The agent's own exceptions. The CLI turns each into one clear line; tool failures never come here
(tools raise tools.base.ToolError, which the tool runner turns into an ``is_error`` tool result).

    AgentError
    ├── SettingsError          a settings file or value is wrong (names the file and the key)
    ├── SessionError           a session that can't be found or read
    ├── Interrupted            the user pressed Ctrl-C / Esc
    ├── ContextLimitReached    the context is at the blocking limit and compaction can't help
    ├── CompactionError        a compaction could not be made (the conversation is left as it was)
    ├── CollapseError          context collapse could not summarise a span
    ├── SnipError              a Snip call that can't be carried out (the message tells the model why)
    └── ModelError             the Messages API failed after retries
        ├── PromptTooLong      "prompt is too long: A tokens > B maximum"
        ├── MaxTokensOverflow  "input length and max_tokens exceed context limit: A + B > C"
        └── ThinkingBindingMismatch  a thinking block whose prefix changed ("bound to a different
                               conversation"): retried once with drop_block (agent.runtime.sdk)
"""

from __future__ import annotations

import re
from typing import Any


class AgentError(Exception):
    exit_code = 1


class SessionError(AgentError):
    exit_code = 1


class SettingsError(AgentError):
    exit_code = 2


class Interrupted(AgentError):
    exit_code = 130

    def __init__(self, message: str = "interrupted", usage: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.usage = usage  # what a reply cut short had already used (billed all the same), if known


CONTEXT_LIMIT = "Context limit reached · /compact or /clear to continue"


class ContextLimitReached(AgentError):
    def __init__(self, message: str = CONTEXT_LIMIT) -> None:
        super().__init__(message)


class CompactionError(AgentError):
    """A compaction could not be made; the conversation is left exactly as it was."""


class CollapseError(AgentError):
    """A span could not be summarised."""


class SnipError(AgentError):
    """A snip request that can't be carried out; the message tells the model why."""


class ModelError(AgentError):
    def __init__(self, message: str, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class PromptTooLong(ModelError):
    def __init__(self, message: str, actual: int | None = None, maximum: int | None = None):
        super().__init__(message, status=400)
        self.actual = actual
        self.maximum = maximum

    @property
    def gap(self) -> int | None:
        if self.actual is None or self.maximum is None:
            return None
        return self.actual - self.maximum


class MaxTokensOverflow(ModelError):
    def __init__(self, message: str, input_tokens: int, max_tokens: int, limit: int):
        super().__init__(message, status=400)
        self.input_tokens = input_tokens
        self.max_tokens = max_tokens
        self.limit = limit

    def smaller_max_tokens(self) -> int:
        return max(3_000, self.limit - self.input_tokens - 1_000)


class ThinkingBindingMismatch(ModelError):
    """Preserved thinking's prefix check failed: something before the block at ``path`` changed after the
    model wrote it (docs/preserved-thinking.md)."""

    def __init__(self, message: str, path: str):
        super().__init__(message, status=400)
        self.path = path


_PTL = re.compile(r"prompt is too long:\s*(\d+)\s*tokens\s*>\s*(\d+)", re.I)
_OVERFLOW = re.compile(
    r"input length and `?max_tokens`? exceed context limit:\s*(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)", re.I
)


_BOUND = re.compile(
    r"^(messages\.\d+\.content\.\d+): Invalid `\w+` in `\w+` block\. "
    r"The block is bound to a different conversation\."
)


class RefusedBlock(ModelError):
    """The API refused one block of the request, named by its place (``messages.3.content.0``, or
    ``messages.3.content.0.content.1`` inside a tool result): a thinking block whose signature doesn't
    verify, a compaction block it can't read, a picture. ``where``: (message, block, inner block or None)
    of the request's ``messages``."""

    def __init__(self, message: str, path: str, where: tuple[int, int, int | None]):
        super().__init__(message, status=400)
        self.path = path
        self.where = where


_REFUSED_BLOCK = re.compile(r"^(messages\.(\d+)\.content\.(\d+)(?:\.content\.(\d+))?)\b")


class RefusedSetting(ModelError):
    """The API refused a setting of the request the model doesn't take: a thinking type (``setting`` is
    ``enabled``, ``disabled``, ``adaptive`` or ``between_tools``) or an effort (``effort``). Raised when
    the Models API said the model takes it and the model doesn't: the client stops believing that and
    sends the request again without it (agent.runtime.sdk)."""

    def __init__(self, message: str, setting: str):
        super().__init__(message, status=400)
        self.setting = setting


_REFUSED_SETTING = (
    re.compile(
        r'"thinking\.type\.(enabled|disabled|adaptive|between_tools)" is not supported for this model'
    ),
    re.compile(r"thinking\.type: Input tag '(enabled|disabled|adaptive|between_tools)'"),
    re.compile(r"thinking\.(budget_tokens)\b.*(?:not supported|not allowed)"),
    re.compile(r"^output_config\.(effort)\b"),
)


def classify_bad_request(message: str) -> ModelError | None:
    """Recognise the context-size errors and preserved thinking's prefix check in a 400
    invalid_request_error's message."""
    if m := _BOUND.match(message):
        return ThinkingBindingMismatch(message, m.group(1))
    if m := _OVERFLOW.search(message):
        a, b, c = (int(x) for x in m.groups())
        return MaxTokensOverflow(message, a, b, c)
    if m := _PTL.search(message):
        return PromptTooLong(message, int(m.group(1)), int(m.group(2)))
    if "prompt is too long" in message.lower():
        return PromptTooLong(message)
    for pattern in _REFUSED_SETTING:
        if m := pattern.search(message):
            return RefusedSetting(message, "enabled" if m.group(1) == "budget_tokens" else m.group(1))
    if m := _REFUSED_BLOCK.match(message):
        inner = int(m.group(4)) if m.group(4) is not None else None
        return RefusedBlock(message, m.group(1), (int(m.group(2)), int(m.group(3)), inner))
    return None


def describe(e: BaseException) -> str:
    """An exception in a few words for a notice: its message, or its type when it has none."""
    return str(e).strip() or type(e).__name__
