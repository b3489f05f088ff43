"""The Rhai tokenizer: source text to a list of tokens (RHAI.md §1).

It mirrors the reference tokenizer (Rhai 1.25 `tokenizer.rs`) decision for
decision, because its quirks are visible to scripts: a `-` before a digit is
part of the number only where a unary operator may stand, `1.` is a float
only when no property name can follow, positions drift after `\\${` in a
back-tick string, and so on. Positions are 1-based `(line, column)` counted
in characters, advanced exactly where the reference advances them.

The reference tokenizer is lazy and reports a malformed token only when the
parser reaches it, so a lexical error here becomes a `LEXERR` token (with the
final message text) followed by `EOF`; the parser raises it on arrival. The
one piece of parser feedback the reference needs (resume a back-tick string
after the `}` that closes a `${ … }` block) is reproduced by counting braces.
"""

from __future__ import annotations

import re

from agentkernel.rhai.syntax.compile_clock import EVERY, CompileClock
from agentkernel.rhai.syntax.literals import Char
from agentkernel.rhai.syntax.words import KEYWORDS, RESERVED_WORDS, is_valid_identifier

Pos = tuple[int, int]
NO_POS: Pos = (0, 0)
_POS_MAX = 0xFFFF  # positions are u16 in the reference and saturate

#: After these tokens a `+`/`-` is unary (the reference's `Token::is_next_unary`).
_UNARY_AFTER = frozenset([
    ";", ":", ",", "??", "..", "..=", "{", "(", "[", "+", "+=", "u+", "-", "-=", "u-", "*", "*=", "/",
    "/=", "%", "%=", "**", "**=", "<<", "<<=", ">>", ">>=", "=", "==", "!=", "<", ">", "!", "<=", ">=",
    "|", "&", "if", "while", "until", "in", "!in", "&&", "&=", "||", "|=", "^", "^=", "return",
    "throw", "?[", "LEXERR",
])  # fmt: skip

#: Reserved symbols the reference reports with a hint instead of "reserved symbol".
_IMPROPER_SYMBOLS = {
    "===": "'===' is not a valid operator. This is not JavaScript! Should it be '=='?",
    "!==": "'!==' is not a valid operator. This is not JavaScript! Should it be '!='?",
    "->": "'->' is not a valid symbol. This is not C or C++!",
    "<-": "'<-' is not a valid symbol. This is not Go! Should it be '<='?",
    ":=": "':=' is not a valid assignment operator. This is not Go or Pascal! Should it be simply '='?",
    ":;": "':;' is not a valid symbol. Should it be '::'?",
    "::<": "'::<>' is not a valid symbol. This is not Rust! Should it be '::'?",
    "(*": "'(* .. *)' is not a valid comment format. This is not Pascal! Should it be '/* .. */'?",
    "*)": "'(* .. *)' is not a valid comment format. This is not Pascal! Should it be '/* .. */'?",
    "# {": "'#' is not a valid symbol. Should it be '#{'?",
}

# Two- and three-character operators that are plain tokens, tried longest first.
_OPERATORS_3 = frozenset(["**=", "<<=", ">>=", "..=", "..."])
_OPERATORS_2 = frozenset([
    "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "**", "<<", ">>", "<=", ">=", "==", "!=", "=>", "::",
    "..", "&&", "||", "?.", "??", "?[", "#{", "()",
])  # fmt: skip

_IDENT_TAIL = re.compile(r"[A-Za-z0-9_]*")
_ASCII_SPACE = frozenset(" \t\r\x0c")
# Rust's `char::is_whitespace` (Unicode White_Space), used by string line continuation.
_RUST_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_RADIX_DIGITS = {16: _HEX_DIGITS, 8: frozenset("01234567"), 2: frozenset("01")}
_U64_DIGITS = {16: 16, 8: 22, 2: 64}  # the most digits (no leading zeros) a u64 can need
_I64_DIGITS = 19  # len(str(2**63)): a decimal literal with more digits is not an i64
_I64_OVER = 1 << 63


