"""The Python names generated code calls Rhai's binary operators by (`op_add`…).

The code generator writes them and the ABI (abi.py) binds them; apart from
both so that the engine, which runs compiled code, imports the table without
the code generator.
"""

from __future__ import annotations

BINARY_NAMES = {
    "+": "op_add", "-": "op_sub", "*": "op_mul", "/": "op_div", "%": "op_mod", "**": "op_pow",
    "<<": "op_shl", ">>": "op_shr", "&": "op_and", "|": "op_or", "^": "op_xor",
    "==": "op_eq", "!=": "op_ne", "<": "op_lt", "<=": "op_le", ">": "op_gt", ">=": "op_ge",
    "..": "op_range", "..=": "op_range_incl", "in": "op_in", "!in": "op_not_in",
}  # fmt: skip

__all__ = ["BINARY_NAMES"]
