"""Input generators of the fuzzer. Each takes a ``random.Random`` (and the sample corpus)
and returns one source text; the same seed always gives the same text, so that a crash
in a long run is reproduced from its seed alone.

Generators, by what they stress:

- ``mutate``: token-level deletion, duplication, swapping and insertion of Croqtile
  vocabulary (keywords, operators, dotted words, braces) in the sample programs;
- ``grammar`` / ``grammar_mutate``: programs drawn from the grammar (see ``grammar.py``),
  mostly well-formed, so the checker, the lowering and the code generator run deep;
- ``soup``: random vocabulary tokens inside a function body;
- ``noise``: random bytes, unicode and control characters, alone or spliced into samples;
- ``literals``: huge, tiny, negative and malformed numbers in every numeric slot;
- ``long_line``: lines of 10 KB to 1 MB (expressions, declarations, names, strings);
- ``deep``: deep nesting of every kind (parentheses, blocks, loops, ``#if``, operators...);
- ``macros``: recursive, mutually recursive and exponential macros, odd directives;
- ``defines``: programs compiled with odd ``defines`` (huge, non-finite, broken values);
- ``directives``: every directive, with odd arguments, at random lines of a program;
- ``splice``: one-line statements of the corpus inserted into valid programs;
- ``big``: sources of 100 KB to 2 MB (many functions, many statements, long host code);
- ``huge``: 10 MB sources (rare in a mixed run: each takes seconds).

``huge_source`` and ``deep_source`` build the 10 MB and 10,000-deep inputs on demand.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

from croqtile.frontend.preprocessor import _DIRECTIVES as _pp_directives
from croqtile.frontend.tokens import DOTTED_WORDS, KEYWORDS, PUNCTUATION

from . import grammar

DATA = Path(__file__).resolve().parent.parent / "data"

# A generator makes a source text, or a source text and the `defines` to compile it with.
Generator = Callable[[random.Random, list[str]], "str | tuple[str, dict[str, object]]"]


def load_corpus() -> list[str]:
    """The sample programs (tests/data/**/*.co), in a stable order."""
    return [p.read_text() for p in sorted(DATA.rglob("*.co"))]


# ----------------------------------------------------------------------------------------
# Vocabulary and tokens
# ----------------------------------------------------------------------------------------

_NAMES = ("x", "y", "i", "j", "k", "p", "q", "a", "lhs", "rhs", "out", "f", "mc", "ma", "M",
          "N", "K", "TILE", "_", "__co__", "__VA_ARGS__", "defined")
_NUMBERS = ("0", "1", "2", "-1", "16", "64", "128", "0x10", "7u", "3ll", "1.5", "0.0f", "-2.5",
            "2147483648", "9223372036854775808", "1" * 40, "0.5F", "08", "1e3", "1.0e5")
_DIRECTIVES = ("\n#define X 1\n", "\n#if 0\n", "\n#endif\n", "\n#else\n", "\n#undef X\n",
               "\n#define F(a) a a\n", "\n#ifdef X\n", "\n#elif 1\n", "\n#", "\\\n", "/*", "*/",
               "//", '"', "'", 'R"(', ")\"")
VOCABULARY: tuple[str, ...] = tuple(sorted(KEYWORDS)) + DOTTED_WORDS + PUNCTUATION + _NAMES \
    + _NUMBERS + _DIRECTIVES

_SPLIT_RE = re.compile(
    r"\s+|//[^\n]*|/\*[\s\S]*?\*/|\"(?:[^\"\\\n]|\\.)*\"|\.[A-Za-z_]\w*|group-4|[A-Za-z_]\w*"
    r"|\d\w*(?:\.\d\w*)?|<->|=>|::|\[\[|\]\]|[-+*/%<>=!&|#^]=|&&|\|\||<<|>>|\+\+|--|#[-+*/%]"
    r"|[\s\S]")


def tokens_of(text: str) -> list[str]:
    """Split ``text`` into tokens and the blanks between them (joining gives ``text``)."""
    return _SPLIT_RE.findall(text)


def _word_slots(tokens: list[str]) -> list[int]:
    return [i for i, t in enumerate(tokens) if not t.isspace()]


def _vocab(rng: random.Random) -> str:
    return rng.choice(VOCABULARY)


# ----------------------------------------------------------------------------------------
# Mutation
# ----------------------------------------------------------------------------------------

_INTERESTING_NUMBERS = ("0", "-1", "1", "3", "7", "17", "4095", "65536", "2147483647",
                        "2147483648", "4294967296", "9223372036854775807", "18446744073709551616",
                        "1" * 30, "9" * 400, "0.0", "-0.0", "1.5", "1" * 400 + ".0", "0.000001f",
                        "0x7fffffffffffffff", "0xffffffffffffffffffff", "00", "1u", "1ull")


def _mutation(rng: random.Random, tokens: list[str], corpus: list[str]) -> None:
    """Apply one random token-level edit to ``tokens`` in place."""
    slots = _word_slots(tokens)
    if not slots:
        tokens.append(_vocab(rng))
        return
    i = rng.choice(slots)
    op = rng.randrange(12)
    if op == 0:
        del tokens[i]
    elif op == 1:
        tokens.insert(i, tokens[i] + " ")
    elif op == 2:
        j = rng.choice(slots) if rng.random() < 0.5 else _neighbour(slots, i, rng)
        tokens[i], tokens[j] = tokens[j], tokens[i]
    elif op in (3, 4):
        tokens.insert(i, " " + _vocab(rng) + " ")
    elif op == 5:
        tokens[i] = " " + _vocab(rng) + " "
    elif op == 6:
        del tokens[i:i + rng.randint(2, 30)]
    elif op == 7:
        j = i + rng.randint(2, 40)
        tokens[i:i] = tokens[i:j]
    elif op == 8:
        numbers = [k for k in slots if tokens[k][:1].isdigit()]
        k = rng.choice(numbers) if numbers else i
        tokens[k] = rng.choice(_INTERESTING_NUMBERS)
    elif op == 9:
        names = [k for k in slots if re.fullmatch(r"[A-Za-z_]\w*", tokens[k])]
        if names:
            tokens[rng.choice(names)] = tokens[rng.choice(names)]
    elif op == 10:
        other = tokens_of(rng.choice(corpus))
        start = rng.randrange(len(other))
        tokens[i:i] = other[start:start + rng.randint(1, 60)]
    else:
        _line_mutation(rng, tokens)


def _neighbour(slots: list[int], i: int, rng: random.Random) -> int:
    index = slots.index(i)
    return slots[max(0, min(len(slots) - 1, index + rng.choice((-1, 1))))]


def _line_mutation(rng: random.Random, tokens: list[str]) -> None:
    lines = "".join(tokens).split("\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    choice = rng.randrange(3)
    if choice == 0:
        del lines[i]
    elif choice == 1:
        lines.insert(i, lines[j])
    else:
        lines[i], lines[j] = lines[j], lines[i]
    tokens[:] = tokens_of("\n".join(lines))


def mutate_text(rng: random.Random, text: str, corpus: list[str]) -> str:
    """``text`` after 1 to about 10 random edits (few edits are the most likely)."""
    tokens = tokens_of(text)
    for _ in range(1 + int(rng.expovariate(0.5))):
        _mutation(rng, tokens, corpus)
    return "".join(tokens)


def gen_mutate(rng: random.Random, corpus: list[str]) -> str:
    return mutate_text(rng, rng.choice(corpus), corpus)


def gen_grammar(rng: random.Random, corpus: list[str]) -> str:
    return grammar.program(rng)


def gen_grammar_mutate(rng: random.Random, corpus: list[str]) -> str:
    """A grammar program after token edits; half of the time only edits that keep the
    syntax (numbers, names, types, levels, operators), so that the checker and the
    lowering see well-formed programs with unexpected meaning."""
    text = grammar.program(rng)
    if rng.random() < 0.5:
        return mutate_text(rng, text, corpus)
    return semantic_mutation(rng, text)


# Classes of tokens that can replace each other without breaking the syntax.
_SWAPPABLE: tuple[tuple[str, ...], ...] = (
    ("f32", "f16", "bf16", "f64", "s32", "s8", "u8", "s16", "u16", "s64", "u32", "u64", "f8_e4m3",
     "f8_e5m2", "tf32", "half", "float", "double", "bfp16", "int", "bool", "u1", "f4_e2m1", "s4"),
    ("block", "group-4", "group", "thread", "device", "cluster"),
    ("shared", "local", "global"),
    ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "#", "#+", "#-", "#*", "#/", "#%"),
    ("<", "<=", ">", ">=", "==", "!=", "&&", "||"),
    ("dma", "tma"),
    (".chunkat", ".subspan", ".view", ".modspan", ".step", ".chunk", ".span_as", ".sqz"),
    (".at", ".from", ".chunkat"),
    (".copy", ".load", ".pad", ".transp"),
    ("row", "col"),
    ("foreach", "parallel", "with"),
    ("=", "+=", "-=", "*=", "/=", "%="),
    (".async", ".zfill", ".swiz", ".multicast"),
)
_CLASS_OF = {word: words for words in _SWAPPABLE for word in words}


def semantic_mutation(rng: random.Random, text: str) -> str:
    """1 to about 6 edits that replace a token by one of its class (or a number by an
    extreme one, a name by another name of the program)."""
    tokens = tokens_of(text)
    slots = _word_slots(tokens)
    names = [i for i in slots if re.fullmatch(r"[A-Za-z_]\w*", tokens[i])
             and tokens[i] not in _CLASS_OF]
    for _ in range(1 + int(rng.expovariate(0.7))):
        i = rng.choice(slots)
        word = tokens[i]
        if word in _CLASS_OF:
            tokens[i] = rng.choice(_CLASS_OF[word])
        elif word[:1].isdigit():
            tokens[i] = rng.choice(_INTERESTING_NUMBERS[:14]) if rng.random() < 0.5 \
                else str(rng.choice((0, 1, 2, 3, 4, 5, 8, 12, 16, 24, 32, 48, 64, 100, 128, 256)))
        elif names and i in names:
            tokens[i] = tokens[rng.choice(names)]
    return "".join(tokens)


_STATEMENT_RE = re.compile(r"^[ \t]*([^#/\n][^\n]*;)[ \t]*$", re.M)


def _statements(corpus: list[str]) -> list[str]:
    """Every one-line statement of the corpus (the grammar tour has one of each kind)."""
    return [m.group(1) for text in corpus for m in _STATEMENT_RE.finditer(text)]


def gen_splice(rng: random.Random, corpus: list[str]) -> str:
    """A valid program with statements of other programs spliced in at statement
    boundaries: each kind of statement meets each context (host, block, thread level)."""
    base = rng.choice(corpus) if rng.random() < 0.5 else grammar.program(rng)
    statements = _statements(corpus + [base])
    bounds = [m.end() for m in re.finditer(r"[;{}]\n", base)]
    if not bounds or not statements:
        return base
    code = re.sub(r"//[^\n]*|/\*[\s\S]*?\*/|\"[^\"\n]*\"", " ", base)
    names = sorted({w for w in re.findall(r"(?<![.\w])[A-Za-z_]\w*", code) if w not in KEYWORDS})
    points = sorted(rng.sample(bounds, k=min(len(bounds), rng.randint(1, 3))), reverse=True)
    for at in points:  # from the end, so that the earlier offsets stay right
        statement = rng.choice(statements)
        if names and rng.random() < 0.7:  # speak of the names of the program it goes into
            statement = re.sub(r"(?<![.\w])[A-Za-z_]\w*", lambda m: m.group(0) if m.group(0) in KEYWORDS
                               else rng.choice(names), statement)
        base = base[:at] + "  " + statement + "\n" + base[at:]
    return base


def gen_soup(rng: random.Random, corpus: list[str]) -> str:
    """Random vocabulary inside a function: exercises every parser error path."""
    words = [_vocab(rng) for _ in range(rng.randint(1, 120))]
    body = " ".join(words)
    if rng.random() < 0.5:
        return body
    head = rng.choice(("__co__ void f()", "__co__ s32 [4] f(s32 [4] a)",
                       "__co__ auto g(global f16 [M, K] a, int n)"))
    return f"{head} {{\n{body}\n}}\n"


# ----------------------------------------------------------------------------------------
# Noise: bytes, unicode, control characters
# ----------------------------------------------------------------------------------------

_ODD_CHARS = (
    "\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\r", "\x1b", "\x7f", "\x85", "\xa0",
    "\u2028", "\u2029", "\ufeff", "\u200b", "\u202e", "\ufffd", "\ud800", "\udfff", "\U0001f600",
    "\u0301", "é", "ß", "İ", "ǅ", "Ω", "中", "\u0663", "\uff13", "\u00b2", "\u2167", "\uff3f",
    "\u00aa", "𝔘", "ﬁ", "\\", "\t", "\n", "#", "\"", "'", "`", "@", "$", "?",
)


def _noise(rng: random.Random, length: int) -> str:
    mode = rng.randrange(4)
    if mode == 0:
        return bytes(rng.getrandbits(8) for _ in range(length)).decode("latin-1")
    if mode == 1:
        raw = bytes(rng.getrandbits(8) for _ in range(length))
        return raw.decode("utf-8", errors=rng.choice(("replace", "ignore", "surrogateescape")))
    if mode == 2:
        return "".join(rng.choice(_ODD_CHARS) for _ in range(length))
    return "".join(chr(rng.randrange(0x110000)) for _ in range(length))


def gen_noise(rng: random.Random, corpus: list[str]) -> str:
    length = rng.choice((1, 2, 8, 64, 512, 4096))
    if rng.random() < 0.3:
        return _noise(rng, length)
    base = rng.choice(corpus) if rng.random() < 0.6 else grammar.program(rng)
    pieces = tokens_of(base)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(pieces) + 1)
        pieces.insert(at, _noise(rng, rng.choice((1, 1, 2, 5, 20))))
    return "".join(pieces)


# ----------------------------------------------------------------------------------------
# Numbers
# ----------------------------------------------------------------------------------------

def huge_number(rng: random.Random) -> str:
    """A number literal from the edges: huge, tiny, negative, malformed, many digits."""
    kind = rng.randrange(10)
    if kind == 0:
        return "9" * rng.choice((20, 100, 4300, 4301, 5000, 100_000))
    if kind == 1:
        return "1" * rng.choice((20, 400, 5000)) + "." + "5" * rng.choice((1, 400))
    if kind == 2:
        return "0." + "0" * rng.choice((10, 400, 5000)) + "1"
    if kind == 3:
        return "0x" + "f" * rng.choice((8, 16, 17, 64, 5000))
    if kind == 4:
        return "-" + str(rng.choice((1, 2**31, 2**32, 2**63, 2**64, 10**30)))
    if kind == 5:
        return str(rng.choice((2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, 2**128)))
    if kind == 6:
        return rng.choice(("0", "-0", "00", "0u", "1ull", "1e400", "1.0e-400", "1.5f", "0.0f",
                           "1.5ff", "0x", "0b101", "0777", "08", "1_000", "1'000"))
    if kind == 7:
        return rng.choice(("inf", "-inf", "1.0 / 0.0", "-(1)", "(0 - 1)"))
    if kind == 8:
        return str(rng.randint(-(10**6), 10**6))
    return str(rng.choice((1, 2, 3, 5, 7, 13, 16, 31, 32, 33, 63, 64, 65, 127, 128, 256, 1024,
                           1025, 65536)))


def gen_literals(rng: random.Random, corpus: list[str]) -> str:
    """A program (sample or grammar) with some number literals replaced by extreme ones."""
    base = rng.choice(corpus) if rng.random() < 0.5 else grammar.program(rng)
    tokens = tokens_of(base)
    numbers = [i for i, t in enumerate(tokens) if t[:1].isdigit()]
    if not numbers:
        return base + " " + huge_number(rng)
    for i in rng.sample(numbers, k=min(len(numbers), rng.randint(1, 3))):
        tokens[i] = huge_number(rng)
    return "".join(tokens)


# ----------------------------------------------------------------------------------------
# Long lines
# ----------------------------------------------------------------------------------------

_FUNCTION = "__co__ s32 [8] f(s32 [8] a) {{\n  s32 [a.span] out;\n  int x = 1;\n{body}\n  return out;\n}}\n"


def wrap_body(body: str) -> str:
    """``body`` as the statements of a small valid function."""
    return _FUNCTION.format(body=body)


def long_line(rng: random.Random, length: int) -> str:
    """A program with one line of about ``length`` characters."""
    kind = rng.randrange(11)
    count = max(1, length // 8)
    if kind == 0:
        return wrap_body("  int y = " + " + ".join("x" for _ in range(count)) + ";")
    if kind == 1:
        return wrap_body("  " + " ".join(f"int v{i} = {i};" for i in range(count // 2)))
    if kind == 2:
        return wrap_body("  int " + "n" * length + " = 1;")
    if kind == 3:
        return wrap_body('  print("' + "s" * length + '");')
    if kind == 4:
        return wrap_body("  // " + "c" * length)
    if kind == 5:
        return wrap_body("  " + ";" * length)
    if kind == 6:
        dims = ", ".join("1" for _ in range(count // 2))
        return wrap_body(f"  s32 [{dims}] wide;")
    if kind == 7:
        params = ", ".join(f"s32 [{i + 1}] p{i}" for i in range(count // 3))
        return f"__co__ void g({params}) {{\n}}\n"
    if kind == 8:
        return wrap_body("  ituple t = {" + ", ".join("1" for _ in range(count // 2)) + "};")
    if kind == 9:
        return "int host = 0;" * (length // 13) + "\n" + wrap_body("")
    return wrap_body("  x" + " " * length + "= 1;")


def gen_long_line(rng: random.Random, corpus: list[str]) -> str:
    return long_line(rng, rng.choice((10_000, 50_000, 200_000, 1_000_000)))


# ----------------------------------------------------------------------------------------
# Deep nesting
# ----------------------------------------------------------------------------------------

DEEP_KINDS: tuple[str, ...] = (
    "paren", "subtract", "unary_not", "unary_tilde", "ternary", "binary", "call", "cast",
    "macro_call", "sizeof", "index", "at_chain", "select", "math", "bracket", "brace_tuple",
    "braced_foreach", "foreach", "parallel", "with", "while", "if", "else_if", "inthreads",
    "pp_if", "pp_ifdef", "compose", "view_chain", "comment", "string_concat",
)


def on_device(body: str) -> str:
    """``body`` inside a parallel block of a small valid function (``p`` indexes ``out``)."""
    return wrap_body(f"  parallel p by 8 {{\n{body}\n  }}")


def _deep_expr(kind: str, n: int) -> str | None:
    """An expression nesting one construct ``n`` times (None for statement kinds)."""
    table = {
        "paren": lambda: "(" * n + "x" + ")" * n,
        "subtract": lambda: "0 - (" * n + "x" + ")" * n,
        "unary_not": lambda: "(" + "!" * n + "(x > 0) ? 1 : 2)",
        "unary_tilde": lambda: "~" * n + "x",
        "ternary": lambda: "x > 0 ? x : " * n + "0",
        "binary": lambda: " + ".join("a.at(p)" for _ in range(n + 1)),
        "call": lambda: "__max(x, " * n + "x" + ")" * n,
        "cast": lambda: "__to<s32>(" * n + "x" + ")" * n,
        "macro_call": lambda: "F(" * n + "x" + ")" * n,
        "sizeof": lambda: "| " * n + "a.span" + " |" * n,
        "index": lambda: "a" + "[0]" * n,
        "at_chain": lambda: "a" + ".at(p)" * n,
        "select": lambda: "select(x, a, " * n + "a" + ")" * n + ".at(p)",
        "math": lambda: "__to<s32>(" + "__fabs(" * n + "1.5f" + ")" * n + ")",
    }
    make = table.get(kind)
    return make() if make is not None else None


def deep_source(kind: str, depth: int) -> str:
    """A program nesting one construct ``depth`` times, in device code where it can be, so
    that the checker, the lowering and the code generator all walk the nest."""
    n = depth
    expr = _deep_expr(kind, n)
    if expr is not None:
        prefix = "#define F(v) (v)\n" if kind == "macro_call" else ""
        return prefix + on_device(f"    out.at(p) = {expr};")
    if kind == "bracket":
        return wrap_body("  s = " + "[" * n + "1" + "]" * n + ";")
    if kind == "brace_tuple":
        return wrap_body("  ituple t = " + "{" * n + "1" + "}" * n + ";")
    if kind == "braced_foreach":
        return on_device("".join(f"foreach i{k} in [2] {{" for k in range(n)) + "out.at(p) = 1;"
                         + "}" * n)
    if kind == "foreach":
        return on_device("".join(f"foreach i{k} in [2] " for k in range(n)) + "out.at(p) = 1;")
    if kind == "parallel":
        return wrap_body("".join(f"parallel p{k} by 1 " for k in range(n)) + "out.at(0) = 1;")
    if kind == "with":
        return on_device("".join(f"with w{k} in 2 {{" for k in range(n)) + "out.at(p) = 1;"
                         + "}" * n)
    if kind == "while":
        return on_device("mutable int c = 0;" + "while (c < 2) {" * n + "c = c + 1;" + "}" * n)
    if kind == "if":
        return on_device("if (x > 0) " * n + "out.at(p) = 1;")
    if kind == "else_if":
        return on_device("  if (x == 0) out.at(p) = 1;"
                         + "".join(f" else if (x == {k}) out.at(p) = {k};" for k in range(n)))
    if kind == "inthreads":
        return on_device("inthreads (p == 0) {" * n + "out.at(p) = 1;" + "}" * n)
    if kind == "pp_if":
        return "#if 1\n" * n + wrap_body("") + "#endif\n" * n
    if kind == "pp_ifdef":
        return "#define X\n" + "#ifdef X\n#if defined(X) && 1\n" * (n // 2) + wrap_body("") \
            + "#endif\n#endif\n" * (n // 2)
    if kind == "compose":
        return on_device("out.at(" + " # ".join("p" for _ in range(n + 1)) + ") = 1;")
    if kind == "view_chain":
        return on_device("f = dma.copy a" + ".subspan(8).at(0)" * n + " => shared;")
    if kind == "comment":
        return wrap_body("  /*" * n + " x " + "*/" * n)
    if kind == "string_concat":
        return on_device("  print(" + ' "s"' * n + ");")
    raise ValueError(f"unknown deep kind {kind!r}")


def gen_deep(rng: random.Random, corpus: list[str]) -> str:
    # around the parser's limit (MAX_DEPTH = 400 units; a braced statement costs two) and far
    # beyond it
    depth = rng.choice((3, 50, 150, 195, 197, 199, 200, 350, 390, 394, 395, 399, 400, 401,
                        600, 1000, 3000, 10_000))
    return deep_source(rng.choice(DEEP_KINDS), depth)


# ----------------------------------------------------------------------------------------
# Macros
# ----------------------------------------------------------------------------------------

def _macro_program(rng: random.Random) -> str:
    kind = rng.randrange(14)
    n = rng.choice((5, 20, 40, 64, 200))
    body = wrap_body("  int y = X;")
    if kind == 0:
        return "#define X X\n" + body
    if kind == 1:
        return "#define X Y\n#define Y X + 1\n" + body
    if kind == 2:  # exponential object-like macros
        defs = "#define X0 x\n" + "".join(f"#define X{k} X{k - 1} + X{k - 1}\n"
                                          for k in range(1, n))
        return defs + f"#define X X{n - 1}\n" + body
    if kind == 3:  # exponential function-like macros
        return "#define D(v) v + v\n" + wrap_body("  int y = " + "D(" * n + "x" + ")" * n + ";")
    if kind == 4:
        return "#define F(a) F(a) + G(a)\n#define G(a) F(a)\n" + wrap_body("  int y = F(x);")
    if kind == 5:
        return "#define CAT(a, b) a ## b\n#define S(a) #a\n" \
            + wrap_body("  int CAT(y, 1) = CAT(1, 2) + CAT(, x) + CAT(x, );\n  print(S(x y));")
    if kind == 6:
        return "#define V(...) __VA_ARGS__\n#define W(a, ...) a , ## __VA_ARGS__\n" \
            + wrap_body("  int y = __max(V(x, 1));\n  int z = __max(W(x, 2));\n  int u = V();")
    if kind == 7:
        return "#define F(a, b) a\n" + wrap_body("  int y = F(x;") + "\n F("
    if kind == 8:
        return rng.choice(("#define F(\n", "#define F(a,\n", "#define F(a a) a\n",
                           "#define F(...) __VA_ARGS__ ##\n", "#define ## x\n",
                           "#define defined 1\n", "#define F(a, a) a\n", "#undef\n",
                           "#pragma push_macro(\"X\")\n#define X 2\n#pragma pop_macro(\"X\")\n",
                           "#define X 1\n#define X 2\n", "#if\n#endif\n", "#endif\n", "#else\n",
                           "#elif 1\n", "#if 1\n#else\n#else\n#endif\n", "#if 1\n",
                           "#ifdef\n#endif\n", "#if defined\n#endif\n", "#if (\n#endif\n",
                           "#if 1/0\n#endif\n", "#if 1 ? 2\n#endif\n")) + body.replace("X", "1")
    if kind == 9:  # #if expressions with random operators
        ops = ("+", "-", "*", "/", "%", "<<", ">>", "&&", "||", "==", "<", "?", ":", "&", "|",
               "^", "!", "~", "(", ")", ",")
        atoms = ("0", "1", "-1", "X", "defined X", "defined(X)", "9223372036854775807",
                 "18446744073709551615u", "0x7f", "'a'", "'\\x41'", "'ab'", "64", "65")
        expr = " ".join(rng.choice(atoms + ops) for _ in range(rng.randint(1, 30)))
        return f"#define X 3\n#if {expr}\n" + body.replace("X", "1") + "#endif\n"
    if kind == 10:  # macros as shapes and bounds
        return "#define T 16\n#define H (T / 2)\n#define B(n) [n, n]\n" \
            "__co__ s32 [T, T] f(s32 [T, T] a) {\n  s32 [a.span] out;\n" \
            "  parallel {p, q} by B(2) {\n    foreach {i, j} in B(H)\n" \
            "      out.at(p # i, q # j) = a.at(p # i, q # j);\n  }\n  return out;\n}\n"
    if kind == 11:  # macro argument list across lines and directives
        return "#define F(a, b) a + b\n" + wrap_body("  int y = F(x,\n#define Z 1\n x);")
    if kind == 12:  # a long chain of macros, one per line
        defs = "".join(f"#define M{k} M{k + 1}\n" for k in range(n * 10)) + f"#define M{n * 10} x\n"
        return defs + wrap_body("  int y = M0;")
    return "#define F(x) F(x x)\n" + wrap_body("  int y = F(x);")


_DIRECTIVE_NAMES = tuple(sorted(_pp_directives)) + ("", "12", "unknown", "define X(", "if(")
_DIRECTIVE_ARGS = ("X", "X 1", "(X)", "X(a) a", "1", "0", "-1", "2147483647", "2147483648",
                   "9" * 5000, "\u00b2", "\"file.co\"", "5 \"a.co\"", "5 \"", "<x.h>", "\"x.h\"",
                   "push_macro(\"X\")", "pop_macro(\"X\")", "defined X", "defined(", "1 ? 2 : 3",
                   "__has_include(<x>)", "'a'", "'\\x41'", "1/0", "X ## Y", "#X", "...", "\\",
                   "/* c */ 1", "// c", "")


def gen_directives(rng: random.Random, corpus: list[str]) -> str:
    """A program with random directive lines (every directive name, odd arguments) at
    random line starts."""
    lines = (rng.choice(corpus) if rng.random() < 0.7 else grammar.program(rng)).split("\n")
    for _ in range(rng.randint(1, 8)):
        args = " ".join(rng.choice(_DIRECTIVE_ARGS) for _ in range(rng.randint(0, 3)))
        lines.insert(rng.randrange(len(lines) + 1), f"#{rng.choice(_DIRECTIVE_NAMES)} {args}")
    return "\n".join(lines)


def gen_macros(rng: random.Random, corpus: list[str]) -> str:
    text = _macro_program(rng)
    return mutate_text(rng, text, corpus) if rng.random() < 0.3 else text


# ----------------------------------------------------------------------------------------
# Big sources
# ----------------------------------------------------------------------------------------

def big_source(rng: random.Random, size: int, corpus: list[str]) -> str:
    """A source of about ``size`` characters, made in one of several ways."""
    kind = rng.randrange(5)
    if kind == 0:  # many functions
        parts, total, k = [], 0, 0
        while total < size:
            piece = rng.choice(corpus).replace("__co__ ", "__co__ ", 1)
            piece = re.sub(r"(__co__[^(]*?)(\w+)\(", lambda m, k=k: f"{m.group(1)}{m.group(2)}_{k}(",
                           piece)
            parts.append(piece)
            total += len(piece)
            k += 1
        return "\n".join(parts)
    if kind == 1:  # many statements in one function
        count = size // 30
        return wrap_body("\n".join(f"  int v{i} = x + {i % 97};" for i in range(count)))
    if kind == 2:  # long host code around one function
        host = "int host(int x) { return x + 1; }\n" * (size // 36)
        return host + wrap_body("") + host
    if kind == 3:  # a huge comment
        return wrap_body("  /* " + "comment text " * (size // 13) + " */")
    return wrap_body(" ".join(_vocab(rng) for _ in range(size // 6)))


def gen_big(rng: random.Random, corpus: list[str]) -> str:
    return big_source(rng, rng.choice((100_000, 300_000, 1_000_000, 2_000_000)), corpus)


def huge_source(kind: str = "statements", size: int = 10 * 1024 * 1024) -> str:
    """A source of at least ``size`` characters (the 10 MB inputs of the tests)."""
    if kind == "statements":
        line = "  out.at(0) = a.at(1) + x * 2;\n"
        return wrap_body(line * (size // len(line) + 1))
    if kind == "functions":
        fn = ("__co__ s32 [8] fn{k}(s32 [8] a) {{\n  s32 [a.span] out;\n"
              "  parallel p by 8\n    out.at(p) = a.at(p) + {k};\n  return out;\n}}\n")
        parts, total, k = [], 0, 0
        while total < size:
            piece = fn.format(k=k)
            parts.append(piece)
            total += len(piece)
            k += 1
        return "".join(parts)
    if kind == "host":
        host = "int host(int x) { return x + 1; }\n"
        return host * (size // len(host) + 1) + wrap_body("")
    if kind == "garbage":
        rng = random.Random(10)
        words = [rng.choice(VOCABULARY) for _ in range(4096)]
        chunk = " ".join(words)
        return wrap_body(chunk * (size // len(chunk) + 1))
    raise ValueError(f"unknown huge kind {kind!r}")


HUGE_KINDS: tuple[str, ...] = ("statements", "functions", "host", "garbage")

_ODD_VALUES: tuple[object, ...] = (
    0, 1, -1, 16, 2**31, 2**63, 2**64, 10**30, 10**5000, -(10**400), 0.5, -2.5, 1e300, 1e-300,
    float("inf"), float("-inf"), float("nan"), True, None, "", "1 +", "(", ")", "x", "#", "\\",
    "/*", "//", '"', "'", "\n#define Y", "\x00", "é", "1" * 10_000, "X", "F(", "__co__",
    "{", "}", ";", "16, 16", "[4]", "1.5f", "0x10", "group-4",
)
_ODD_NAMES = ("X", "Y", "F(a)", "F(a, b)", "G(...)", "1X", "", "a b", "X(", "defined", "__co__",
              "int", "M", "K", "N", "é", "X\n")


def gen_defines(rng: random.Random, corpus: list[str]) -> tuple[str, dict[str, object]]:
    """A program compiled with odd ``defines``: its own macro names (and others) set to
    huge, tiny, non-finite, empty or syntactically broken values."""
    text = rng.choice(corpus) if rng.random() < 0.6 else grammar.program(rng)
    names = re.findall(r"#define\s+(\w+)", text) + list(_ODD_NAMES)
    defines = {rng.choice(names): rng.choice(_ODD_VALUES) for _ in range(rng.randint(1, 4))}
    return text, defines


def gen_huge(rng: random.Random, corpus: list[str]) -> str:
    return huge_source(rng.choice(HUGE_KINDS))


# name -> (generator, weight in a mixed run)
GENERATORS: dict[str, tuple[Generator, float]] = {
    "mutate": (gen_mutate, 28),
    "grammar": (gen_grammar, 18),
    "grammar_mutate": (gen_grammar_mutate, 18),
    "splice": (gen_splice, 10),
    "soup": (gen_soup, 5),
    "noise": (gen_noise, 7),
    "literals": (gen_literals, 7),
    "macros": (gen_macros, 4),
    "defines": (gen_defines, 2),
    "directives": (gen_directives, 3),
    "deep": (gen_deep, 2),
    "long_line": (gen_long_line, 0.8),
    "big": (gen_big, 0.5),
    "huge": (gen_huge, 0.04),
}


def pick_generator(rng: random.Random, names: list[str] | None = None) -> str:
    """A generator name drawn by weight (among ``names`` when given)."""
    pool = [(n, w) for n, (_, w) in GENERATORS.items() if names is None or n in names]
    return rng.choices([n for n, _ in pool], weights=[w for _, w in pool])[0]


def make_input(seed: int, index: int, corpus: list[str], names: list[str] | None = None
               ) -> tuple[str, str, dict[str, object] | None]:
    """(generator name, text, defines) of input ``index`` of a run with ``seed``: always
    the same for the same arguments."""
    rng = random.Random(f"{seed}:{index}")
    name = pick_generator(rng, names)
    return (name, *split_input(GENERATORS[name][0](rng, corpus)))


def split_input(made: str | tuple[str, dict[str, object]]) -> tuple[str, dict[str, object] | None]:
    """(text, defines) of what a generator made."""
    return (made, None) if isinstance(made, str) else made
