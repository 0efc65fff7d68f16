"""The MCP client: every configured server connected in the background, over the official ``mcp`` SDK.

One daemon thread runs an asyncio loop (``McpHub``); each server is a task on it that connects (stdio:
the SDK starts the process, its stderr going to a private log file; http: Streamable HTTP; sse: the old
SSE transport), initializes, lists its tools (every page) and then holds the connection open until the
hub stops or the server is reconnected. ``import mcp`` (~1 s) happens on that thread, after ``start()``,
which the REPL calls once its prompt is drawn: a slow or dead server never delays the prompt.

States: ``pending`` (not started), ``connecting``, ``connected``, ``failed`` (with one line saying why:
the process could not start, exited, timed out, answered with something that is not MCP) and
``disabled``. A failure is reported once through ``on_change`` and the session goes on without that
server's tools.

A call (``call``) runs on the loop and is waited for by the tool's thread, which polls the session's
cancel event: Ctrl-C cancels the call's task (the SDK tells the server the request was cancelled), the
connection stays. A call that outlives ``call_timeout`` is cancelled the same way. A server that dies
during a call turns the call into an error result and the server into ``failed``; ``/mcp reconnect``
starts it again.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config.mcp_servers import ServerConfig
from core.boundary import guarded, ignored
from core.private import make_private_dirs, open_private

CONNECT_TIMEOUT = 30.0  # seconds for a server to start, initialize and list its tools (MCP_TIMEOUT)
CALL_TIMEOUT = 600.0  # seconds for one tool call (MCP_TOOL_TIMEOUT)
LOG_CAP = 1_000_000  # bytes of a stdio server's stderr kept in its log per connection (a flood is dropped)
MAX_TOOLS = 2_000  # a server listing more is cut here (a flood of definitions)
POLL = 0.05


class CallFailed(Exception):
    """A call that did not come back with a result; the message says why in one sentence."""


@dataclass
class ServerState:
    config: ServerConfig
    status: str = "pending"  # pending | connecting | connected | failed | disabled
    error: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)  # name, description, inputSchema, annotations
    instructions: str = ""
    session: Any = None
    stop: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None
    connected_at: float = 0.0

    @property
    def name(self) -> str:
        return self.config.name


class McpHub:
    """The session's MCP servers (shared by /clear and /resume: the servers outlive a conversation)."""

    def __init__(
        self,
        servers: list[ServerConfig],
        *,
        log_dir: Path,
        cwd: Path,
        connect_timeout: float = CONNECT_TIMEOUT,
        call_timeout: float = CALL_TIMEOUT,
        on_change: Callable[[ServerState], None] | None = None,
    ) -> None:
        self.states: dict[str, ServerState] = {}
        for config in servers:
            state = ServerState(config)
            if config.problem:
                state.status, state.error = "failed", config.problem
            self.states[config.name] = state
        self.log_dir = log_dir
        self.cwd = cwd
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self.on_change = on_change or (lambda state: None)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)  # notified on every state change
        self.generation = 0  # bumped on every state change (so a waiter can tell)

    # --- from the session's threads ------------------------------------------------------------
    def start(self) -> None:
        """Start connecting every server, in the background (idempotent)."""
        with self._lock:
            if self._thread is not None or not self.states:
                return
            self._thread = threading.Thread(target=self._run_loop, name="mcp", daemon=True)
            self._thread.start()

    def settled(self) -> bool:
        return all(s.status not in ("pending", "connecting") for s in self.states.values())

    def wait(self, timeout: float, names: list[str] | None = None) -> bool:
        """Wait until the servers (``names``, or all) are connected or failed; False on timeout."""
        deadline = time.monotonic() + timeout
        wanted = [self.states[n] for n in (names or list(self.states)) if n in self.states]
        with self.changed:
            while any(s.status in ("pending", "connecting") for s in wanted):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
        return True

    def reconnect(self, name: str) -> None:
        """Close the server's connection (if any) and connect it again."""
        state = self.states[name]
        self.start()
        loop = self._wait_loop()
        asyncio.run_coroutine_threadsafe(self._restart(state), loop)

    def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        cancel: threading.Event,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Call a tool; its ``CallToolResult`` as a dict (``content``, ``structuredContent``, ``isError``).

        Raises CallFailed (server not connected, died, timed out, protocol error) or InterruptedError
        when ``cancel`` is set: then the call is cancelled and the connection is kept."""
        state = self.states.get(server)
        if state is None or state.status != "connected" or state.session is None:
            why = state.error if state is not None and state.error else (state.status if state else "unknown")
            raise CallFailed(f'the MCP server "{server}" is not connected ({why})')
        loop = self._wait_loop()
        future: Future[Any] = asyncio.run_coroutine_threadsafe(state.session.call_tool(tool, arguments), loop)
        limit = time.monotonic() + (timeout or self.call_timeout)
        while True:
            try:
                result = future.result(timeout=POLL)
                break
            except FutureTimeout:
                if cancel.is_set():
                    future.cancel()
                    raise InterruptedError("cancelled") from None
                if time.monotonic() > limit:
                    future.cancel()
                    raise CallFailed(
                        f'the MCP server "{server}" did not answer within {timeout or self.call_timeout:g} s; '
                        "the call was cancelled"
                    ) from None
            except Exception as e:  # noqa: BLE001 - whatever the SDK raised: one sentence for the model
                if not self._alive(state) or "connection closed" in str(e).lower():
                    self._set(state, "failed", f"it stopped during a call ({_one_line(e)})")
                    raise CallFailed(f'the MCP server "{server}" stopped during the call') from None
                raise CallFailed(
                    f'the MCP server "{server}" answered with an error: {_one_line(e)}'
                ) from None
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")

    def close(self) -> None:
        """Stop every server (stdio processes are ended by the SDK) and the loop; waits a little."""
        loop = self._loop
        if loop is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._stop_all(), loop)
        guarded(lambda: future.result(timeout=5), ignored)  # closing is best effort; the thread is a daemon
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)

    # --- on the loop -----------------------------------------------------------------------------
    def _wait_loop(self) -> asyncio.AbstractEventLoop:
        self._ready.wait(30)
        if self._loop is None:
            raise CallFailed("the MCP client could not start")
        return self._loop

    def _run_loop(self) -> None:
        _quiet_sdk_logs()
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._ready.set()
        for state in self.states.values():
            if state.status == "pending":
                loop.call_soon(self._launch, state)
        try:
            loop.run_forever()
        finally:
            try:
                loop.close()
            except RuntimeError:  # a loop closed with tasks left: nothing to do
                pass

    def _launch(self, state: ServerState) -> None:
        state.stop = asyncio.Event()
        state.task = asyncio.get_running_loop().create_task(self._serve(state, state.stop))

    async def _restart(self, state: ServerState) -> None:
        if state.stop is not None:
            state.stop.set()
        if state.task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(state.task), 5)
            except BaseException:  # noqa: BLE001 - the old connection is gone either way
                pass
        if state.config.problem:
            self._set(state, "failed", state.config.problem)
            return
        state.error = ""
        self._launch(state)

    async def _stop_all(self) -> None:
        for state in self.states.values():
            if state.stop is not None:
                state.stop.set()
        tasks = [s.task for s in self.states.values() if s.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=4)

    async def _serve(self, state: ServerState, stop: asyncio.Event) -> None:
        self._set(state, "connecting")
        try:
            async with AsyncExitStack() as stack:
                try:
                    # in this task (not wait_for's): the SDK's cancel scopes must close where they opened
                    async with asyncio.timeout(self.connect_timeout):
                        session = await self._connect(state, stack)
                except TimeoutError:
                    self._set(state, "failed", f"it did not start within {self.connect_timeout:g} s")
                    return
                state.session = session
                state.connected_at = time.monotonic()
                self._set(state, "connected")
                await stop.wait()
        except asyncio.CancelledError:
            pass
        except BaseException as e:  # noqa: BLE001 - any failure of one server is that server's state
            if state.status != "failed":
                self._set(state, "failed", _reason(e, state))
        finally:
            state.session = None
            if state.status in ("connected", "connecting"):
                self._set(state, "pending" if stop.is_set() else "failed", state.error or "")

    async def _connect(self, state: ServerState, stack: AsyncExitStack) -> Any:
        from mcp import ClientSession  # the SDK loads here, on the hub's thread (~1 s)

        read, write = await stack.enter_async_context(self._transport(state.config))
        session = await stack.enter_async_context(ClientSession(read, write))
        init = await session.initialize()
        state.instructions = str(getattr(init, "instructions", "") or "")
        tools: list[dict[str, Any]] = []
        cursor = None
        while len(tools) < MAX_TOOLS:
            from mcp.types import PaginatedRequestParams

            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools += [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        state.tools = tools[:MAX_TOOLS]
        return session

    def _transport(self, config: ServerConfig) -> Any:
        if config.transport == "http":
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            client = create_mcp_http_client(headers=dict(config.headers) or None)
            return _owning(client, streamable_http_client(config.url, http_client=client))
        if config.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(config.url, headers=dict(config.headers) or None)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=config.command,
            args=list(config.args),
            env=dict(config.env) or None,
            cwd=config.cwd or str(self.cwd),
        )
        log = self._log(config.name)
        return _owning(log, stdio_client(params, errlog=log.writer))

    def _log(self, name: str) -> _CappedLog:
        """The server's stderr: a private file (the terminal belongs to the REPL), capped per connection."""
        make_private_dirs(self.log_dir)
        return _CappedLog(self.log_dir / f"{name}.log")

    def _alive(self, state: ServerState) -> bool:
        return state.task is not None and not state.task.done() and state.status == "connected"

    def _set(self, state: ServerState, status: str, error: str = "") -> None:
        with self.changed:
            state.status, state.error = status, error
            if status != "connected":
                state.session = None
            self.generation += 1
            self.changed.notify_all()
        guarded(lambda: self.on_change(state), ignored)  # a listener's failure is not the server's