# The lexer's fast path (`_Lexer._fast_tokens`): a common token and the space before it.
_FAST_TOKEN = re.compile(
    r"[ \t\r\n\x0c]*(?:"
    r"(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>[-+*/%&|^<>]=|=>|&&|\|\||\?[.?\[]|\#\{|\(\)|[=!]=(?!=)|\.\.(?![.=])|::(?!<))"
    r"|(?P<symbol>[{}()\[\];:,.=<>!|&^%*+-]|/(?![/*]))"
    r"|(?P<int>[0-9]+)(?![0-9_.eExXoObB])"
    r'|(?P<string>"[^"\\\r\n]*")(?!")'
    r"|(?P<comment>//[^\r\n]*(?:\r\n|\r|\n)?)"
    r")"
)
# A one-character symbol followed by one of these is (or may be) a longer token: not fast.
_FAST_PAIRS = frozenset(
    ["++", "--", "->", "<-", "<|", "|>", "!.", "(*", "*)", ":=", ":;", "!i", "//", "/*"]
    + [op[:2] for op in _OPERATORS_3]
    + list(_OPERATORS_2)
)


class Token:
    """One token: `kind` is the symbol or keyword text itself (`"+"`, `"let"`),
    `u+`/`u-` for unary signs, or one of `INT FLOAT STR ISTR CHAR IDENT RESERVED
    LEXERR EOF`. `value` holds the literal value, the name, or the error message.
    """

    __slots__ = ("kind", "pos", "value")

    def __init__(self, kind: str, value: object, pos: Pos) -> None:
        self.kind = kind
        self.value = value
        self.pos = pos

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.value!r}, {self.pos})"

    def display(self) -> str:
        """The token as the reference prints it in "Unexpected '…'" messages."""
        if self.kind in ("IDENT", "RESERVED", "LEXERR"):
            return str(self.value)
        if self.kind in ("INT", "FLOAT", "CHAR"):
            return str(self.value)
        if self.kind == "STR":
            return f'"{self.value}"'
        if self.kind == "ISTR":
            return "string"
        if self.kind == "EOF":
            return "{EOF}"
        return self.kind[1:] if self.kind in ("u+", "u-") else self.kind


class _LexFail(Exception):
    """A malformed token: becomes a `LEXERR` token carrying the final message."""

    def __init__(self, message: str, pos: Pos) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def tokenize(source: str, max_string_size: int = 0, clock: CompileClock | None = None) -> list[Token]:
    """All tokens of `source`, ending with `EOF` (after a `LEXERR`, if any)."""
    return _Lexer(source, max_string_size, clock or CompileClock()).run()


