"""The API's routers, one module per area: health, sessions (and their messages), tools."""
