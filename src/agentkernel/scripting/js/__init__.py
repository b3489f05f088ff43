"""The QuickJS engine adapter (S1.1, S3, S21.1): `.js`, `.cjs` and `.mjs` scripts.

`engine.py` is the engine (a fresh scope per call, limits, values as JSON
text), `prelude.js` binds the helpers inside QuickJS, `reuse.py` and
`lockdown.js` keep a context between calls and prove it unchanged, `modules.py`
loads ES imports through the reader the host hands it, `hints.py` explains
common mistakes. Like every adapter it imports only scripting/contract.py and types.py.
"""

from agentkernel.scripting.js.engine import JS_EXTENSIONS, TICK_OPERATIONS, JsEngine, JsScript

__all__ = ["JS_EXTENSIONS", "TICK_OPERATIONS", "JsEngine", "JsScript"]
