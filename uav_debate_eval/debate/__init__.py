"""The multi-agent debate: LLM backends, personas, red/blue protocol, consensus, monitor, verdict."""
