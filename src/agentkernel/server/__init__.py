"""The HTTP server: the API, the web chat, continuations (S6.3, S23.6)."""
