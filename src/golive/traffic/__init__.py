"""The traffic engine: an async OpenAI-compatible client, SSE reassembly and load schedules."""
