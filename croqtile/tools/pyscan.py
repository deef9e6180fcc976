"""Find Croqtile sources embedded in Python files, and map positions back to the file.

``croqtile check`` checks ``.py`` files by finding calls of ``croqtile.compile`` whose
source argument is a string literal, compiling that text, and reporting each diagnostic
at the ``.py`` file's own line and column. parso parses the file because it keeps exact
positions of every token and recovers from syntax errors elsewhere in the file.

What is recognised:

- callees ``croqtile.compile``, an alias of the module (``import croqtile as ct`` ->
  ``ct.compile``), ``compile`` imported from croqtile (``from croqtile import compile as
  cc``, or a star import), and the same for ``croqtile.api``;
- the source as the first positional argument or as ``src=``: a plain, raw or triple-quoted
  literal, adjacent literals concatenated implicitly, possibly parenthesised, or a name
  bound once, in the call's scope or an enclosing one, to such a literal
  (``SRC = \"\"\"...\"\"\"``);
- a static ``defines={...}`` dict (or a name bound to one) and a literal ``filename=``.

Not recognised: f-strings and bytes (not static text), ``+`` concatenation, calls such as
``textwrap.dedent(...)`` around the literal, ``croqtile.load`` (it takes a path).

Positions are exact, escape sequences included: the decoded text is built piece by piece
(verbatim runs and single escapes) and every piece remembers where it came from in the
file, so an offset of the decoded text maps to a file offset. An escape maps to its first
character (or, for an end position, just past it). If that piecewise decoding ever
disagreed with Python's own (``ast.literal_eval``), the text is still checked but every
position falls back to the start of the literal (``EmbeddedSource.exact`` is False).
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import re
import warnings
from dataclasses import dataclass
from typing import Iterator

import parso
from parso.python import tree
from parso.tree import NodeOrLeaf

from ..frontend.diagnostics import Diagnostic, Note
from ..frontend.source import Location, Source

DefineValue = int | float | str | None

# Fully qualified callees that compile a source text.
_TARGETS = frozenset({"croqtile.compile", "croqtile.api.compile"})
_MODULES = frozenset({"croqtile", "croqtile.api"})

# One escape sequence of a non-raw str literal. A backslash before any other character is
# kept as is by Python (with a warning), which the catch-all alternative reproduces.
_ESCAPE = re.compile(r"\\(?:\n|[0-7]{1,3}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}"
                     r"|N\{[^}\n]*\}|.)", re.S)

# Names bound to names bound to ... a literal: follow a few links, never loop.
_MAX_NAME_HOPS = 8


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of the decoded text and the file range it came from.

    A ``verbatim`` piece was copied character by character; an escape piece is one
    decoded character (or none, for a line continuation) made of several file characters.
    """

    text_start: int
    file_start: int
    file_end: int
    verbatim: bool


@dataclass(frozen=True)
class EmbeddedSource:
    """A Croqtile source found in a Python file."""

    text: str  # the decoded source, as croqtile.compile receives it
    pieces: tuple[Piece, ...]  # ascending text_start; maps text offsets to file offsets
    literal_start: int  # file offset of the (first) literal, prefix and quotes included
    defines: dict[str, DefineValue] | None = None
    static_defines: bool = True  # False: the call passes defines that are not a literal
    filename: str | None = None  # a literal filename= argument
    exact: bool = True  # False: every position falls back to literal_start

    def file_offset(self, offset: int, *, is_end: bool = False) -> int:
        """File offset of an offset of ``text`` (``is_end``: an exclusive end)."""
        if not self.exact or not self.pieces:
            return self.literal_start + (1 if is_end else 0)
        offset = max(0, min(offset, len(self.text)))
        if is_end and offset > 0:
            # An end belongs to the character before it: map that one, then step past it.
            piece = self._piece_at(offset - 1)
            if piece.verbatim:
                return piece.file_start + (offset - 1 - piece.text_start) + 1
            return piece.file_end
        if offset == len(self.text):
            return self.pieces[-1].file_end
        piece = self._piece_at(offset)
        if piece.verbatim:
            return piece.file_start + (offset - piece.text_start)
        return piece.file_start

    def _piece_at(self, offset: int) -> Piece:
        # The last piece starting at or before offset: a line continuation's piece holds no
        # text and shares its text_start with the next piece, which bisect_right prefers.
        index = bisect.bisect_right([p.text_start for p in self.pieces], offset) - 1
        return self.pieces[max(index, 0)]

    @property
    def content_start(self) -> int:
        """File offset of the first character of the text (after prefix and quotes)."""
        return self.file_offset(0)


