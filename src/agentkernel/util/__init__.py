"""Small pure helpers several layers use: short text, bounded JSON, Unicode repair, YAML lines, fair queues.

Nothing here knows the kernel: a module of `util` imports only the standard
library, other `util` modules, `errors` and `types`.
"""
