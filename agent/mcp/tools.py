"""An MCP server's tool as one of ours (``McpTool``), what its result becomes, and the search over them.

Names are ``mcp__<server>__<tool>`` (characters the API refuses become ``_``; a name past 64 characters
is cut and given a short hash so it stays unique). Descriptions are capped at ``DESCRIPTION_CAP``
characters: a server's prose is paid for by every request that loads the tool.

A result keeps both halves the server sent: every ``content`` block (text; images as image blocks;
audio, resource links and embedded resources as a line of text saying what they are) and, when it adds
something the text does not already say, ``structuredContent`` as JSON. Its size is counted (text by
the tokenizer, each image as ``MEDIA_TOKENS``): past ``WARN_TOKENS`` the UI line says so; past
``cap_tokens`` (``MAX_MCP_OUTPUT_TOKENS``, 25,000 by default) the whole text goes to a private file in
the session's ``tool-results/`` and the model gets a ``<persisted-output>`` preview naming it (images
are then saved beside it and named, not sent). Smaller results still pass through the pipeline's
tool-result budget like any other tool's.

``ToolSearch`` (docs/permissions.md) finds deferred tools for the model when the API's own tool-search tool is
not used: ranked over names (3x), descriptions and parameter names and descriptions, with
``select:a,b`` to load tools by name; its result is ``tool_reference`` blocks, which make the API
expand those tools' definitions for the rest of the conversation.
"""

from __future__ import annotations

import base64
import json
import math
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compact.stages.budget import persisted_block
from core import mcp_names
from core.declaration import Declaration, declare
from core.mcp_names import tool_name
from core.private import make_private_dirs, write_private
from core.tokens import MEDIA_TOKENS, estimate_text
from tools.base import ToolContext, ToolError, ToolResult

PREFIX = "mcp__"
NAME_LIMIT = 64
DESCRIPTION_CAP = 2_048
WARN_TOKENS = 10_000
CAP_TOKENS = 25_000
SEARCH_NAME = "ToolSearch"
DEFAULT_RESULTS = 5
MAX_RESULTS = 20


def split_name(name: str) -> tuple[str, str] | None:
    """(server, rest) of an ``mcp__server__tool`` name; None for other tools."""
    return mcp_names.split(name)


def capped(text: str, cap: int = DESCRIPTION_CAP) -> str:
    return text if len(text) <= cap else text[: cap - 1].rstrip() + "…"


@dataclass
class McpTool:
    """One server tool, callable through the hub. ``read_only`` is never taken from the server's
    annotations for permissions (they only say what the server claims); it only lets calls overlap."""

    name: str
    server: str
    remote_name: str
    description: str
    input_schema: dict[str, Any]
    call: Callable[[str, str, dict[str, Any], Any], dict[str, Any]]
    read_only: bool = False
    cap_tokens: int = CAP_TOKENS

    @property
    def declaration(self) -> Declaration:
        """A server's tool runs something we can't see: whatever its annotations claim, the engine asks by
        its MCP rules (a claim never widens what a rule allows); ``readOnlyHint`` only lets calls overlap."""
        return Declaration("runs", records="outcome", parallel=self.read_only)

    @classmethod
    def from_listing(
        cls, server: str, listed: dict[str, Any], call: Callable[..., dict[str, Any]], cap_tokens: int
    ) -> McpTool:
        schema = listed.get("inputSchema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            schema = {"type": "object", "properties": {}}
        annotations = listed.get("annotations") or {}
        title = listed.get("title") or annotations.get("title") or ""
        description = str(listed.get("description") or title or f"{listed['name']} (from {server})")
        tool = cls(
            name=tool_name(server, str(listed["name"])),
            server=server,
            remote_name=str(listed["name"]),
            description=capped(description),
            input_schema=schema,
            call=call,
            read_only=annotations.get("readOnlyHint") is True,
            cap_tokens=cap_tokens,
        )
        declare(tool.name, tool.declaration)
        return tool

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            raw = self.call(self.server, self.remote_name, args, ctx.cancel)
        except InterruptedError:
            raise ToolError("Interrupted by user: the MCP call was cancelled.") from None
        except Exception as e:  # noqa: BLE001 - the hub's CallFailed and anything else: one sentence
            raise ToolError(f"{e}. Try again later, or do without this tool.") from None
        return result_of(raw, ctx, self.name, self.cap_tokens)


def result_of(raw: dict[str, Any], ctx: ToolContext, name: str, cap_tokens: int = CAP_TOKENS) -> ToolResult:
    """A ``CallToolResult`` (as a dict) as the model sees it, within the cap."""
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for block in raw.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "image" and block.get("data"):
            images.append(
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": block.get("mimeType", "image/png"),
                        "data": block["data"],
                    },
                }
            )
        else:
            texts.append(_describe(block))
    structured = raw.get("structuredContent")
    if structured is not None and not _said(structured, texts):
        texts.append("Structured content:\n" + json.dumps(structured, ensure_ascii=False, indent=1))
    text = "\n".join(t for t in texts if t)
    tokens = estimate_text(text) + MEDIA_TOKENS * len(images)
    is_error = raw.get("isError") is True
    summary = f"{tokens:,} tokens" + (" (large)" if tokens > WARN_TOKENS else "")
    if tokens > cap_tokens:
        return _persisted(text, images, ctx, name, tokens, is_error)
    if not images:
        return ToolResult(text or f"({name} completed with no output)", is_error=is_error, summary=summary)
    blocks: list[dict[str, Any]] = ([{"type": "text", "text": text}] if text else []) + images
    return ToolResult(blocks, is_error=is_error, summary=summary)


