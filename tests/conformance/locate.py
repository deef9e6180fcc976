"""Where an upstream negative test expects its diagnostics.

Upstream FileCheck lines rarely carry a location: most are a bare ``CHECK: error: <message>``
placed after the function(s) it is about (or, in a few files, at the top of the file or
inside the function, next to the offending statement). The line is worked out from, in
order of trust:

1. ``explicit``: the pattern names a location (``file:LINE.COL: error``, ``[[@LINE+n]]``);
   a location inside a ``#line``/``#inline`` region must be reported remapped.
2. ``echo``: the directive after the message repeats a source line (upstream prints the
   offending line under the message).
3. ``hint``: the code lines of the functions the directive is about, scored by what the
   message names: quoted identifiers, constructs (``wait``, ``swap``, ``dma.``, ...),
   numbers, a nearby ``// error``-style comment; the best-scoring lines are kept.
4. ``region``: nothing in the message points anywhere; every code line of those functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import Enum

from .lit import Directive, line_expressions, literal_text, pattern_regex
from .source import SourceFile, physical_line


class Role(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    SUMMARY = "summary"
    ECHO = "echo"
    CARET = "caret"
    OTHER = "other"  # output of a run that is not required to fail


@dataclass(frozen=True)
class Expectation:
    """One diagnostic that upstream requires (``count`` times), and where."""

    directive_line: int
    message: str
    count: int
    lines: tuple[int, ...]
    how: str
    reported: tuple[str | None, int] | None = None  # remapped location to be reported
    role: Role = Role.ERROR  # WARNING or SUMMARY: stand-ins when no error is named


_SUMMARY_RE = re.compile(
    r"Totally\b.*\berrors? ha(?:ve|s) been detected|Parsing failed due to syntax errors"
    r"|^Assertion failed|errors? generated", re.IGNORECASE)
_LOCATION_RE = re.compile(r"(?:(?<![\w.])([\w./-]+\.\w+):)?(\d+)[.:](\d+):\s*(?:error|warning)")


# ----------------------------------------------------------------------------- roles


def roles(directives: list[Directive], source: SourceFile, must_fail: bool = True) -> list[Role]:
    """What each positive directive stands for; negative directives get ``INFO``. In a run
    that must fail, a plain message is an error; otherwise only text saying ``error`` is."""
    result: list[Role] = []
    for directive in directives:
        previous = result[-1] if result else None
        role = _role(directive, source, previous)
        if role is Role.ERROR and not must_fail and not re.search(r"\berror\b", directive.pattern):
            role = Role.OTHER
        result.append(role)
    return result


def _role(directive: Directive, source: SourceFile, previous: Role | None) -> Role:
    if not directive.positive:
        return Role.INFO
    text = directive.pattern
    literal = literal_text(text)
    if previous in (Role.ECHO, Role.CARET, Role.ERROR) and re.fullmatch(r"[\^~ ]+", literal):
        return Role.CARET
    if _SUMMARY_RE.search(literal):
        return Role.SUMMARY
    if re.search(r"\bwarning\b", text):
        return Role.WARNING
    if re.search(r"(?:^|\s)(?:info|note|remark):", text):
        return Role.INFO
    if not re.search(r"\berror\b", text) and previous in (Role.ERROR, Role.ECHO) \
            and _echoes_source(literal, source):
        return Role.ECHO
    return Role.ERROR


def _echoes_source(literal: str, source: SourceFile) -> bool:
    if len(literal) < 4:
        return False
    return any(literal in " ".join(line.split()) for line in source.lines
               if not _is_directive_line(line))


def _is_directive_line(line: str) -> bool:
    return bool(re.search(r"(?<![\w-])[A-Z][A-Z0-9_-]*:", line)) and line.lstrip().startswith("//")


# ----------------------------------------------------------------------------- expectations


def expectations(directives: list[Directive], source: SourceFile, must_fail: bool = True,
                 use_warnings: bool = False) -> list[Expectation]:
    """Expected errors of one program. With ``use_warnings`` (a must-fail program whose
    FileCheck lines name no error), warnings and summaries stand in as location evidence."""
    kinds = roles(directives, source, must_fail)
    wanted = {Role.ERROR} | ({Role.WARNING, Role.SUMMARY} if use_warnings else set())
    found: list[Expectation] = []
    for index, (directive, role) in enumerate(zip(directives, kinds)):
        if role not in wanted:
            continue
        echo = _following_echo(directives, kinds, index)
        found.append(replace(locate(directive, source, directives, echo), role=role))
    return found


def _following_echo(directives: list[Directive], kinds: list[Role], index: int) -> Directive | None:
    if index + 1 < len(directives) and kinds[index + 1] is Role.ECHO:
        return directives[index + 1]
    return None


def locate(directive: Directive, source: SourceFile, all_directives: list[Directive],
           echo: Directive | None = None) -> Expectation:
    explicit = _explicit(directive, source)
    if explicit is not None:
        return explicit
    region = owner_region(directive.line, source, all_directives)
    if echo is not None:
        lines = _echo_lines(echo, source, region)
        if lines:
            return Expectation(directive.line, directive.pattern, directive.count, lines, "echo")
    lines, how = _scored_lines(directive, source, region)
    return Expectation(directive.line, directive.pattern, directive.count, lines, how)


def _explicit(directive: Directive, source: SourceFile) -> Expectation | None:
    numbers = line_expressions(directive.pattern, directive.line)
    if numbers:
        return Expectation(directive.line, directive.pattern, directive.count,
                           tuple(numbers), "explicit")
    match = _LOCATION_RE.search(literal_text(directive.pattern))
    if not match:
        return None
    filename, line = match.group(1), int(match.group(2))
    physical = physical_line(source.lines, filename, line)
    if physical is None:
        return None
    remapped = (filename, line) if (filename is not None or physical != line) else None
    return Expectation(directive.line, directive.pattern, directive.count, (physical,),
                       "explicit", remapped)


def _echo_lines(echo: Directive, source: SourceFile, region: list[int]) -> tuple[int, ...]:
    regex = pattern_regex(echo.pattern, echo.line)
    hits = [n for n, text in enumerate(source.lines, 1)
            if n != echo.line and not _is_directive_line(text) and regex.search(text)]
    inside = [n for n in hits if n in region]
    return tuple(inside or hits)


# ----------------------------------------------------------------------------- regions


def owner_region(line: int, source: SourceFile, all_directives: list[Directive]) -> list[int]:
    """Physical lines of the function(s) a directive on ``line`` is about."""
    functions = source.functions
    if not functions:
        return list(range(1, len(source.lines) + 1))
    inside = source.function_at(line)
    if inside is not None:
        return list(range(inside[0], inside[1] + 1))
    owned = _owned_functions(line, functions, all_directives, source)
    return [n for start, end in owned for n in range(start, end + 1)]


def _owned_functions(line: int, functions: list[tuple[int, int]],
                     all_directives: list[Directive],
                     source: SourceFile) -> list[tuple[int, int]]:
    """Directives outside functions form blocks; a block is about the functions between
    the previous block and itself (a block above every function: those up to the next)."""
    def ended_before(at: int) -> int:
        return sum(1 for _, end in functions if end < at)

    outside = sorted({d.line for d in all_directives if source.function_at(d.line) is None})
    counts = sorted({ended_before(at) for at in outside})
    mine = ended_before(line)
    position = counts.index(mine) if mine in counts else 0
    if mine == 0:
        upto = counts[position + 1] if position + 1 < len(counts) else len(functions)
        return functions[:upto]
    previous = counts[position - 1] if position > 0 else 0
    return functions[previous:mine]


# ----------------------------------------------------------------------------- scoring

# What a message word says about the source construct it is about (a generic reading of
# the DSL, not of any particular test): message regex -> source regex.
CONSTRUCTS: tuple[tuple[str, str], ...] = (
    (r"\breturn", r"\breturn\b"),
    (r"\byield", r"\byield\b"),
    (r"\bbreak", r"\bbreak\b"),
    (r"\bcontinue", r"\bcontinue\b"),
    (r"\bwait", r"\bwait\b"),
    (r"\bswap|\brotate", r"\b(?:swap|rotate)\s*\("),
    (r"\binthreads", r"\binthreads\b"),
    (r"launch_bounds", r"\blaunch_bounds\b"),
    (r"maxnreg", r"\bmaxnreg\b"),
    (r"\bunroll", r"\bunroll\b"),
    (r"__asm__|\basm\b", r"__asm__"),
    (r"\bgoto\b", r"\bgoto\b"),
    (r"\bselect", r"\bselect\s*\("),
    (r"chunkat|tiling factor|\btile\b", r"\.chunkat\b"),
    (r"subspan", r"\.subspan\b"),
    (r"span_?as", r"\.span_as\b"),
    (r"\bsqz\b|\.sqz", r"\.sqz\b"),
    (r"\btrigger", r"\btrigger\b"),
    (r"\bmma\b|\bMMA\b|wgmma|WGMMA|fragment", r"\bmma\."),
    (r"\bfill\b", r"\bmma\.fill\b"),
    (r"\bdma\b|\bDMA\b|\bcopy\b", r"\bdma\."),
    (r"\btma\b|\bTMA\b", r"\btma\."),
    (r"\bpad\b|\bPAD\b|pad_", r"\.pad\b"),
    (r"transpose|TRANSPOSE", r"\.transp"),
    (r"parallel|paraby", r"\bparallel\b"),
    (r"\bmutable", r"\bmutable\b"),
    (r"\bstring", r"\""),
    (r"\bpointer", r"\*"),
    (r"\bevent", r"\bevent\b"),
    (r"\bstream", r"\bstream\b|parallel\s*<"),
    (r"barrier", r"\bsync\.barrier\b"),
    (r"cooperative", r"\bcooperative\b"),
    (r"swizzle|\bswiz", r"swiz"),
    (r"\bevict", r"evict"),
    (r"k_tiles|schedule", r"\bk_tiles\b|\bschedule\b"),
    (r"\bcall\b|kernel function", r"\bcall\b"),
    (r"foreach|iteration variable", r"\bforeach\b"),
    (r"with-matcher|with statement|with variable|within|with-in", r"\bwith\b"),
    (r"\bassert", r"\bassert\b"),
    (r"literal", r"\b\d{10,}|\b0x[0-9a-fA-F]{9,}"),
    (r"\blocal\b", r"\blocal\b"),
    (r"\bshared\b", r"\bshared\b"),
    (r"\bglobal\b", r"\bglobal\b"),
    (r"\basync", r"\.async\b"),
    (r"dma\.any|placeholder", r"\bdma\.any\b"),
    (r"\bituple", r"\bituple\b|=\s*\{"),
    (r"\bmdspan|\bspan\b", r"\bmdspan\b|:\s*\["),
    (r"if-condition", r"\bif\b"),
    (r"\bwhile\b", r"\bwhile\b"),
    (r"device target", r"\bdevice\b"),
    (r"\bcast\b", r"\bcast\b|\(\s*[a-z]\w*\s*\)"),
    (r"(?<!of )\bbounds?\b", r"\bby\b"),
    (r"\bindex\b.*out of bounds", r"\.at\s*\(|\w\s*\["),
    (r"\boffset\b.*out of bounds", r"\.from\s*\("),
    (r"trigger-after", r"\btrigger\b.*\bafter\b"),
    (r"\barray\b", r"\w\s*\["),
    (r"by reference", r"&"),
)
_ERROR_COMMENT_RE = re.compile(
    r"\b(?:error|errors|fail|fails|illegal|invalid|not allow\w*|disallow\w*|forbid\w*|wrong|bad"
    r"|reject\w*|should fail|must fail|oob|out of bound\w*|exceed\w*|redefine|re-?assign\w*"
    r"|mismatch\w*|unmatch\w*|conflict\w*|redef\w*|not allowed|can ?not|cannot)\b",
    re.IGNORECASE)
_OK_COMMENT_RE = re.compile(r"^\s*(?:ok|legal|fine|valid)\b", re.IGNORECASE)
KEYWORDS = frozenset("""
parallel by block thread group group-4 device foreach with in within local shared global
mutable wait trigger event stream auto void int bool float half f16 bf16 f32 f64 s8 s16 s32
s64 u8 u16 u32 u64 mdspan ituple return yield break if else while call select inthreads
cooperative async sync dma mma tma""".split())
_STOPWORDS = frozenset("""
error warning the a an of to in is are be can not and or but by for with as at on from
than into type types value values got get expect expected expects must only have has been
was were it its this that which use used using declared defined already symbol variable
variables operation statement function functions argument arguments parameter parameters
int""".split())


def _scored_lines(directive: Directive, source: SourceFile,
                  region: list[int]) -> tuple[tuple[int, ...], str]:
    if re.search(r"#\s*(?:if|ifdef|ifndef|else|elif|endif|define|include)\b", directive.pattern):
        return _directive_lines(source, region), "hint"
    code_lines = [n for n in region if source.is_code(n)]
    if not code_lines:
        return tuple(region), "region"
    message = literal_text(directive.pattern, gap="")
    hints = message_hints(message)
    near = _next_code_line(directive.line, source, region)
    scores = {n: _score(n, source, hints, message, near) for n in code_lines}
    best = max(scores.values())
    if best <= 0:
        return tuple(code_lines), "region"
    return tuple(n for n in code_lines if scores[n] == best), "hint"


def _directive_lines(source: SourceFile, region: list[int]) -> tuple[int, ...]:
    """A preprocessor complaint: the conditional-opening lines (else every directive)."""
    lines = [n for n in range(1, len(source.lines) + 1)
             if re.match(r"\s*#\s*if", source.lines[n - 1])]
    return tuple(lines or [n for n in region if re.match(r"\s*#", source.lines[n - 1])] or region)


@dataclass(frozen=True)
class Hints:
    names: tuple[str, ...]
    constructs: tuple[str, ...]
    numbers: tuple[str, ...]
    words: tuple[str, ...]


def message_hints(message: str) -> Hints:
    """Identifiers, constructs and numbers that a diagnostic message names."""
    message = re.sub(r"(?:::[A-Za-z_]\w*)*::([A-Za-z_]\w*)", r"\1", message)
    names = _quoted_names(message)
    constructs = tuple(src for msg, src in CONSTRUCTS if re.search(msg, message))
    constructs += _unexpected_token(message) + _quoted_operators(message)
    numbers = tuple(dict.fromkeys(re.findall(r"(?<![\w.])-?\d+(?![\w.])", message)))
    words = tuple(dict.fromkeys(
        w for w in re.findall(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Za-z]*_[\w]*", message)
        if w not in names and w.strip("_")))
    return Hints(names, constructs, numbers, words)


def _unexpected_token(message: str) -> tuple[str, ...]:
    """A parser's ``unexpected X``: punctuation or a keyword token the line must hold."""
    match = re.search(r"\bunexpected ([^\s,]+)", message)
    if not match:
        return ()
    token = match.group(1)
    if not re.search(r"\w", token):
        return (re.escape(token),)
    if token.isupper() and token.lower() in KEYWORDS:
        return (rf"\b{token.lower()}\b",)
    return ()


