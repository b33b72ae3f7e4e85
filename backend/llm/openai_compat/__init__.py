"""The `openai` provider: any OpenAI-compatible chat completions server.

The only package whose modules import the `openai` SDK. Each module is one
noun:

- `client.py`: `OpenAIClient`, the `LLMClient` — the SDK client, the calls,
  and the retry table;
- `wire.py`: our provider-neutral request as the chat completions payload,
  and a reply back as our types;
- `stream.py`: a streamed reply's chunks assembled (text, tool calls, usage);
- `faults.py`: what each failure means — the user's message, and whether to
  retry;
- `profiles.py`: what each kind of server is sent (`LOOPWIRE_LLM_PROFILE`),
  and the parameters a server refused;
- `context_window.py`: each model's context window, as its server says;
- `embedder.py`: `OpenAIEmbedder`, the data sources' `Embedder` over
  `/v1/embeddings`.
"""