def _persisted(
    text: str, images: list[dict[str, Any]], ctx: ToolContext, name: str, tokens: int, is_error: bool
) -> ToolResult:
    folder = ctx.session_dir / "tool-results"
    make_private_dirs(folder)
    stem = f"{name}-{uuid.uuid4().hex[:12]}"
    saved = []
    for i, image in enumerate(images):
        source = image["source"]
        suffix = source["media_type"].rsplit("/", 1)[-1][:5] or "bin"
        path = folder / f"{stem}-image{i + 1}.{suffix}"
        try:
            data = base64.b64decode(source["data"], validate=False)
        except ValueError:
            continue
        write_private(path, "")  # created 0600 first, then filled
        path.write_bytes(data)
        saved.append(str(path))
    if saved:
        text += "\n" + "\n".join(f"[image saved to {p}]" for p in saved)
    path = write_private(folder / f"{stem}.txt", text)
    note = (
        f"This MCP result ({tokens:,} tokens) is larger than the {CAP_TOKENS:,}-token cap for one result, "
        "so it was saved to a file; read parts of it with Read (offset/limit) or Grep."
    )
    return ToolResult(
        f"{note}\n{persisted_block(text, path)}",
        is_error=is_error,
        summary=f"{tokens:,} tokens, saved to disk",
    )