def _quoted_operators(message: str) -> tuple[str, ...]:
    """Operators a message quotes (`*`, "&&"): the line must apply one."""
    ops = re.findall(r"[`'\"]([-+*/%&|^<>=!]{1,3})[`'\"]", message)
    return tuple(rf"(?<![-+*/%&|^<>=!]){re.escape(op)}" for op in dict.fromkeys(ops))


def _quoted_names(message: str) -> tuple[str, ...]:
    """Names a message quotes on their own: `x', 'x`, "x", (x), x(...) -- not keywords."""
    found: list[str] = []
    quoted = re.findall(r"[`'\"]([^`'\"\s]+)[`'\"]", message)
    quoted += re.findall(r"\(([A-Za-z_]\w*)\)", message)
    quoted += re.findall(r"(?:^|vs\.\s+|\s)([A-Za-z_]\w*)\(", message)
    for item in quoted:
        for name in re.findall(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*", item.split("::")[-1]):
            if name.lower() not in _STOPWORDS and name not in KEYWORDS and name not in found:
                found.append(name)
    return tuple(found)


def _score(number: int, source: SourceFile, hints: Hints, message: str, near: int | None) -> int:
    code = source.code(number)
    score = 0
    for name in hints.names:
        if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", code):
            score += 3
    for word in hints.words:
        if re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", code):
            score += 3
    for construct in hints.constructs:
        if re.search(construct, code):
            score += 2
    for num in hints.numbers:
        if re.search(rf"(?<![\w.]){re.escape(num)}(?![\w.])", code):
            score += 1
    comment = source.comment(number)
    if comment and _OK_COMMENT_RE.search(comment):
        score -= 2
    elif comment and _ERROR_COMMENT_RE.search(comment):
        score += 2
    if number == near:
        score += 3
    if _is_signature(number, source):
        score += 2 if re.search(r"parameter|argument|function", message, re.IGNORECASE) else -2
    return score


def _is_signature(number: int, source: SourceFile) -> bool:
    span = source.function_at(number)
    if span is None:
        return False
    for n in range(span[0], span[1] + 1):
        if "{" in source.code(n):
            return number <= n
    return number == span[0]


def _next_code_line(line: int, source: SourceFile, region: list[int]) -> int | None:
    """For a directive inside a function: the code line it sits on top of."""
    if source.function_at(line) is None:
        return None
    for n in range(line + 1, len(source.lines) + 1):
        if n not in region:
            return None
        if source.is_code(n):
            return n
    return None
