"""`OpenAIEmbedder`: the `Embedder` of data sources over the `/v1/embeddings`
endpoint of any OpenAI-compatible server (the `openai` SDK's `AsyncOpenAI`),
in batches of `batch_size` texts per request, floats asked for explicitly
(not every server speaks base64). Failures are `LLMError`s that name
neither URL nor key.
"""

from __future__ import annotations

from collections.abc import Sequence

import openai

from backend.errors import LLMError
from backend.llm.openai_compat.client import PLACEHOLDER_API_KEY

DEFAULT_BATCH = 64


class OpenAIEmbedder:
    """`Embedder` over an OpenAI-compatible `/v1/embeddings` endpoint."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        batch_size: int = DEFAULT_BATCH,
    ) -> None:
        self._model = model
        self._batch = max(1, batch_size)
        self._sdk = openai.AsyncOpenAI(
            api_key=api_key or PLACEHOLDER_API_KEY,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=max_retries,
        )

    @property
    def model(self) -> str:
        return self._model

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch):
            vectors.extend(await self._request(texts[start : start + self._batch]))
        return vectors

    async def aclose(self) -> None:
        await self._sdk.close()

    async def _request(self, texts: Sequence[str]) -> list[list[float]]:
        try:
            response = await self._sdk.embeddings.create(
                model=self._model, input=list(texts), encoding_format="float"
            )
        except openai.APIStatusError as exc:
            raise LLMError(
                f"the embeddings server answered HTTP {exc.status_code}"
            ) from None
        except openai.APITimeoutError:
            raise LLMError("the embeddings server did not answer in time") from None
        except openai.OpenAIError:
            raise LLMError("the embeddings server could not be reached") from None
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(texts):
            raise LLMError(
                f"the embeddings server returned {len(data)} vectors "
                f"for {len(texts)} texts"
            )
        return [[float(x) for x in item.embedding] for item in data]
