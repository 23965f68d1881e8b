"""Answer generation: the offline extractive reader; OpenAI-compatible LLMs plug in behind the same call."""
