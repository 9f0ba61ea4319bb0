"""LLM access for the debate: one interface (base), backends (openai, local), cache, retries, structured output."""
