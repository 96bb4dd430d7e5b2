"""firstlight: bring an LLM server up, prove it serves, measure it."""

__version__ = "0.1.0"
