"""JSON Schemas from outside the kernel, held to bounds: a tool's `parameters`, an outside tool's input
schema, a script's `output_schema`.

`bounds.py` is the one validation every untrusted value goes through (a
deadline, `regex` patterns, few errors kept); `cost.py` measures what a
schema may cost before it is used, `patterns.py` what its patterns may cost
to compile, `refs.py` refuses a `$ref` that leaves the schema, and
`parameters.py` checks a tool's `parameters` when its YAML loads.
"""
