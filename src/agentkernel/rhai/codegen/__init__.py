"""Code generation: a script as Python source, one part of the compiler per kind of node."""
