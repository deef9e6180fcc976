"""The compiler never crashes: a CI-sized fuzzing run (fixed seeds, about 4,000 inputs from
every generator), the 10 MB and 10,000-deep inputs in bounded time, the reproducers of
every crash the fuzzer found, and checks of the fuzzer itself.

A crash is any exception other than ``CompileError``, an internal-compiler-error (CQ0901)
or escaped-RecursionError diagnostic, generated code that is not valid Python, or a hang
(see ``harness.py``). The long run is ``python -m tests.fuzz.run_long``.
"""

from __future__ import annotations

import random
import re
import time

import pytest

import croqtile
from croqtile.runtime.driver import check_source
from croqtile.frontend import preprocessor, regions
from croqtile.frontend.diagnostics import Reporter
from croqtile.frontend.source import Source, SourceMap

from . import generators as gen
from .harness import Defines, Finding, describe_defines, probe, shrink

# Inputs per generator in CI: about 40 s on one core (the slow generators get few inputs).
CI_INPUTS = {
    "mutate": 1000, "grammar": 450, "grammar_mutate": 500, "splice": 400, "soup": 500,
    "noise": 400, "literals": 350, "macros": 60, "defines": 150, "directives": 300,
    "deep": 60, "long_line": 10, "big": 4,
}
TIME_LIMIT = 20.0  # seconds per input before it counts as a hang
BOUND = 10.0  # seconds for a 10 MB or a 10,000-deep input, per entry point


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return gen.load_corpus()


def _describe(text: str, finding: Finding, defines: Defines | None = None) -> str:
    small = shrink(text, finding, TIME_LIMIT, budget=20.0, defines=defines)
    return (f"{finding.kind} in {finding.entry}: {finding.signature}\n"
            f"defines: {describe_defines(defines)}\n"
            f"reproducer ({len(small)} characters):\n{small[:2000]}\n{finding.detail}")


@pytest.mark.parametrize("name", sorted(CI_INPUTS))
def test_ci_fuzz_finds_no_crash(name: str, corpus: list[str]) -> None:
    make = gen.GENERATORS[name][0]
    for index in range(CI_INPUTS[name]):
        text, defines = gen.split_input(make(random.Random(f"ci:{name}:{index}"), corpus))
        finding = probe(text, TIME_LIMIT, defines)
        assert finding is None, f"{name} input {index}: {_describe(text, finding, defines)}"


def _timed_entry_points(text: str) -> tuple[list[croqtile.Diagnostic], float, float, bool]:
    """Diagnostics of ``check_source``, the seconds of it and of ``croqtile.compile``, and
    whether ``compile`` returned a module. Seconds of this process's CPU time: the work the
    compiler does, which on an idle machine is the wall time, and which other processes
    on a busy one do not inflate."""
    start = time.process_time()
    diagnostics = check_source(text)
    checked = time.process_time() - start
    start = time.process_time()
    try:
        croqtile.compile(text)
        compiled = True
    except croqtile.CompileError:
        compiled = False
    return diagnostics, checked, time.process_time() - start, compiled


def _assert_no_internal_error(diagnostics: list[croqtile.Diagnostic]) -> None:
    bad = [d.render() for d in diagnostics
           if d.code == "CQ0901" or (d.code == "CQ0115" and "too many" in d.message)]
    assert not bad, bad


@pytest.mark.parametrize("kind", gen.HUGE_KINDS)
def test_ten_megabyte_source_ends_in_bounded_time(kind: str) -> None:
    text = gen.huge_source(kind)
    assert len(text) >= 10 * 1024 * 1024
    diagnostics, checked, compiled_in, compiled = _timed_entry_points(text)
    assert checked < BOUND and compiled_in < BOUND, (checked, compiled_in)
    _assert_no_internal_error(diagnostics)
    errors = [d for d in diagnostics if d.severity == "error"]
    assert bool(errors) != compiled  # a diagnostic, or a module when the source is valid


# Repetitions that are read in a loop, not by recursion: 10,000 of them are a valid program.
LOOPED_KINDS = frozenset({"pp_if", "pp_ifdef", "view_chain", "string_concat"})


@pytest.mark.parametrize("kind", gen.DEEP_KINDS)
def test_ten_thousand_deep_nesting_ends_with_a_diagnostic(kind: str) -> None:
    diagnostics, checked, compiled_in, compiled = _timed_entry_points(gen.deep_source(kind, 10_000))
    assert checked < BOUND and compiled_in < BOUND, (checked, compiled_in)
    _assert_no_internal_error(diagnostics)
    errors = [d for d in diagnostics if d.severity == "error"]
    assert bool(errors) != compiled
    if kind not in LOOPED_KINDS:
        assert errors