def find_sources(code: str) -> list[EmbeddedSource]:
    """Every Croqtile source passed as a static string to ``croqtile.compile`` in ``code``.

    ``code`` should have ``\\n`` line ends (``Path.read_text`` gives that). A source used
    by several calls with the same defines is returned once.
    """
    module = parso.parse(code)
    scanner = _Scanner(module, _line_starts(code))
    found: list[EmbeddedSource] = []
    seen: set[tuple[int, str]] = set()
    for call in scanner.compile_calls():
        src = scanner.embedded(call)
        if src is None:
            continue
        key = (src.literal_start, repr(sorted((src.defines or {}).items())))
        if key not in seen:
            seen.add(key)
            found.append(src)
    return found


def relocate(diag: Diagnostic, src: EmbeddedSource, file: Source) -> Diagnostic:
    """``diag``, reported against ``src.text`` (no offsets), placed in the Python ``file``."""
    lines = _line_starts(src.text)

    def place(loc: Location) -> tuple[Location, str]:
        start = src.file_offset(_offset(lines, loc.line, loc.column))
        end = src.file_offset(_offset(lines, loc.end_line, loc.end_column), is_end=True)
        line, column = file.line_col(start)
        end_line, end_column = file.line_col(max(end, start + 1))
        return (Location(file.filename, line, column, end_line, end_column),
                file.line_text(line))

    location, source_line = place(diag.location)
    notes = []
    for note in diag.notes:
        if note.location is None:
            notes.append(note)
        else:
            note_loc, note_line = place(note.location)
            notes.append(Note(note.message, note_loc, note_line))
    return dataclasses.replace(diag, location=location, source_line=source_line,
                               notes=tuple(notes))


# ----------------------------------------------------------------------------------------
# Offsets
# ----------------------------------------------------------------------------------------


def _line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def _offset(line_starts: list[int], line: int, column: int) -> int:
    """Offset of a 1-based line and column (as ``Source.line_col`` gives them)."""
    index = max(0, min(line - 1, len(line_starts) - 1))
    return line_starts[index] + max(0, column - 1)


# ----------------------------------------------------------------------------------------
# The parso tree
# ----------------------------------------------------------------------------------------


