"""`agentkernel serve`: the HTTP API over one Kernel, the web chat, continuations (S6.3, S23.6).

The package imports FastAPI, so nothing on the other commands' paths
imports it; `agentkernel serve` loads it when it runs. Modules:

- app.py: `create_app(kernel, settings)`, the FastAPI app (routers per area in routes/);
- identity.py: who is calling (bearer tokens, or everyone `local` on loopback);
- request_rates.py: how fast each user may send requests (a token bucket per user of the tokens);
- rate_limit.py: a user's request past that rate is 429 before any of the app runs;
- sessions.py: which sessions exist and whose they are (SQLite beside the transcript);
- turns.py: a session's running turn, the 409 rule, a turn that outlives its client, a slow client's bound;
- events.py: the loop's events as server-sent events;
- failures.py: request ids, 500s that are logged and never show a traceback, 422 wording;
- problems.py: the error bodies as OpenAPI models, so the spec says what each route answers;
- body_limit.py: a request body past server.max_body_bytes is 413 before it is all read;
- serving.py: binding (the loopback rule), uvicorn, the graceful stop;
- sealed_ids.py: rows kept on the server behind opaque random ids, for their owner only;
- continuations.py: a table's next page kept on the server behind an opaque id (S6.3);
- downloads.py: a file a tool made, offered behind an opaque id, checked to lie in the session's
  scratch folder (S6.2); routes/files.py streams it;
- sealing.py: where blocks leave the server, their continuations and files become ids;
- charts.py: chart blocks as server-side SVG;
- static/: the web page, with vendored JS (static/vendor/README.md).
"""