@pytest.mark.parametrize("kind", gen.DEEP_KINDS)
@pytest.mark.parametrize("depth", [195, 390])
def test_deep_but_parsable_nesting_does_not_crash(kind: str, depth: int) -> None:
    """Just under the parser's nesting limit the checker, the lowering and the code
    generator walk the whole nest (they once raised RecursionError or wrote Python with
    more than 200 nested parentheses)."""
    text = gen.deep_source(kind, depth)
    finding = probe(text, TIME_LIMIT)
    assert finding is None, _describe(text, finding)


# Reproducers of the crashes the fuzzer found (each fixed where it happened).
REGRESSIONS = {
    "header without body (_ParseError escaped the parser)": "__co__ s2[4]d(s2,s2[4])",
    "declaration without body": "__co__ void f();",
    "5000-digit literal (int() limit)": "__co__ void f() { int x = " + "9" * 5000 + "; }",
    "literal beyond 64 bits in a shape": "__co__ s8[8] n(s8[" + "1" * 400 + ", 8] rhs) {}",
    "float literal beyond a double": "__co__ auto n(f64[4] c) { f64[4] b; parallel p by 4 "
                                     "b.at(p) = " + "1" * 400 + ".5; return b; }",
    "hex literal beyond 64 bits": "__co__ auto n(f64[4] c) { f64[4] b; parallel p by 4 "
                                  "b.at(p) = 0x" + "f" * 300 + " - 1.5; return b; }",
    "kernel without parameters (launch '(,)')":
        "__co__ auto fn1(s64[2] a){s32[4]buf1;parallel by 8:block{}return buf1;}",
    "host assignment that declares nothing":
        "__co__ s32[8]f(s32[8]a){s32[a.span]out;out.at(0)(0)(0).at(0)=1;return out;}",
    "dma.pad without a configuration":
        "__co__ s16[64,32]f(s16[64,32]lhs){s16[lhs.span]output;parallel{tr,tc}by[4,2]:block"
        "{l=dma.pad lhs.chunkat(tr,tc)=>shared;}return output;}",
    "dma.transp without a permutation":
        "__co__ s16[64,32]f(s16[64,32]lhs){s16[lhs.span]output;parallel{tr,tc}by[4,2]:block"
        "{l=dma.transp lhs.chunkat(tr,tc)=>shared;}return output;}",
    "21 nested loops (Python's limit of 20)": gen.deep_source("braced_foreach", 21),
    "99 nested ifs (Python's limit of 99 indentation levels)": gen.deep_source("if", 99),
    "10 MB line of bad characters": "__co__ void f() { " + "@ " * 5_000_000 + "}",
    "element index inf (OverflowError in the lowering)":
        "__co__ void n(global s16[K,4]a0){parallel by cdiv(K,6):block a0.at(1,inf)=1;}",
}


ODD_DEFINES = {"5000 digits": 10**5000, "-400 digits": -(10**400), "1e300": 1e300,
               "1e-300": 1e-300, "inf": float("inf"), "nan": float("nan"), "broken": "1 +",
               "NUL": "\x00", "10,000 ones": "1" * 10_000, "None": None, "True": True}


@pytest.mark.parametrize("value", list(ODD_DEFINES.values()), ids=list(ODD_DEFINES))
def test_odd_defines_are_diagnostics_or_values(value: object) -> None:
    """A 5000-digit value crashed the preprocessor (str() refuses it: CQ0901); 1e300 became
    the malformed literal '1e'."""
    text = gen.on_device("    out.at(p) = a.at(p) + X;")
    assert probe(text, TIME_LIMIT, {"X": value}) is None


@pytest.mark.parametrize("text", list(REGRESSIONS.values()), ids=list(REGRESSIONS))
def test_crash_reproducers_stay_fixed(text: str) -> None:
    finding = probe(text, TIME_LIMIT)
    assert finding is None, f"{finding.signature}\n{finding.detail}"


def test_warnings_never_crowd_out_an_error() -> None:
    """100 warnings used to fill the diagnostic list, so a later error was dropped and the
    program compiled (to a module without its function)."""
    body = "".join(f"    f16 h{i} = a.at(p) * 0.5f;\n" for i in range(150))
    text = ("__co__ void f(global f32 [8] a) {\n  parallel p by 8 {\n" + body
            + "    undeclared.at(p) = 1;\n  }\n}\n")
    with pytest.raises(croqtile.CompileError) as err:
        croqtile.compile(text)
    assert "CQ0201" in {d.code for d in err.value.diagnostics}


