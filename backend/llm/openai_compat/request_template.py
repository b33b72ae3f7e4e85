"""`TemplatedOpenAI`: the `openai` SDK client, building its chat completions
request once rather than for every call.

The SDK builds each request from scratch — its options model, the URL
parsed and joined to the base URL, the headers merged from five mappings
and checked, then httpx's own merging of them all — about 0.23 ms of CPU a
call, a fifth to a quarter of all the client spends on one. Yet every chat
completions request this client sends is the same request but for its body.
So the first one the SDK builds is kept as a `RequestTemplate`, and each
later request with the same options (but its content) is the template with
its own body and `Content-Length`: the same method, URL, headers in the same
order, and timeouts as the SDK would have built. Everything else is the
SDK's, unchanged: `request` still sends it (through its aiohttp transport),
and turns a failure into its exceptions.

What the template is for is its key: the options that shape a request (but
its content), the retry count, the API key and the base URL; a request with
another key is built by the SDK and becomes the template. A request the
template cannot stand for is always built by the SDK: one that is not a
non-empty body of bytes; one with query parameters, JSON or files; one from
an SDK client that authenticates otherwise than by its key (a key provider,
workload identity, a provider's own signing), or whose HTTP client has kept
cookies from an answer (the SDK adds them to every request).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx2
import openai
from openai._models import FinalRequestOptions
from typing_extensions import override

__all__ = ["RequestTemplate", "TemplatedOpenAI"]

_NOT_GIVEN = "not given"
"""A key's timeout when the options set none (each `NotGiven` is its own)."""

_CHAT_COMPLETIONS = FinalRequestOptions.construct(
    method="post",
    url="/chat/completions",
    json_data=None,
    files=None,
    headers={"Content-Type": "application/json"},
)
"""What `post` would make of a chat completions POST, but its content; each
call's options are a copy with its body."""


@dataclass(frozen=True, slots=True)
class RequestTemplate:
    """A request the SDK built, less its body: made again with another body."""

    key: tuple[object, ...]
    method: str
    url: httpx2.URL
    headers: httpx2.Headers
    """Every header but `Content-Length`, in the SDK's order."""
    extensions: dict[str, Any]

    @classmethod
    def of(cls, key: tuple[object, ...], request: httpx2.Request) -> RequestTemplate:
        headers = httpx2.Headers(request.headers, encoding=request.headers.encoding)
        del headers["Content-Length"]
        return cls(key, request.method, request.url, headers, request.extensions)

    def request(self, body: bytes) -> httpx2.Request:
        """The request with `body`: as the SDK builds it, `Content-Length`
        last."""
        request = httpx2.Request(
            self.method,
            self.url,
            headers=self.headers,
            stream=httpx2.ByteStream(body),
            extensions=self.extensions,
        )
        request.headers.encoding = self.headers.encoding
        request.headers["Content-Length"] = str(len(body))
        request.read()
        return request


class TemplatedOpenAI(openai.AsyncOpenAI):
    """`openai.AsyncOpenAI`, whose requests are built from a `RequestTemplate`
    when one stands for them."""

    _template: RequestTemplate | None = None

    @property
    @override
    def user_agent(self) -> str:
        """The SDK client's own, not named after this class."""
        return f"{openai.AsyncOpenAI.__name__}/Python {self._version}"

    async def post_chat_completions(
        self, body: bytes, *, stream: bool
    ) -> httpx2.Response:
        """POST `body` (JSON) to chat completions, as `post` would, and return
        the raw HTTP response (with `stream`, unread)."""
        options = _CHAT_COMPLETIONS.model_copy(update={"content": body})
        return await self.request(httpx2.Response, options, stream=stream)

    @override
    def _build_request(
        self, options: FinalRequestOptions, *, retries_taken: int = 0
    ) -> httpx2.Request:
        content = options.content
        key = self._template_key(options, retries_taken)
        if key is None or not isinstance(content, bytes) or not content:
            return super()._build_request(options, retries_taken=retries_taken)
        template = self._template
        if template is not None and template.key == key:
            return template.request(content)
        request = super()._build_request(options, retries_taken=retries_taken)
        self._template = RequestTemplate.of(key, request)
        return request

    def _template_key(
        self, options: FinalRequestOptions, retries_taken: int
    ) -> tuple[object, ...] | None:
        """What a template for `options` stands for (but their content); None
        if none can."""
        if not self._by_key() or options.params or options.files:
            return None
        if options.json_data is not None or options.extra_json is not None:
            return None
        if self._client.cookies:
            return None
        headers = options.headers
        timeout = options.timeout
        return (
            options.method,
            options.url,
            tuple(headers.items()) if isinstance(headers, dict) else None,
            _NOT_GIVEN if isinstance(timeout, openai.NotGiven) else timeout,
            tuple(options.security.items()),
            retries_taken,
            self.api_key,
            self.base_url,
        )

    def _by_key(self) -> bool:
        """Whether requests authenticate by the API key alone (the headers
        the template keeps), with no per-request step of the SDK's own."""
        return (
            self._api_key_provider is None
            and self._provider_runtime is None
            and self._workload_identity_auth is None
            and self._idempotency_header is None
        )