def _describe(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "resource_link":
        return f"[resource link: {block.get('uri', '')} {block.get('name', '')}]".rstrip()
    if kind == "resource":
        resource = block.get("resource") or {}
        if "text" in resource:
            return f"[resource {resource.get('uri', '')}]\n{resource['text']}"
        size = len(str(resource.get("blob", ""))) * 3 // 4
        return f"[binary resource {resource.get('uri', '')}, {resource.get('mimeType', '')}, {size:,} bytes]"
    if kind == "audio":
        size = len(str(block.get("data", ""))) * 3 // 4
        return f"[audio, {block.get('mimeType', '')}, {size:,} bytes: not shown]"
    return f"[{kind} content not shown]"


def _said(structured: Any, texts: list[str]) -> bool:
    """Whether a text block already carries the structured value (servers often mirror it)."""
    for text in texts:
        try:
            if json.loads(text) == structured:
                return True
        except (ValueError, RecursionError):
            pass
        if isinstance(structured, dict) and list(structured) == ["result"] and structured["result"] == text:
            return True
    if isinstance(structured, dict) and list(structured) == ["result"]:
        inner = structured["result"]
        if isinstance(inner, list) and all(isinstance(b, dict) and "type" in b for b in inner):
            return True  # the content blocks themselves, repeated
        if not isinstance(inner, (dict, list)) and str(inner) in texts:
            return True
    return False


# --- search ------------------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)  # camelCase -> camel case
    return _WORD.findall(spaced.lower())


def _stem(word: str) -> str:
    """A light stem, so "releases", "release" and "released" meet: plurals, -ing, -ed, a final e."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("sses", "shes", "ches", "xes")):
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    elif len(word) > 5 and word.endswith(("ing", "ed")):
        word = word[:-3] if word.endswith("ing") else word[:-2]
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def _fields(schema: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(name words, description words, parameter words) of a tool's API schema."""
    params = schema.get("input_schema", {}).get("properties") or {}
    param_words = [
        w
        for key, spec in params.items()
        for w in words(key) + words(str(spec.get("description", "")) if isinstance(spec, dict) else "")
    ]
    return words(schema["name"]), words(schema.get("description", "")), param_words


def rank(query: str, schemas: list[dict[str, Any]], limit: int) -> list[str]:
    """The names of the best matches for ``query`` (BM25-like: rarer words weigh more; name hits 3x)."""
    terms = [_stem(w) for w in words(query) if w not in ("mcp", "tool", "tools", "the", "a", "an", "to")]
    if not terms or not schemas:
        return []
    docs = []
    for schema in schemas:
        name, desc, params = _fields(schema)
        docs.append(([_stem(w) for w in name], [_stem(w) for w in desc], [_stem(w) for w in params]))
    n = len(docs)
    df = {t: sum(1 for d in docs if t in d[0] or t in d[1] or t in d[2]) for t in set(terms)}
    scored = []
    for schema, (name, desc, params) in zip(schemas, docs):
        score = 0.0
        for t in terms:
            if not df[t]:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            tf = 3.0 * name.count(t) + min(desc.count(t), 3) + 0.5 * min(params.count(t), 2)
            score += idf * tf / (tf + 1.2)
        if score > 0:
            scored.append((score, schema["name"]))
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [name for _, name in scored[:limit]]


class ToolSearchTool:
    """Our client-side tool search (docs/permissions.md)."""

    name = SEARCH_NAME
    declaration = Declaration("nothing", key_arg="query", records="nothing", parallel=True)
    input_schema = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": 'Words describing the capability you need, or "select:<name>,<name>" to '
                "load tools by their exact names.",
            },
            "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS},
        },
        "required": ["query"],
    }

    def __init__(
        self,
        servers: list[str],
        deferred: Callable[[], list[dict[str, Any]]],
        waiting: Callable[[], list[str]],
    ) -> None:
        self.deferred = deferred  # the schemas the search runs over
        self.waiting = waiting  # servers still connecting
        listed = ", ".join(servers[:30]) + (", …" if len(servers) > 30 else "")
        self.description = (
            "Finds tools from the connected MCP servers, which are not loaded until you look them up "
            f"(servers: {listed}). Call it with a few words for the capability you need; the tools it "
            "returns become callable at once, by their full names (mcp__<server>__<tool>). Search "
            "again with other words if none fits."
        )

    def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = str(args.get("query", "")).strip()
        limit = min(int(args.get("max_results") or DEFAULT_RESULTS), MAX_RESULTS)
        schemas = self.deferred()
        if query.startswith("select:"):
            wanted = [w.strip() for w in query[len("select:") :].split(",") if w.strip()]
            known = {s["name"] for s in schemas}
            found = [w for w in wanted if w in known]
        else:
            found = rank(query, schemas, limit)
        if found:
            blocks = [{"type": "tool_reference", "tool_name": name} for name in found]
            return ToolResult(blocks, summary=", ".join(found))
        pending = self.waiting()
        more = f" Still connecting: {', '.join(pending)}; search again in a moment." if pending else ""
        return ToolResult(
            f'No MCP tool matches "{query}".{more} Try other words, or do without.', summary="no match"
        )


declare(SEARCH_NAME, ToolSearchTool.declaration)
