"""The syntax: lexer and parser, source text to a frozen `ast.Script`."""