class _Scanner:
    """Walks one parsed module: import bindings, compile calls, static values."""

    def __init__(self, module: tree.Module, line_starts: list[int]) -> None:
        self.module = module
        self.line_starts = line_starts
        self.bindings = self._bindings()

    def file_offset(self, pos: tuple[int, int]) -> int:
        line, column = pos  # parso: 1-based line, 0-based column
        return self.line_starts[line - 1] + column

    # --- which calls --------------------------------------------------------------------

    def _bindings(self) -> dict[str, str]:
        """Local name -> what it is bound to, for imports of croqtile (anywhere in the file:
        a function-level import is taken as file-wide, which is close enough for a linter)."""
        bound = {"croqtile": "croqtile"}
        for node in _walk(self.module):
            if isinstance(node, tree.ImportName):
                for name, path in zip(node.get_defined_names(), node.get_paths()):
                    dotted = ".".join(p.value for p in path)
                    # `import croqtile.api` binds `croqtile`; `import croqtile.api as a` binds a.
                    target = path[0].value if name is path[0] else dotted
                    if dotted.split(".")[0] == "croqtile":
                        bound[name.value] = target
            elif isinstance(node, tree.ImportFrom) and node.level == 0:
                module = ".".join(n.value for n in node.get_from_names())
                if module not in _MODULES:
                    continue
                if node.is_star_import():
                    bound["compile"] = module + ".compile"
                for name, path in zip(node.get_defined_names(), node.get_paths()):
                    bound[name.value] = ".".join(p.value for p in path)
        return bound

    def compile_calls(self) -> Iterator[tree.PythonNode]:
        """The argument trailers ``( ... )`` of every call of croqtile's compile."""
        for node in _walk(self.module):
            if node.type not in ("atom_expr", "power") or not isinstance(node, tree.BaseNode):
                continue
            children = [c for c in node.children if not (c.type == "keyword" and c.value == "await")]
            if not children or children[0].type != "name":
                continue
            dotted = [children[0].value]
            for trailer in children[1:]:
                if trailer.type != "trailer":
                    break
                opener = trailer.children[0].value
                if opener == "." and trailer.children[1].type == "name":
                    dotted.append(trailer.children[1].value)
                    continue
                if opener == "(" and self._is_compile(dotted):
                    yield trailer
                break

    def _is_compile(self, dotted: list[str]) -> bool:
        head = self.bindings.get(dotted[0])
        return head is not None and ".".join([head, *dotted[1:]]) in _TARGETS

    # --- what they pass -----------------------------------------------------------------

    def embedded(self, trailer: tree.PythonNode) -> EmbeddedSource | None:
        positional, keywords = _arguments(trailer)
        if positional is None or len(positional) > 1:
            return None  # *args, or more than croqtile.compile takes (the builtin compile?)
        source_node = positional[0] if positional else keywords.get("src")
        literal = self._static(source_node)
        if literal is None:
            return None
        decoded = self._decode(literal)
        if decoded is None:
            return None
        text, pieces, exact = decoded
        defines, static_defines = self._defines(keywords.get("defines"))
        return EmbeddedSource(
            text=text, pieces=pieces, literal_start=self.file_offset(literal.start_pos),
            defines=defines, static_defines=static_defines,
            filename=self._filename(keywords.get("filename")), exact=exact)

    def _defines(self, node: NodeOrLeaf | None) -> tuple[dict[str, DefineValue] | None, bool]:
        if node is None:
            return None, True
        value = _literal_value(self._static(node, strings_only=False))
        if value is None:  # defines=None, spelled out
            return None, True
        if isinstance(value, dict) and all(isinstance(k, str) for k in value) and all(
                v is None or isinstance(v, (int, float, str)) for v in value.values()):
            return value, True
        return None, False

    def _filename(self, node: NodeOrLeaf | None) -> str | None:
        value = _literal_value(self._static(node))
        return value if isinstance(value, str) else None

    def _static(self, node: NodeOrLeaf | None, *,
                strings_only: bool = True) -> NodeOrLeaf | None:
        """The literal node that ``node`` stands for: itself, unparenthesised, or the value
        of the name it refers to; None when it is not a static value."""
        for _ in range(_MAX_NAME_HOPS):
            while isinstance(node, tree.BaseNode) and node.type == "atom" \
                    and len(node.children) == 3 and node.children[0] == "(":
                node = node.children[1]
            if node is None:
                return None
            if isinstance(node, tree.Name):
                node = self._value_of(node)
                continue
            if node.type in ("string", "strings"):
                return node
            return None if strings_only else node
        return None

    def _value_of(self, name: tree.Name) -> NodeOrLeaf | None:
        """The value of the one assignment that binds ``name`` where it is used."""
        for scope in _visible_scopes(name):
            definitions = [n for n in self.module.get_used_names().get(name.value, [])
                           if n.is_definition() and _scope_of(n) is scope]
            if definitions:
                return _assigned_value(definitions[0]) if len(definitions) == 1 else None
        return None

    # --- decoding -------------------------------------------------------------------------

    def _decode(self, node: NodeOrLeaf) -> tuple[str, tuple[Piece, ...], bool] | None:
        leaves = list(node.children) if isinstance(node, tree.BaseNode) else [node]
        strings = [leaf for leaf in leaves if isinstance(leaf, tree.Leaf) and leaf.type == "string"]
        if len(strings) != len(leaves):
            return None  # an f-string part: not static text
        text_parts: list[str] = []
        pieces: list[Piece] = []
        exact = True
        for leaf in strings:
            decoded = _decode_leaf(leaf.value, self.file_offset(leaf.start_pos),
                                   sum(map(len, text_parts)))
            if decoded is None:
                return None
            text, leaf_pieces, leaf_exact = decoded
            text_parts.append(text)
            pieces.extend(leaf_pieces)
            exact = exact and leaf_exact
        return "".join(text_parts), tuple(pieces), exact


