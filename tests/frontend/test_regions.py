"""Tests of the region finder: ``__co__`` functions among host C++."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from croqtile.frontend.diagnostics import Reporter
from croqtile.frontend.preprocessor import preprocess
from croqtile.frontend.regions import Region, find_co_functions
from croqtile.frontend.source import Source, SourceMap

DATA = Path(__file__).resolve().parent.parent / "data"


def find(text: str) -> tuple[list[Region], Reporter]:
    reporter = Reporter(SourceMap.identity(Source(text, "test.co")))
    return find_co_functions(text, reporter), reporter


def region_of(text: str, head: str, tail: str, name: str) -> Region:
    """The expected region from the start of ``head`` to the end of ``tail`` after it."""
    start = text.index(head)
    return Region(start, text.index(tail, start) + len(tail), name)


HOST_FILE = r'''// A host file. The __co__ in this comment does not count, nor does /* __co__ { */.
#include <iostream>
#include "choreo.h"

template <typename T> struct Box { T value{}; };

__device__ int helper(int x) { return x > 0 ? x : -x; }

__co_device__ void opaque(int v) { if (v) { } }

__cok__ {
  __device__ void kernel_side() { int braces[] = {1, 2}; }
}

__co__ s32 [4, 8] first(s32 [4, 8] a, s32 [4, 8] b) {
  s32 [a.span] out;
  parallel {i, j} by [4, 8]
    out.at(i, j) = a.at(i, j) + b.at(i, j);  // a } in a comment
  __cpp__("}}}");
  return out;
}

int main() {
  const char* s = "__co__ void fake() {";
  char open = '{';
  char close = '}';
  auto raw = R"tag(}})")tag";
  auto lambda = [&](int k) { return k + 1; };
  /* } */
  std::cout << s << open << close << raw << lambda(1) << std::endl;
  return 0;
}

__co__ void second(global f16 [M, K] lhs) {
  parallel p by 1 : block {
    foreach {k} in [cdiv(K, 16)] { }
  }
}
'''


def test_host_file_with_two_functions() -> None:
    regions, reporter = find(HOST_FILE)
    assert not reporter.diagnostics
    first = region_of(HOST_FILE, "__co__ s32 [4, 8] first", "  return out;\n}", "first")
    second = region_of(HOST_FILE, "__co__ void second",
                       "    foreach {k} in [cdiv(K, 16)] { }\n  }\n}", "second")
    assert regions == [first, second]
    assert HOST_FILE[first.end - 1] == "}" and HOST_FILE[second.end:] == "\n"


def test_other_markers_are_not_functions() -> None:
    text = ("__co_device__ void a() { }\n__device__ void b() { }\n__cok__ { x(); }\n"
            "// __co__ void c() {\n/* __co__ */ const char* d = \"__co__ {\";\n"
            "auto e = R\"(__co__ void e() {)\";\nint __co__x = 0;\n")
    regions, reporter = find(text)
    assert regions == [] and not reporter.diagnostics


def test_unclosed_function_is_reported_and_runs_to_the_end() -> None:
    text = "int x;\n  __co__ void open(s32 [4] a) {\n  parallel p by 4 {\n"
    regions, reporter = find(text)
    assert regions == [Region(text.index("__co__"), len(text), "open")]
    [diag] = reporter.diagnostics
    assert diag.code == "CQ0113" and "'open'" in diag.message
    assert (diag.line, diag.column, diag.location.end_column) == (2, 3, 9)


def test_unclosed_signature_is_reported() -> None:
    regions, reporter = find("__co__ void f(int a")
    assert regions == [Region(0, 19, "f")]
    assert [d.code for d in reporter.diagnostics] == ["CQ0113"]


def test_function_without_body_ends_at_semicolon() -> None:
    text = "__co__ void f(int a);\nint main() { return 0; }\n"
    regions, reporter = find(text)
    assert regions == [Region(0, text.index(";") + 1, "f")]
    assert not reporter.diagnostics


def test_function_inside_a_namespace() -> None:
    text = "namespace n {\n__co__ void f() { }\n}\n"
    regions, _ = find(text)
    assert regions == [region_of(text, "__co__", "{ }", "f")]


def test_name_is_the_identifier_before_the_parameter_list() -> None:
    text = "__co__ s32 [cdiv(M, 2), 4] [[attr(1)]] tiled(s32 [M, 4] a) { }"
    assert [r.name for r in find(text)[0]] == ["tiled"]
    assert [r.name for r in find("__co__ (x) { }")[0]] == [""]


def test_braces_in_strings_and_comments_inside_the_function() -> None:
    text = '__co__ void f() {\n  print("{{");\n  // }\n  /* } */\n  x = 1;\n}\nint y;\n'
    regions, _ = find(text)
    assert regions == [region_of(text, "__co__", "x = 1;\n}", "f")]


def test_region_produced_by_macros() -> None:
    text = "#define CO __co__\n#define BEGIN {\n#define END }\nCO void g() BEGIN x; END\nint z;\n"
    source = Source(text)
    result = preprocess(source, Reporter(SourceMap.identity(source)))
    reporter = Reporter(result.source_map)
    regions = find_co_functions(result.text, reporter)
    assert [r.name for r in regions] == ["g"]
    assert result.text[regions[0].start:regions[0].end] == "__co__ void g() { x; }"
    assert not reporter.diagnostics


@pytest.mark.parametrize("path", sorted(DATA.glob("seed*.co")), ids=lambda p: p.name)
def test_sample_programs(path: Path) -> None:
    text = path.read_text()
    source = Source(text, path.name)
    pp_reporter = Reporter(SourceMap.identity(source))
    result = preprocess(source, pp_reporter)
    assert not pp_reporter.diagnostics
    reporter = Reporter(result.source_map)
    regions = find_co_functions(result.text, reporter)
    assert not reporter.diagnostics
    expected = {"seed002_tiled_add.co": ["tiled_add_2d"]}.get(path.name, ["matmul"])
    assert [r.name for r in regions] == expected
    for region in regions:
        body = result.text[region.start:region.end]
        assert body.startswith("__co__") and body.endswith("}")
        assert "MATMUL_" not in body  # the tile-size macros are expanded
        line, _ = source.line_col(result.source_map.original_offset(region.start))
        assert text.split("\n")[line - 1].startswith("__co__")


def test_dma_matmul_sample_has_host_main_after_the_function() -> None:
    text = (DATA / "seed004_dma_matmul.co").read_text()
    regions, reporter = find(text)
    assert [r.name for r in regions] == ["matmul"] and not reporter.diagnostics
    assert text[regions[0].end:].lstrip().startswith("int main()")
    assert text[:regions[0].start].rstrip().endswith('#include "choreo.h"')


_FRAGMENTS = ("__co__", " void ", "f", "(", ")", "{", "}", ";", '"', "'", "//", "/*", "*/",
              "\n", 'R"(', ')"', "__cok__", "[", "]", " ", "x")


@pytest.mark.parametrize("seed", range(10))
def test_random_input_never_raises(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        text = "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(0, 60)))
        regions, _ = find(text)
        previous_end = 0
        for region in regions:
            assert previous_end <= region.start < region.end <= len(text)
            assert text.startswith("__co__", region.start)
            previous_end = region.end
    data = bytes(rng.randrange(256) for _ in range(5000)).decode("latin-1")
    find(data + "__co__ void f() {")
