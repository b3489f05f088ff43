"""Tools: the registry of specs, the one dispatch path, and the results they give."""
