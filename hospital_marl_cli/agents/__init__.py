"""Client-side agents: programs that play the environments as a user would (an LLM behind an
OpenAI-compatible API, in-process or against a running server). They live beside the CLI that
runs them, not in ``server/``, which holds only what the server process serves."""