def _quiet_sdk_logs() -> None:
    """The SDK logs what a server does wrong (lines that are not JSON-RPC...) as warnings; with no handler
    configured Python would print them over the REPL. The server's state line says what matters."""
    import logging

    for name in ("mcp", "httpx", "httpx2"):
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


class _CappedLog:
    """A stdio server's stderr: the write end of a pipe handed to the server, and a thread that keeps the
    first ``cap`` bytes of each connection in the private log file and drains the rest unread, so a server
    that floods stderr neither fills the disk nor stalls on a full pipe. As an async context (``_owning``)
    it closes its write end when the connection ends; the thread stops at end of file."""

    def __init__(self, path: Path, cap: int = LOG_CAP) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self.path = path
        threading.Thread(target=self._drain, args=(read_fd, cap), name="mcp-stderr", daemon=True).start()

    def _drain(self, read_fd: int, cap: int) -> None:
        kept = 0
        out = open_private(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            while chunk := os.read(read_fd, 65_536):
                if kept >= cap:
                    continue
                piece = chunk[: cap - kept]
                os.write(out, piece)
                kept += len(piece)
                if kept >= cap:
                    os.write(
                        out,
                        f"\n[compact-agent: the rest of this connection's stderr is dropped past {cap:,} bytes]\n".encode(),
                    )
        finally:
            os.close(read_fd)
            os.close(out)

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: Any) -> None:
        self.writer.close()


class _owning:
    """An async context that closes ``client`` after ``inner`` (the http transport borrows the client; a stdio
    server's stderr log is closed when its connection ends)."""

    def __init__(self, client: Any, inner: Any) -> None:
        self.client, self.inner = client, inner

    async def __aenter__(self) -> Any:
        await self.client.__aenter__()
        return await self.inner.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.inner.__aexit__(*exc)
        finally:
            await self.client.__aexit__(None, None, None)


def _reason(e: BaseException, state: ServerState) -> str:
    """One line for a failed connection (an ExceptionGroup is opened to its first real cause)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    if isinstance(e, FileNotFoundError) and not state.config.remote:
        return f"its command was not found ({state.config.command})"
    if isinstance(e, PermissionError) and not state.config.remote:
        return f"its command can't be run ({state.config.command})"
    return _one_line(e)


def _one_line(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = " ".join(str(e).split())[:200]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
