"""Finding Croqtile sources in Python text, and mapping their positions back to the file."""

from __future__ import annotations

from croqtile.runtime.driver import check_source
from croqtile.frontend.codes import Severity
from croqtile.frontend.diagnostics import Diagnostic, Note
from croqtile.frontend.source import Location, Source
from croqtile.tools.pyscan import EmbeddedSource, find_sources, relocate

KERNEL = ("__co__ s32 [8] twice(s32 [8] x) { s32 [x.span] y; "
          "parallel i by 8 y.at(i) = x.at(j) * 2; return y; }")


def py_positions(code: str, src: EmbeddedSource) -> list[tuple[str, int, int]]:
    """(code, line, column) in the Python file of every diagnostic of ``src``."""
    file = Source(code, "m.py")
    return [(d.code, d.line, d.column)
            for d in (relocate(d, src, file) for d in check_source(src.text, filename="m.py"))]


def position_of(text: str, needle: str) -> tuple[int, int]:
    before = text[:text.index(needle)]
    return before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1


def only(code: str) -> EmbeddedSource:
    [src] = find_sources(code)
    return src


# --- which calls ------------------------------------------------------------------------------


def test_callee_spellings_are_recognised() -> None:
    code = "\n".join([
        "import croqtile",
        "import croqtile as ct",
        "import croqtile.api",
        "from croqtile import compile as cc",
        "from croqtile.api import compile",
        "a = croqtile.compile('1')",
        "b = ct.compile('2')",
        "c = croqtile.api.compile('3')",
        "d = cc('4')",
        "e = compile('5')",
        "f = croqtile.compile(src='6', num_warps=4)",
        "async def g():",
        "    return await croqtile.compile('7').run()",
    ])
    assert [s.text for s in find_sources(code)] == ["1", "2", "3", "4", "5", "6", "7"]


def test_other_calls_are_not_recognised() -> None:
    code = "\n".join([
        "import croqtile",
        "import other as ct",
        "a = compile('x = 1', '<s>', 'exec')",  # the builtin: compile not imported from croqtile
        "b = ct.compile('2')",
        "c = croqtile.load('kernel.co')",
        "d = croqtile.compile(f'{a}')",  # an f-string is not static text
        "e = croqtile.compile(b'bytes')",
        "f = croqtile.compile('a' + 'b')",
        "g = croqtile.compile(*args)",
        "h = croqtile.compile(unknown_name)",
    ])
    assert find_sources(code) == []


def test_star_import_binds_compile_and_two_positionals_are_not_croqtile() -> None:
    code = "from croqtile import *\na = compile('1')\nb = compile('x = 1', '<s>', 'exec')\n"
    assert [s.text for s in find_sources(code)] == ["1"]


def test_names_bound_to_literals_are_followed() -> None:
    code = "\n".join([
        "import croqtile",
        "SRC: str = 'module'",
        "ALIAS = SRC",
        "TWICE = 'one'",
        "TWICE = 'two'",  # bound twice: ambiguous, skipped
        "class K:",
        "    SRC = 'class body'",  # not visible from inside the method below
        "    def m(self):",
        "        return croqtile.compile(SRC)",
        "def f():",
        "    SRC = 'local'",
        "    return croqtile.compile(SRC)",
        "def g(SRC):",
        "    return croqtile.compile(SRC)",  # a parameter: not static
        "a = croqtile.compile(ALIAS)",
        "b = croqtile.compile(TWICE)",
    ])
    assert [s.text for s in find_sources(code)] == ["module", "local"]


def test_a_constant_used_twice_is_checked_once_per_defines() -> None:
    code = ("import croqtile\nS = 'x'\na = croqtile.compile(S)\nb = croqtile.compile(S)\n"
            "c = croqtile.compile(S, defines={'N': 4})\n")
    assert [s.defines for s in find_sources(code)] == [None, {"N": 4}]


def test_defines_and_filename_arguments() -> None:
    src = only("import croqtile\nD = {'A': 1, 'B': 'x', 'C': None}\n"
               "m = croqtile.compile('s', defines=D, filename='k.co')\n")
    assert (src.defines, src.static_defines, src.filename) == (
        {"A": 1, "B": "x", "C": None}, True, "k.co")
    src = only("import croqtile\nm = croqtile.compile('s', defines=make(), filename=name)\n")
    assert (src.defines, src.static_defines, src.filename) == (None, False, None)
    src = only("import croqtile\nm = croqtile.compile('s', defines=None)\n")
    assert (src.defines, src.static_defines) == (None, True)


