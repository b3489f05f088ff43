"""The analysis: one facts pass over the tree, scopes, integer types, constant folding."""