def test_python_limits_are_diagnostics() -> None:
    loops = check_source(gen.deep_source("braced_foreach", 21))
    # (99 `if`s each directly in the other's branch merge into one `if` of the conjunction;
    # an `else if` chain nests for real)
    indents = check_source(gen.deep_source("else_if", 99))
    assert [d.code for d in loops] == ["CQ0702"] and "20 loops" in loops[0].message
    assert [d.code for d in indents] == ["CQ0702"] and "indents" in indents[0].message
    assert check_source(gen.deep_source("if", 99)) == []


def test_long_line_excerpt_is_short() -> None:
    text = "int host;" * 100_000 + "__co__ void f() { x = @; }" + "int y;" * 100_000
    diag = check_source(text)[0]
    assert diag.code == "CQ0101" and diag.column == 900_023
    lines = diag.render().splitlines()
    assert max(map(len, lines)) < 200
    source, caret = lines[3], lines[4]
    assert source[caret.index("^")] == "@"


# ----------------------------------------------------------------------------------------
# The fast paths of the preprocessor and the region finder change nothing
# ----------------------------------------------------------------------------------------

def _front(text: str) -> tuple[object, ...]:
    source = Source(text)
    reporter = Reporter(SourceMap.identity(source))
    out = preprocessor.preprocess(source, reporter)
    found = regions.find_co_functions(out.text, reporter)
    segments = [(s.pp_start, s.orig_start, s.orig_end, s.verbatim) for s in out.source_map.segments]
    return out.text, segments, found, [(d.code, d.line, d.column) for d in reporter.diagnostics]


def test_fast_paths_agree_with_the_token_loop(monkeypatch: pytest.MonkeyPatch,
                                              corpus: list[str]) -> None:
    texts = []
    for index in range(120):
        rng = random.Random(f"fast:{index}")
        name = rng.choice(["mutate", "noise", "macros", "grammar_mutate", "literals"])
        texts.append(gen.GENERATORS[name][0](rng, corpus))
    texts.append("#define A x\n#define F(a) a+a\n" + "A+F(A)+1e+A+.5A+R\"(A)\"+b+\n" * 500)
    texts.append("\n".join(f"__co__ void f{i}(s32 [8] /*(*/ a) {{ x = \"{{\"; }}"
                           for i in range(300)))
    fast = [_front(t) for t in texts]
    monkeypatch.setattr(preprocessor.Scanner, "quiet_end", lambda self, pos, stops="": pos)
    monkeypatch.setattr(regions, "_SIMPLE_SIGNATURE_RE", re.compile(r"(?!)"))
    slow = [_front(t) for t in texts]
    for index, (a, b) in enumerate(zip(fast, slow)):
        assert a == b, f"input {index}: {texts[index][:300]!r}"


# ----------------------------------------------------------------------------------------
# The fuzzer itself
# ----------------------------------------------------------------------------------------

def test_harness_reports_an_internal_error_with_its_site(monkeypatch: pytest.MonkeyPatch) -> None:
    from croqtile.frontend.sema import checker

    def broken(self: object, program: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(checker.Checker, "check_program", broken)
    finding = probe(gen.wrap_body(""))
    assert finding is not None and finding.kind == "CQ0901"
    assert "test_fuzz.py" not in finding.signature and "KeyError" in finding.detail


def test_harness_reports_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    from croqtile.frontend.sema import checker

    def hang(self: object, program: object) -> None:
        while True:
            time.sleep(0.01)

    monkeypatch.setattr(checker.Checker, "check_program", hang)
    finding = probe(gen.wrap_body(""), time_limit=0.5)
    assert finding is not None and finding.kind == "hang"


def test_shrink_keeps_the_crash_and_drops_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    from croqtile.frontend.sema import checker

    original = checker.Checker.check_program

    def picky(self: checker.Checker, program: object) -> object:
        if "boom" in str(getattr(program, "functions", ())):
            raise ValueError("boom")
        return original(self, program)

    monkeypatch.setattr(checker.Checker, "check_program", picky)
    text = gen.wrap_body("  int a = 1;\n  int boom = 2;\n  int c = 3;")
    finding = probe(text)
    assert finding is not None
    small = shrink(text, finding, budget=30.0)
    assert "boom" in small and len(small) < len(text) // 2


def test_generators_are_deterministic(corpus: list[str]) -> None:
    for name in gen.GENERATORS:
        if name in ("big", "long_line"):
            continue
        first = gen.make_input(5, 17, corpus, [name])
        assert first == gen.make_input(5, 17, corpus, [name])


def test_grammar_programs_mostly_compile() -> None:
    """The grammar generator exercises the lowering and the code generator, not only the
    parser: a good share of its programs compile."""
    results = [check_source(gen.grammar.program(random.Random(i))) for i in range(150)]
    clean = sum(not any(d.severity == "error" for d in r) for r in results)
    assert clean >= 30, clean
