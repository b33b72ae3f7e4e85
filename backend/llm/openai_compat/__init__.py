"""The `openai` provider: any OpenAI-compatible chat completions server.

The only package whose modules import the `openai` SDK. Each module is one
noun:

- `client.py`: `OpenAIClient`, the `LLMClient` — the SDK client, the calls,
  and the retry table;
- `request_template.py`: `TemplatedOpenAI`, the SDK client building its
  chat completions request once, each later one with its own body;
- `wire.py`: our provider-neutral request as the chat completions payload,
  and a reply back as our types;
- `fragments.py`: the JSON of each tool, encoded once;
- `stream.py`: a streamed reply's chunks assembled (text, tool calls, usage);
- `faults.py`: what each failure means — the user's message, and whether to
  retry;
- `profiles.py`: what each kind of server is sent (`LOOPWIRE_LLM_PROFILE`),
  and the parameters a server refused;
- `context_window.py`: each model's context window, as its server says;
- `embedder.py`: `OpenAIEmbedder`, the data sources' `Embedder` over
  `/v1/embeddings`.
"""
