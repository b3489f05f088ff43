"""The reference's keywords, reserved words and symbols, and the rules for names built on them.

Apart from the tokenizer (lexer.py), which uses them, because the runtime
checks names too (`Fn("…")`, `is_def_fn`) without tokenizing anything: a
script loaded from the compile cache runs without importing the lexer, whose
patterns cost half a millisecond to compile.
"""

from __future__ import annotations

#: Words the reference tokenizes as keywords; the token kind is the word itself.
KEYWORDS = frozenset([
    "as", "break", "catch", "const", "continue", "do", "else", "export", "false", "fn", "for", "if",
    "import", "in", "let", "loop", "private", "return", "switch", "throw", "true", "try", "until",
    "while", "_",
])  # fmt: skip

#: Words reserved by the reference (RHAI.md §1): tokenized as `RESERVED`.
RESERVED_WORDS = frozenset([
    "use", "case", "async", "public", "package", "super", "var", "protected", "spawn", "shared", "is",
    "sync", "curry", "static", "default", "is_shared", "print", "this", "is_def_var", "thread",
    "is_def_fn", "yield", "new", "call", "match", "eval", "await", "null", "debug", "type_of", "with",
    "void", "nil", "module", "Fn", "go", "goto",
])  # fmt: skip

#: Reserved words that may be called like functions: `print(x)`, `Fn("f")`.
CALLABLE_RESERVED = frozenset([
    "curry", "is_shared", "print", "is_def_var", "is_def_fn", "call", "eval", "debug", "type_of", "Fn",
])  # fmt: skip

#: Reserved words that may also be called in method style: `x.type_of()`.
METHOD_RESERVED = frozenset([
    "curry", "is_shared", "call", "type_of",
])  # fmt: skip

#: Every symbol the reference knows, as a token or reserved: `Fn("+")` is refused as
#: "'+' is a reserved symbol" (its `Token::lookup_symbol_from_syntax` and reserved list).
SYMBOLS = frozenset([
    "+", "-", "*", "/", "%", "**", "<<", ">>", "&", "|", "^", "!", "=", "==", "!=", "<", ">", "<=",
    ">=", "+=", "-=", "*=", "/=", "%=", "**=", "<<=", ">>=", "&=", "|=", "^=", "&&", "||", "!in", ".",
    "..", "..=", "?.", "?[", "??", "::", "=>", ";", ":", ",", "(", ")", "()", "{", "}", "[", "]", "#{",
    "?", "#", "===", "!==", "#!", "~", "!.", ":=", "...", "@", "<-", "--", "<|", "$", "->", "|>", "::<",
    "++", ":;", "*)", "(*",
])  # fmt: skip

#: Keywords that can never name a parameter ("Expecting name of a variable").
STANDARD_KEYWORDS = frozenset([
    "fn", "private", "import", "export", "as", "true", "false", "let", "const", "if", "else", "do",
    "while", "until", "loop", "for", "in", "continue", "break", "return", "throw", "try", "catch",
])  # fmt: skip


def is_valid_identifier(name: str) -> bool:
    """The reference's rule: letters, digits, `_`; the first non-`_` is a letter."""
    seen_letter = False
    for ch in name:
        if ch == "_":
            continue
        if ch.isascii() and ch.isalpha():
            seen_letter = True
        elif not seen_letter or not (ch.isascii() and ch.isalnum()):
            return False
    return seen_letter


def reserved_message(word: str) -> str:
    """The reference's text for a reserved keyword or symbol where a name belongs."""
    return f"'{word}' is a reserved {'keyword' if is_valid_identifier(word) else 'symbol'}"


def is_reserved(text: str) -> bool:
    """A keyword, reserved word or symbol: what `Fn(text)` refuses as a syntax error."""
    return text in KEYWORDS or text in RESERVED_WORDS or text in SYMBOLS


def is_valid_function_name(name: str) -> bool:
    """A name a script function (or `Fn("…")`) may have: not a keyword or reserved word."""
    return is_valid_identifier(name) and name not in RESERVED_WORDS and name not in KEYWORDS


__all__ = [
    "CALLABLE_RESERVED",
    "KEYWORDS",
    "METHOD_RESERVED",
    "RESERVED_WORDS",
    "STANDARD_KEYWORDS",
    "SYMBOLS",
    "is_reserved",
    "is_valid_function_name",
    "is_valid_identifier",
    "reserved_message",
]