def _decode_leaf(value: str, file_start: int,
                 text_start: int) -> tuple[str, list[Piece], bool] | None:
    """Decode one string literal token into its text and pieces; None if it is not a str
    literal (bytes, f-string) or does not evaluate."""
    prefix_len = len(value) - len(value.lstrip("rRbBuUfF"))
    prefix = value[:prefix_len].lower()
    if "b" in prefix or "f" in prefix:
        return None
    expected = _literal_value_of_code(value)
    if not isinstance(expected, str):
        return None
    quote = 3 if value[prefix_len:prefix_len + 3] in ('"""', "'''") else 1
    body_start = prefix_len + quote
    body = value[body_start:len(value) - quote]
    pieces: list[Piece] = []
    parts: list[str] = []
    offset = text_start

    def add(file_from: int, file_to: int, text: str, verbatim: bool) -> None:
        nonlocal offset
        pieces.append(Piece(offset, file_start + body_start + file_from,
                            file_start + body_start + file_to, verbatim))
        parts.append(text)
        offset += len(text)

    pos = 0
    escapes = [] if "r" in prefix else list(_ESCAPE.finditer(body))
    for match in escapes:
        if match.start() > pos:
            add(pos, match.start(), body[pos:match.start()], True)
        escape = match.group()
        decoded = _literal_value_of_code(f'"{escape}"')
        decoded = decoded if isinstance(decoded, str) else ""
        # An unknown escape such as `\d` stays as written: it is verbatim text after all.
        add(match.start(), match.end(), decoded, decoded == escape)
        pos = match.end()
    if pos < len(body) or not pieces:
        add(pos, len(body), body[pos:], True)
    text = "".join(parts)
    return (text, pieces, True) if text == expected else (expected, [], False)


_NOT_STATIC = object()  # what a non-literal expression evaluates to (None is a literal)


def _literal_value(node: NodeOrLeaf | None) -> object:
    if node is None:
        return _NOT_STATIC
    return _literal_value_of_code(node.get_code(include_prefix=False))


def _literal_value_of_code(code: str) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences warn; they still evaluate
        try:
            return ast.literal_eval(code.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return _NOT_STATIC


def _arguments(trailer: tree.PythonNode) -> tuple[list[NodeOrLeaf] | None,
                                                  dict[str, NodeOrLeaf]]:
    """Positional argument nodes (None after a ``*``/``**`` unpacking: positions unknown)
    and keyword argument values of a call trailer ``( ... )``."""
    if len(trailer.children) != 3:
        return [], {}
    inner = trailer.children[1]
    args = inner.children[::2] if inner.type == "arglist" else [inner]
    positional: list[NodeOrLeaf] | None = []
    keywords: dict[str, NodeOrLeaf] = {}
    for arg in args:
        if arg.type == "argument" and arg.children[0] in ("*", "**"):
            positional = None
        elif arg.type == "argument" and len(arg.children) == 3 and arg.children[1] == "=":
            keywords[arg.children[0].value] = arg.children[2]
        elif positional is not None:
            positional.append(arg)
    return positional, keywords


def _walk(node: NodeOrLeaf) -> Iterator[NodeOrLeaf]:
    """Every node below ``node`` in source order (iterative: deep files do not recurse)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        children = getattr(current, "children", None)
        if children:
            stack.extend(reversed(children))


_SCOPES = ("funcdef", "classdef", "lambdef", "file_input")


def _scope_of(name: tree.Name) -> tree.BaseNode:
    """The scope a definition binds in (a def's or class's own name binds outside it)."""
    node = name.parent
    if node is not None and node.type in ("funcdef", "classdef") and \
            isinstance(node, (tree.Function, tree.Class)) and node.name is name:
        node = node.parent
    while node is not None and node.type not in _SCOPES:
        node = node.parent
    return node if node is not None else name.get_root_node()


def _visible_scopes(name: tree.Name) -> list[tree.BaseNode]:
    """The scopes searched for ``name``, innermost first; class bodies are not visible
    from the functions inside them."""
    scopes = [_scope_of(name)]
    node = scopes[0].parent
    while node is not None:
        if node.type in _SCOPES and node.type != "classdef":
            scopes.append(node)
        node = node.parent
    return scopes


def _assigned_value(name: tree.Name) -> NodeOrLeaf | None:
    """The value of ``name = value`` / ``name: T = value`` / ``a = name = value``."""
    stmt = name.parent
    if stmt is None or stmt.type != "expr_stmt":
        return None
    children = stmt.children
    if len(children) == 2 and children[1].type == "annassign" and children[0] is name:
        ann = children[1].children
        return ann[3] if len(ann) == 4 else None
    targets, ops = children[:-1:2], children[1::2]
    if all(op == "=" for op in ops) and any(t is name for t in targets):
        value: NodeOrLeaf = children[-1]
        return value
    return None