class _Lexer:
    """A cursor over the source with the reference's position bookkeeping."""

    def __init__(self, source: str, max_string_size: int, clock: CompileClock) -> None:
        self.clock = clock
        self.src = source
        self.n = len(source)
        self.i = 0
        self.line = 1
        self.col = 0
        self.max_string = max_string_size
        self.unary_ok = True
        self.open_interpolations: list[int] = []  # brace depth inside each `${`
        self.resume_text = False

    # -- driver ----------------------------------------------------------------

    def run(self) -> list[Token]:
        tokens: list[Token] = []
        while True:
            self._fast_tokens(tokens)
            try:
                token = self._next_token()
            except _LexFail as fail:
                tokens.append(Token("LEXERR", fail.message, fail.pos))
                tokens.append(Token("EOF", None, fail.pos))
                return tokens
            tokens.append(token)
            self.clock.tick()
            if token.kind == "EOF":
                return tokens
            if token.kind == "LEXERR":
                tokens.append(Token("EOF", None, token.pos))
                return tokens
            self.unary_ok = token.kind in _UNARY_AFTER
            self._track_interpolation(token.kind)

    def _track_interpolation(self, kind: str) -> None:
        """Resume back-tick text after the `}` that closes a `${ … }` block."""
        if kind == "ISTR":
            self.open_interpolations.append(0)
        elif self.open_interpolations:
            if kind in ("{", "#{"):
                self.open_interpolations[-1] += 1
            elif kind == "}":
                self.open_interpolations[-1] -= 1
                if self.open_interpolations[-1] == 0:
                    self.open_interpolations.pop()
                    self.resume_text = True

    def _fast_tokens(self, tokens: list[Token]) -> None:
        """Append the common tokens ahead, up to the first that needs `_next_token`.

        Most of a script is whitespace, names, small integers, plain strings,
        plain operators and `//` comments: one regular expression takes each
        token whole, with the space before it, instead of a Python step per
        character. Whatever is near a quirk (`-1`, `1.`,
        `"a""b"`, `**`, `${`, an error) stops the loop with the cursor at it,
        and `_next_token` decides it exactly as before. Positions advance and
        saturate as `_next_token` advances them; one long loop with locals,
        because this runs once per token of every script.
        """
        if self.resume_text or self.open_interpolations:
            return
        src, i, line, col, unary_ok = self.src, self.i, self.line, self.col, self.unary_ok
        match, append, clock = _FAST_TOKEN.match, tokens.append, self.clock
        while (found := match(src, i)) is not None:
            kind = found.lastgroup
            start = found.start(found.lastindex or 0)
            if start > i:  # the space before the token
                lines = src.count("\n", i, start)
                if lines:
                    line = min(line + lines, _POS_MAX)
                    col = start - src.rindex("\n", i, start) - 1
                else:
                    col += start - i
                i = start
            end = found.end()
            text = src[start:end]
            pos = (line, col + 1 if col < _POS_MAX else _POS_MAX)
            if kind == "word":
                if text in KEYWORDS:
                    token = Token(text, None, pos)
                elif text in RESERVED_WORDS:
                    token = Token("RESERVED", text, pos)
                elif text[0] == "_" and not is_valid_identifier(text):
                    break
                else:
                    token = Token("IDENT", text, pos)
            elif kind == "symbol":
                after = src[end : end + 1]
                if text + after in _FAST_PAIRS or (text == "-" and unary_ok and "0" <= after <= "9"):
                    break
                token = Token("u" + text if unary_ok and text in "+-" else text, None, pos)
            elif kind == "op":
                token = Token(text, None, pos)
            elif kind == "int":
                value = int(text) if len(text) <= _I64_DIGITS else _I64_OVER
                if value >= _I64_OVER:
                    break
                token = Token("INT", value, pos)
            elif kind == "string":
                if self.max_string and _utf8_len(text) - 2 > self.max_string:
                    break
                token = Token("STR", text[1:-1], pos)
            else:  # a `//` comment and the line end it takes (CR, LF or CR LF, as `_line_comment`)
                i = end
                if text[-1] in "\r\n":
                    line, col = min(line + 1, _POS_MAX), 0
                else:  # the comment ends the source
                    col = min(col + len(text), _POS_MAX)
                continue
            col += end - i  # saturates when used: `pos` above, the cursor below
            i = end
            unary_ok = token.kind in _UNARY_AFTER
            append(token)
            if len(tokens) % EVERY == 0:
                clock.check()
        self.i, self.line, self.col, self.unary_ok = i, line, min(col, _POS_MAX), unary_ok

    # -- position bookkeeping -----------------------------------------------------

    def _advance(self) -> None:
        if self.col < _POS_MAX:
            self.col += 1

    def _new_line(self) -> None:
        if self.line < _POS_MAX:
            self.line += 1
        self.col = 0

    def _pos(self) -> Pos:
        return (self.line, self.col)

    def _peek(self, offset: int = 0) -> str | None:
        j = self.i + offset
        return self.src[j] if j < self.n else None

    def _eat(self) -> str:
        """Consume the next character and advance the position (`eat_next_and_advance`)."""
        ch = self.src[self.i]
        self.i += 1
        self._advance()
        return ch

    # -- tokens ------------------------------------------------------------------

    def _next_token(self) -> Token:
        if self.resume_text:
            self.resume_text = False
            return self._text_continuation()
        negated: Pos | None = None
        src = self.src
        while self.i < self.n:
            c = src[self.i]
            self.i += 1
            self._advance()
            if c in _ASCII_SPACE:
                continue
            if c == "\n":
                self._new_line()
                continue
            start = self._pos()
            if "0" <= c <= "9":
                return self._number(c, start, negated)
            if c == "-" and self.unary_ok and "0" <= (self._peek() or "") <= "9":
                negated = start
                continue
            token = self._symbol_or_word(c, start)
            if token is not None:
                return token
        self._advance()
        return Token("EOF", None, self._pos())

    def _symbol_or_word(self, c: str, start: Pos) -> Token | None:
        """The token starting with `c`; None after a comment."""
        if c.isascii() and (c.isalpha() or c == "_"):
            return self._identifier(c, start)
        if c in "\"`'#":
            quoted = self._quoted(c, start)
            if quoted is not None:
                return quoted
        if c == "/" and self._peek() in ("/", "*"):
            self._comment()
            return None
        return self._operator(c, start)

    def _identifier(self, first: str, start: Pos) -> Token:
        match = _IDENT_TAIL.match(self.src, self.i)
        tail = match.group() if match else ""
        self.i += len(tail)
        self.col = min(self.col + len(tail), _POS_MAX)
        word = first + tail
        if word in KEYWORDS:
            return Token(word, None, start)
        if word in RESERVED_WORDS:
            return Token("RESERVED", word, start)
        if not is_valid_identifier(word):
            return Token("LEXERR", f"Variable name is not proper: '{word}'", start)
        return Token("IDENT", word, start)

    def _operator(self, c: str, start: Pos) -> Token:
        special = self._special_operator(c, start)
        if special is not None:
            return special
        three = c + self.src[self.i : self.i + 2]
        if three in _OPERATORS_3:
            self._eat()
            self._eat()
            return self._reserved("...", start) if three == "..." else Token(three, None, start)
        two = c + (self._peek() or "")
        if two in _OPERATORS_2:
            self._eat()
            return Token(two, None, start)
        if c in "{}()[];:,.=<>!|&^%*/+-":
            return self._single(c, start)
        if c in "~@$?#":
            return self._reserved(c, start)
        return Token("LEXERR", f"Unexpected '{c}'", start)

    def _single(self, c: str, start: Pos) -> Token:
        if c in "+-" and self.unary_ok:
            return Token("u" + c, None, start)
        return Token(c, None, start)

    def _special_operator(self, c: str, start: Pos) -> Token | None:
        """Operators whose spelling overlaps a reserved or improper symbol."""
        two = c + (self._peek() or "")
        if two in ("++", "--", "->", "<-", "<|", "|>", "!.", "(*", "*)", ":=", ":;", "#!"):
            if two != "#!":
                self._eat()
            return self._reserved(two, start)
        if two == "==" and self._peek(1) == "=":
            self._eat()
            self._eat()
            return self._reserved("===", start)
        if two == "!=" and self._peek(1) == "=":
            self._eat()
            self._eat()
            return self._reserved("!==", start)
        if two == "::" and self._peek(1) == "<":
            self._eat()
            self._eat()
            return self._reserved("::<", start)
        if two == "# ":
            self._eat()
            if self._peek() == "{":
                self._eat()
                return self._reserved("# {", start)
            return self._reserved("#", start)
        if two == "!i":
            return self._bang_in(start)
        return None

    def _bang_in(self, start: Pos) -> Token:
        """`!in` is one token unless an identifier character follows (`!inside`)."""
        if self._peek(1) == "n":
            after = self._peek(2)
            if after is None or not (after.isascii() and (after.isalnum() or after == "_")):
                self.i += 2
                self._advance()
                self._advance()
                return Token("!in", None, start)
        return Token("!", None, start)

    def _reserved(self, text: str, start: Pos) -> Token:
        hint = _IMPROPER_SYMBOLS.get(text)
        if hint is not None:
            return Token("LEXERR", hint, start)
        return Token("RESERVED", text, start)

    def _comment(self) -> None:
        if self._eat() == "/":
            self._line_comment()
        else:
            self._block_comment()

    def _line_comment(self) -> None:
        while self.i < self.n:
            ch = self.src[self.i]
            self.i += 1
            if ch == "\r":
                if self._peek() == "\n":
                    self._eat()
                self._new_line()
                return
            if ch == "\n":
                self._new_line()
                return
            self._advance()

    def _block_comment(self) -> None:
        """Nested `/* … */`; an unterminated comment silently runs to the end."""
        level = 1
        while self.i < self.n:
            ch = self._eat()
            if ch == "/" and self._peek() == "*":
                self._eat()
                level += 1
            elif ch == "*" and self._peek() == "/":
                self._eat()
                level -= 1
            elif ch == "\n":
                self._new_line()
            if level == 0:
                return

    # -- numbers -----------------------------------------------------------------

    def _number(self, first: str, start: Pos, negated: Pos | None) -> Token:
        text, radix = self._scan_number(first)
        pos = start
        if negated is not None:
            text = "-" + text
            pos = negated
        if radix:
            return self._radix_number(text[2:], radix, pos)
        return self._decimal_number(text, pos)

    def _scan_number(self, first: str) -> tuple[str, int]:
        out = [first]
        digits: frozenset[str] | None = None  # None = decimal
        radix = 0
        has_period = has_e = False
        while self.i < self.n:
            ch = self.src[self.i]
            if ch == "_":
                self._eat()
            elif ("0" <= ch <= "9") if digits is None else (ch in digits):
                out.append(self._eat())
            elif ch == "." and not has_period and not radix:
                if not self._float_period(out):
                    break
                has_period = True
            elif ch in "eE" and not has_e and not radix:
                if not self._float_exponent(out):
                    break
                has_e = has_period = True
            elif ch in "xXoObB" and first == "0" and len(out) <= 1:
                out.append(self._eat())
                radix = {"x": 16, "o": 8, "b": 2}[ch.lower()]
                digits = _RADIX_DIGITS[radix]
            else:
                break
        return "".join(out), radix

    def _float_period(self, out: list[str]) -> bool:
        """Take the `.` of `1.5`/`1.`; leave it for `1.e5`, `1..2`, `1._x`, `1.` at the end."""
        after = self._peek(1)
        if after is not None and "0" <= after <= "9":
            self.i += 1
            self._advance()
            out.append(".")
            return True
        if after is None or after in "_." or (after.isascii() and after.isalpha()):
            return False
        self.i += 1
        self._advance()
        out.append(".0")
        return True

    def _float_exponent(self, out: list[str]) -> bool:
        after = self._peek(1)
        if after is not None and "0" <= after <= "9":
            self.i += 1
            self._advance()
            out.append("e")
            return True
        if after in ("+", "-"):
            self.i += 2
            self._advance()
            self._advance()
            out.append("e" + after)
            return True
        return False

    @staticmethod
    def _radix_number(body: str, radix: int, pos: Pos) -> Token:
        """Hex/octal/binary literals are u64 bit patterns reinterpreted as i64."""
        digits = body.lstrip("0")
        short = len(digits) <= _U64_DIGITS[radix]  # longer is past 64 bits: no need to convert it
        if body and short and all(ch in _RADIX_DIGITS[radix] for ch in body):
            value = int(body, radix)
            if value < 1 << 64:
                return Token("INT", value - (1 << 64) if value >= 1 << 63 else value, pos)
        return Token("LEXERR", f"Invalid number: '{body}'", pos)

    @staticmethod
    def _decimal_number(text: str, pos: Pos) -> Token:
        """i64 when it fits, else f64 (as Rust's `from_str` does), else an error.

        A literal of more than 19 significant digits is past i64 whatever its
        digits: it goes straight to f64 (`inf` when huge, as in the reference),
        never through Python's `int()`, which refuses 4,300 digits or more.
        """
        digits = text.lstrip("-").lstrip("0")
        if "." not in text and "e" not in text and len(digits) <= _I64_DIGITS:
            value = -int(digits or "0") if text.startswith("-") else int(digits or "0")
            if -(1 << 63) <= value < 1 << 63:
                return Token("INT", value, pos)
        try:
            return Token("FLOAT", float(text), pos)
        except ValueError:
            return Token("LEXERR", f"Invalid number: '{text}'", pos)

    # -- strings and chars -------------------------------------------------------

    def _quoted(self, c: str, start: Pos) -> Token | None:
        """String, raw string, back-tick string or char literal; None if `c` starts none."""
        nxt = self._peek()
        if c == '"':
            return self._plain_string(start)
        if c == "`":
            return self._backtick_string(start)
        if c == "'":
            return self._char_literal(start)
        if nxt in ('"', "#"):
            return self._raw_string(start)
        return None

    def _plain_string(self, start: Pos) -> Token:
        text, _, _, open_at_end = _StringScanner(self, '"', verbatim=False, continuation=True).scan()
        if open_at_end:
            raise _LexFail("Open string is not terminated", start)
        return Token("STR", text, start)

    def _backtick_string(self, start: Pos) -> Token:
        if self._peek() == "\r":
            self._eat()
            if self._peek() == "\n":
                self._eat()
            self._new_line()
        elif self._peek() == "\n":
            self._eat()
            self._new_line()
        text, interpolated, _, open_at_end = _StringScanner(self, "`", verbatim=True).scan()
        if interpolated:
            return Token("ISTR", text, start)
        if open_at_end:
            raise _LexFail("Open string is not terminated", start)
        return Token("STR", text, start)

    def _text_continuation(self) -> Token:
        """The back-tick text after a `${ … }` block (positioned at its first character)."""
        text, interpolated, first, open_at_end = _StringScanner(self, "`", verbatim=True).scan()
        if interpolated:
            return Token("ISTR", text, first)
        if open_at_end:
            raise _LexFail("Open string is not terminated", first)
        return Token("STR", text, first)

    def _char_literal(self, start: Pos) -> Token:
        if self._peek() == "'":
            return Token("LEXERR", "Invalid character: ''", start)
        text, _, _, _ = _StringScanner(self, "'", verbatim=False).scan()
        if len(text) != 1:
            return Token("LEXERR", f"Invalid character: '{text}'", start)
        return Token("CHAR", Char(text), start)

    def _raw_string(self, start: Pos) -> Token:
        """`#"…"#`, `##"…"##`: no escapes; ends at `"` plus as many `#` as opened."""
        hashes = 1
        while self._peek() == "#":
            self._eat()
            hashes += 1
        if self.i >= self.n:
            raise _LexFail("Open string is not terminated", start)
        opener = self.src[self.i]
        self.i += 1
        if opener != '"':
            raise _LexFail(f"Unexpected '{opener}'", start)
        self._advance()
        text, closed = self._raw_body(hashes, start)
        if not closed:
            raise _LexFail("Open string is not terminated", start)
        return Token("STR", text, start)

    def _raw_body(self, hashes: int, start: Pos) -> tuple[str, bool]:
        out: list[str] = []
        size = 0
        seen: int | None = None  # `#`s seen since a `"`, None when not after a quote
        while self.i < self.n:
            ch = self._eat()
            piece = ""
            if ch == '"':
                if seen is not None:
                    piece = '"' + "#" * seen
                seen = 0
            elif seen is not None and ch == "#":
                seen += 1
                if seen == hashes:
                    return "".join(out), True
            elif seen is not None:
                piece = '"' + "#" * seen + ch  # the reference skips `new_line` here
                seen = None
            else:
                if ch == "\n":
                    self._new_line()
                piece = ch
            out.append(piece)
            if self.max_string:
                size += _utf8_len(piece)
                if size > self.max_string:
                    raise _LexFail(_too_long(self.max_string), start)
        return "".join(out), False


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _too_long(limit: int) -> str:
    return f"Length of string exceeds the maximum limit ({limit})"


