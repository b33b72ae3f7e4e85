"""The static side of MCP tools: the config file, and the pure translations
from MCP to loopwire (tool names, input schemas, results). No I/O but reading
the file; the live connections are in `backend.tools.mcp`.

The file is the shape most MCP clients use::

    {
      "mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some-server"],
                  "env": {"TOKEN": "${FILES_TOKEN}"}, "cwd": "/srv"},
        "search": {"url": "http://127.0.0.1:8931/mcp",
                   "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"}}
      }
    }

A server has either `command` (stdio: a subprocess speaking MCP on its
stdin/stdout) or `url` (streamable HTTP). Loopwire's own keys per server:

- `enabled` (default true);
- `timeout_s`: per tool call, overriding the executor's default;
- `startup_timeout_s` (default 15): connect + handshake + tool listing;
- `protocol`: "auto" (default: probe the 2026 `server/discover`, fall back to
  the `initialize` handshake) or "legacy" (the handshake straight away);
- `effects`: `{"default": {...}, "tools": {"<MCP tool name>": {...}}}` with
  the keys `read_only`, `idempotent`, `requires_approval`. A tool's entry
  overrides the server default key by key;
- `trust_annotations` (default false): let the server's own hints
  (`readOnlyHint`, `idempotentHint`) fill the keys `effects` leaves unset.

Anything still unset is the safe default: mutating, not idempotent, and
asking the user for approval unless the tool is read-only (so a tool nobody
vouched for never runs unasked). `requires_approval: false` on a tool that
is not read-only still asks once the run has read untrusted content, and
every MCP tool's result counts as untrusted (it comes from another system).
The server's hints are untrusted by default, as the MCP specification says
they must be for a server you do not control; `destructiveHint` and
`openWorldHint` are never used.

`${VAR}` in `env` and `headers` values is replaced from the process
environment; a missing variable is an error unless the server is disabled.
A relative `cwd` is relative to the config file's directory. A stdio server
inherits only the SDK's safe variables (HOME, LOGNAME, PATH, SHELL, TERM,
USER) plus its `env`. `type` ("stdio" / "http") is accepted for
compatibility with other clients' files and must agree with command/url.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import mcp_types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from backend.errors import ConfigError, ToolError
from backend.tools.base import ToolEffect

log = logging.getLogger(__name__)

SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
_ENV_REF = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DEFAULT_STARTUP_TIMEOUT_S = 15.0
MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

TransportType = Literal["stdio", "http", "streamable-http", "streamableHttp", "sse"]


class EffectSpec(BaseModel):
    """Effect keys as written; None = inherit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read_only: bool | None = None
    idempotent: bool | None = None
    requires_approval: bool | None = None


class EffectsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default: EffectSpec = EffectSpec()
    tools: dict[str, EffectSpec] = Field(default_factory=dict)


class MCPServerConfig(BaseModel):
    """One MCP server: how to reach it and what its tools may do."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SERVER_NAME.pattern)
    type: TransportType | None = None
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    timeout_s: float | None = Field(default=None, gt=0)
    startup_timeout_s: float = Field(default=DEFAULT_STARTUP_TIMEOUT_S, gt=0)
    protocol: Literal["auto", "legacy"] = "auto"
    effects: EffectsConfig = EffectsConfig()
    trust_annotations: bool = False

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if self.type == "sse":
            raise ValueError("the SSE transport is not supported; use streamable HTTP")
        if (self.command is None) == (self.url is None):
            raise ValueError("needs exactly one of 'command' (stdio) or 'url' (HTTP)")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("'args', 'env' and 'cwd' apply to 'command', not 'url'")
        if self.command is not None and self.headers:
            raise ValueError("'headers' apply to 'url', not 'command'")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("'url' must start with http:// or https://")
        kind = "command" if self.command is not None else "url"
        if self.type is not None and (self.type == "stdio") != (kind == "command"):
            raise ValueError(f"'type' {self.type!r} does not go with '{kind}'")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def effect_for(
        self, tool_name: str, hints: mcp_types.ToolAnnotations | None = None
    ) -> ToolEffect:
        """The effect of one of this server's tools (by its MCP name): each
        key from its `effects` entry, else the server default, else (when
        trusted) the server's `hints`, else the safe default."""
        layers = self._layers(tool_name, hints)

        def pick(key: str) -> bool | None:
            values = (getattr(layer, key) for layer in layers)
            return next((v for v in values if v is not None), None)

        read_only = bool(pick("read_only"))
        asks = pick("requires_approval")
        return ToolEffect(
            read_only=read_only,
            idempotent=bool(pick("idempotent")),
            requires_approval=not read_only if asks is None else asks,
            timeout_s=self.timeout_s,
        )

    def asks_by_default(
        self, tool_name: str, hints: mcp_types.ToolAnnotations | None = None
    ) -> bool:
        """Whether the tool asks for approval only because nothing said."""
        unset = all(
            layer.requires_approval is None for layer in self._layers(tool_name, hints)
        )
        return unset and self.effect_for(tool_name, hints).asks(untrusted_read=False)

    def _layers(
        self, tool_name: str, hints: mcp_types.ToolAnnotations | None
    ) -> list[EffectSpec]:
        layers = [self.effects.tools.get(tool_name, EffectSpec()), self.effects.default]
        if self.trust_annotations and hints is not None:
            layers.append(_from_hints(hints))
        return layers