# --- positions ----------------------------------------------------------------------------------


def test_plain_literal_matches_check_source_with_offsets() -> None:
    code = f'import croqtile\nm = croqtile.compile(\n    """\n{KERNEL}\n""")\n'
    src = only(code)
    start_line, start_col = Source(code).line_col(src.content_start)
    direct = check_source(src.text, filename="m.py", line_offset=start_line - 1,
                          column_offset=start_col - 1)
    assert [(d.code, d.line, d.column) for d in direct] == py_positions(code, src)
    assert py_positions(code, src) == [("CQ0201", *position_of(code, "j)"))]


def test_prefixes_and_quotes_on_the_first_line() -> None:
    for opener, closer in (('"', '"'), ("'''", "'''"), ('r"""', '"""'), ("R'", "'"),
                           ('u"', '"')):
        code = f"import croqtile\nm = croqtile.compile({opener}{KERNEL}{closer})\n"
        assert py_positions(code, only(code)) == [("CQ0201", *position_of(code, "j)"))], opener


def test_escape_sequences_keep_exact_columns() -> None:
    # `\t`, `\n` and `\x20` are one character of the text but several of the file.
    kernel = KERNEL.replace("{ s32", "{\\n\\ts32").replace("y.at(i) =", "y.at(i)\\x20=")
    code = f'import croqtile\nm = croqtile.compile("{kernel}")\n'
    src = only(code)
    assert "\n\ts32" in src.text and src.exact
    assert py_positions(code, src) == [("CQ0201", *position_of(code, "j)"))]


def test_line_continuation_inside_a_literal() -> None:
    kernel = KERNEL.replace("parallel i by 8 ", "parallel i by 8 \\\n")
    code = f"import croqtile\nm = croqtile.compile('{kernel}')\n"
    src = only(code)
    assert "\\" not in src.text
    assert py_positions(code, src) == [("CQ0201", *position_of(code, "j)"))]


def test_implicit_concatenation_maps_each_part() -> None:
    head, tail = KERNEL.split("parallel")
    code = ("import croqtile\nm = croqtile.compile(\n"
            f"    '{head}'\n    r'parallel'  # a comment between the parts\n    \"{tail}\"\n)\n")
    src = only(code)
    assert src.text == KERNEL
    assert py_positions(code, src) == [("CQ0201", *position_of(code, "j)"))]


def test_unterminated_comment_and_the_end_of_the_text() -> None:
    code = "import croqtile\nm = croqtile.compile('''__co__ void f() { /* open''')\n"
    src = only(code)
    assert py_positions(code, src) == [("CQ0009", *position_of(code, "/*"))]
    # The end of the text is the closing quote; an empty text is its own start.
    assert src.file_offset(len(src.text)) == code.index("''')")
    empty = only("import croqtile\nm = croqtile.compile('')\n")
    assert empty.text == "" and empty.file_offset(0) == empty.literal_start + 1


def test_module_with_syntax_errors_elsewhere() -> None:
    code = f"import croqtile\ndef broken(:\n  x = = 1\nm = croqtile.compile('{KERNEL}')\nclass\n"
    assert py_positions(code, only(code)) == [("CQ0201", *position_of(code, "j)"))]


def test_inexact_mapping_falls_back_to_the_literal_start() -> None:
    src = EmbeddedSource(text="abc", pieces=(), literal_start=7, exact=False)
    assert (src.file_offset(2), src.file_offset(3, is_end=True)) == (7, 8)


def test_relocate_moves_notes_and_quotes_the_file_line() -> None:
    code = "import croqtile\nm = croqtile.compile(\n  'abc\\tdef')\n"
    src = only(code)
    inner = Location("m.py", 1, 5, 1, 8)  # "def" in the text
    diag = Diagnostic("CQ0201", Severity.ERROR, "m", inner, "abc\tdef",
                      notes=(Note("n", Location("m.py", 1, 1, 1, 4), "abc\tdef"), Note("plain")))
    placed = relocate(diag, src, Source(code, "m.py"))
    assert (placed.line, placed.column, placed.location.end_column) == (3, 9, 12)
    assert placed.source_line == "  'abc\\tdef')"
    assert [(n.location.line, n.location.column) if n.location else None
            for n in placed.notes] == [(3, 4), None]