class _StringScanner:
    """The reference's `parse_string_literal`: one quoted body, escapes and all.

    `scan()` returns (text, interpolated, first-character position, open at end
    of input). An unterminated verbatim string, or a plain one that ends in a
    line-continuation `\\`, is "open at end"; the caller reports it.
    """

    def __init__(self, lexer: _Lexer, term: str, *, verbatim: bool, continuation: bool = False) -> None:
        self.lx = lexer
        self.term = term
        self.verbatim = verbatim
        self.continuation = continuation
        self.interpolation = verbatim and term == "`"
        self.start = lexer._pos()
        self.out: list[str] = []
        self.size = 0
        self.escape = False
        self.skip_space_until = 0

    def scan(self) -> tuple[str, bool, Pos, bool]:
        lx = self.lx
        first: Pos = NO_POS
        while True:
            if lx.i >= lx.n:
                return self._at_end(first)
            ch = lx.src[lx.i]
            lx.i += 1
            lx._advance()
            if self.interpolation and not self.escape:
                if ch == "$" and lx._peek() == "{":
                    self._check_size()
                    return "".join(self.out), True, first, False
                if ch == "\\" and lx._peek() == "$" and lx._peek(1) == "{":
                    lx.i += 1  # the reference takes the `$` without advancing the position
                    ch = "$"
            self._check_size()
            if ch == self.term and not self.escape:
                if lx._peek() != self.term:
                    self._check_size()
                    return "".join(self.out), False, first, False
                lx._eat()  # a doubled quote stands for itself
            if first == NO_POS:
                first = lx._pos()
            self._char(ch)

    def _at_end(self, first: Pos) -> tuple[str, bool, Pos, bool]:
        self.lx._advance()
        if self.verbatim or (self.continuation and self.escape):
            self._check_size()
            return "".join(self.out), False, first, True
        raise _LexFail("Open string is not terminated", self.start)

    def _check_size(self) -> None:
        if self.lx.max_string and self.size > self.lx.max_string:
            raise _LexFail(_too_long(self.lx.max_string), self.start)

    def _push(self, text: str) -> None:
        self.out.append(text)
        if self.lx.max_string:
            self.size += _utf8_len(text)

    def _char(self, ch: str) -> None:
        lx = self.lx
        if ch == "\r" and lx._peek() == "\n":
            return
        if self.escape:
            self._escaped(ch)
        elif ch == "\\" and not self.verbatim:
            self.escape = True
        elif ch == "\n":
            if not self.verbatim:
                lx.col = max(lx.col - 1, 0)
                raise _LexFail("Open string is not terminated", self.start)
            lx._new_line()
            self._push("\n")
        elif ch in _RUST_WHITESPACE and lx.col < self.skip_space_until:
            return
        else:
            self._push(ch)
            self.skip_space_until = 0

    def _escaped(self, ch: str) -> None:
        simple = {"r": "\r", "n": "\n", "\\": "\\", "t": "\t"}.get(ch)
        if simple is not None:
            self.escape = False
            self._push(simple)
        elif ch in "xuU":
            self.escape = False
            self._push(self._code_point(ch))
        elif ch == "\n" and self.continuation:
            self.escape = False
            self.lx._new_line()
            self.skip_space_until = self.start[1] + 1
        elif ch == "\n":
            self.lx.col = max(self.lx.col - 1, 0)
            raise _LexFail("Open string is not terminated", self.start)
        elif ch == self.term:
            self.escape = False
            self._push(ch)
        else:
            raise _LexFail(f"Invalid escape sequence: '\\{ch}'", self.lx._pos())

    def _code_point(self, kind: str) -> str:
        """`\\xHH`, `\\uHHHH`, `\\UHHHHHHHH`: exact digit counts, valid scalars only."""
        lx = self.lx
        seq = "\\" + kind
        value = 0
        for _ in range({"x": 2, "u": 4, "U": 8}[kind]):
            if lx.i >= lx.n:
                raise _LexFail(f"Invalid escape sequence: '{seq}'", lx._pos())
            digit = lx._eat()
            seq += digit
            if digit not in _HEX_DIGITS:
                raise _LexFail(f"Invalid escape sequence: '{seq}'", lx._pos())
            value = value * 16 + int(digit, 16)
        if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
            raise _LexFail(f"Invalid escape sequence: '{seq}'", lx._pos())
        return chr(value)


__all__ = ["NO_POS", "Pos", "Token", "tokenize"]