def _from_hints(hints: mcp_types.ToolAnnotations) -> EffectSpec:
    return EffectSpec(read_only=hints.read_only_hint, idempotent=hints.idempotent_hint)


class _ConfigFile(BaseModel):
    model_config = ConfigDict(extra="ignore")  # other clients keep more here

    mcpServers: dict[str, Any]


def load_mcp_config(
    path: str | Path, *, environ: Mapping[str, str] | None = None
) -> list[MCPServerConfig]:
    """The servers in `path`, in file order; `ConfigError` says what is wrong."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_unique)
    except OSError as exc:
        raise ConfigError(f"cannot read MCP config {path}: {exc.strerror}") from exc
    except _DuplicateKey as exc:
        raise ConfigError(f"MCP config {path}: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"MCP config {path} is not valid JSON: {exc}") from exc
    return parse_mcp_config(
        raw, base_dir=path.parent, environ=environ, source=str(path)
    )


class _DuplicateKey(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (JSON would keep the last)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(f"the key {key!r} is given twice")
        result[key] = value
    return result


def parse_mcp_config(
    raw: Any,
    *,
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    source: str = "MCP config",
) -> list[MCPServerConfig]:
    """Validate an already-decoded config document."""
    try:
        document = _ConfigFile.model_validate(raw)
    except ValidationError as exc:
        detail = _first_error(exc)
        raise ConfigError(
            f'{source}: expected {{"mcpServers": {{...}}}} ({detail})'
        ) from None
    env = os.environ if environ is None else environ
    return [
        _server(name, entry, base_dir, env, source)
        for name, entry in document.mcpServers.items()
    ]


def _server(
    name: str,
    entry: Any,
    base_dir: Path | None,
    environ: Mapping[str, str],
    source: str,
) -> MCPServerConfig:
    where = f"{source}: MCP server {name!r}"
    if not SERVER_NAME.fullmatch(name):
        raise ConfigError(f"{where}: the name must be 1-32 characters of [A-Za-z0-9_-]")
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected an object, got {type(entry).__name__}")
    if "name" in entry:
        raise ConfigError(f"{where}: 'name' is not a server key (the key is the name)")
    try:
        config = MCPServerConfig.model_validate({**entry, "name": name})
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_first_error(exc)}") from None
    updates: dict[str, Any] = {}
    if config.enabled:  # a disabled server needs none of its secrets
        updates["env"] = _expand_all(config.env, "env", where, environ)
        updates["headers"] = _expand_all(config.headers, "headers", where, environ)
    if config.cwd is not None and base_dir is not None:
        updates["cwd"] = os.path.normpath(base_dir.absolute() / config.cwd)
    return config.model_copy(update=updates)


def _expand_all(
    values: dict[str, str], field: str, where: str, environ: Mapping[str, str]
) -> dict[str, str]:
    return {
        key: _expand(value, f"{where}: {field}.{key}", environ)
        for key, value in values.items()
    }


def _expand(value: str, where: str, environ: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        var = match.group(1)
        if not _ENV_NAME.fullmatch(var):
            raise ConfigError(f"{where}: ${{{var}}} is not a valid variable reference")
        if var not in environ:
            raise ConfigError(f"{where}: references ${{{var}}}, which is not set")
        return environ[var]

    return _ENV_REF.sub(replace, value)


def _first_error(exc: ValidationError) -> str:
    """The first problem, as `field.path: message`."""
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in err["loc"])
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown key"
    return f"{loc}: {message}" if loc else message


# --- names and schemas -------------------------------------------------------------


def tool_names(
    pairs: Sequence[tuple[str, str]], reserved: Collection[str] = ()
) -> list[str]:
    """Loopwire names for (server, MCP tool) pairs: safe, <= 64 chars, unique.

    `<server>__<tool>` with anything outside [A-Za-z0-9_-] replaced by `_`;
    too long -> cut, with a hash of the full name. Deterministic: on a
    collision the later pair (in the given order) gets `_2`, `_3`, ... and a
    warning is logged.
    """
    taken = set(reserved)
    names: list[str] = []
    for server, tool in pairs:
        base = _UNSAFE.sub("_", f"{server}__{tool}")
        wanted = name = _fit(base)
        n = 2
        while name in taken:
            name, n = _fit(base, f"_{n}"), n + 1
        if name != wanted:
            log.warning(
                "MCP tool %r of server %r is named %r: %r is taken",
                tool,
                server,
                name,
                wanted,
            )
        taken.add(name)
        names.append(name)
    return names


def _fit(base: str, suffix: str = "") -> str:
    if len(base) + len(suffix) <= MAX_TOOL_NAME:
        return base + suffix
    digest = hashlib.sha256(base.encode()).hexdigest()[:8]
    keep = MAX_TOOL_NAME - len(suffix) - len(digest) - 1
    return f"{base[:keep]}_{digest}{suffix}"


def object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """An MCP input schema as an object schema (what models expect); a copy."""
    result = copy.deepcopy(schema)
    kind = result.setdefault("type", "object")
    if kind != "object":
        log.warning("MCP input schema of type %r replaced by an empty object", kind)
        return {"type": "object", "properties": {}}
    if not isinstance(result.get("properties"), dict):
        result["properties"] = {}
    result.pop("title", None)
    return result


# --- results -------------------------------------------------------------------------


def result_value(result: mcp_types.CallToolResult) -> Any:
    """A tool result as a JSON-able value; an error result raises `ToolError`.

    `structuredContent` when there is some; else the text blocks joined (a
    JSON object or array in them decoded); with non-text blocks, a list of
    the parts, binary ones summarised without their data.
    """
    if result.is_error:
        texts = [b.text for b in result.content if isinstance(b, mcp_types.TextContent)]
        raise ToolError("\n".join(texts) or "the MCP tool failed without a message")
    if result.structured_content is not None:
        return result.structured_content
    parts = [_part(block) for block in result.content]
    if not parts:
        return None
    if all(isinstance(part, str) for part in parts):
        return _maybe_json("\n".join(parts))
    return parts


def _part(block: mcp_types.ContentBlock) -> Any:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return {
            "type": block.type,
            "mimeType": block.mime_type,
            "bytes": _size(block.data),
        }
    if isinstance(block, mcp_types.ResourceLink):
        link = {"type": block.type, "uri": block.uri, "name": block.name}
        return link | ({"mimeType": block.mime_type} if block.mime_type else {})
    resource = block.resource
    summary: dict[str, Any] = {"type": block.type, "uri": resource.uri}
    if resource.mime_type:
        summary["mimeType"] = resource.mime_type
    if isinstance(resource, mcp_types.TextResourceContents):
        return summary | {"text": resource.text}
    return summary | {"bytes": _size(resource.blob)}


def _size(base64_data: str) -> int:
    return len(base64_data) * 3 // 4 - base64_data.count("=", -2)


def _maybe_json(text: str) -> Any:
    """JSON objects and arrays decoded; any other text as it is."""
    if not text.lstrip().startswith(("{", "[")):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text
