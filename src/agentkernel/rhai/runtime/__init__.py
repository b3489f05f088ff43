"""The runtime a compiled script calls into: values, limits, errors, modules, the slow paths."""
