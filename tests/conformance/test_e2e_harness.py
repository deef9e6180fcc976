"""The end-to-end conformance harness on a tiny synthetic checkout written here."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import torch

from tests.conformance import e2e_upstream as e2e
from tests.conformance.e2e_helpers import arange, cast, excluded, gemm, rand_int, wrap
from tests.conformance.e2e_recipe import Recipe

# Three kernels with a host main, as upstream files look: one right, one whose recipe
# expects something else, one the checker rejects. A #define and a RUN-line -D apply.
TINY = """\
// RUN: choreo -t cute -DSCALE=3 %s | FileCheck %s
#define N 8

__co__ s32 [N] scaled(s32 [N] x) {
  s32 [x.span] y;
  parallel i by N
    y.at(i) = x.at(i) * SCALE;
  return y;
}

__co__ s32 [N] plus_one(s32 [N] x) {
  s32 [x.span] y;
  parallel i by N
    y.at(i) = x.at(i) + 1;
  return y;
}

__co__ s32 [N] broken(s32 [N] x) {
  s32 [x.span] y;
  parallel i by N
    y.at(i) = x.at(i) + undeclared_name;
  return y;
}

#if 0
__co__ s32 [N] hidden(s32 [N] x) { return x; }
#endif

int main() {
  auto x = choreo::make_spandata<choreo::s32>(N);
  x.fill_random(-5, 5);
  auto y = scaled(x.view());
  return 0;
}
"""

REL = "gpu/end2end/tiny.co"


def _recipes() -> dict[tuple[str, str], Recipe]:
    def args(gen: torch.Generator) -> list[torch.Tensor]:
        return [rand_int(gen, (8,), -5, 5)]
    return {
        (REL, "scaled"): Recipe(args=args, reference=lambda x: x * 3),
        (REL, "plus_one"): Recipe(args=args, reference=lambda x: x + 2),  # deliberately wrong
        (REL, "broken"): Recipe(args=args, reference=lambda x: x),
        ("gpu/end2end/other.co", "*"): excluded("OUT", "a whole file out of scope"),
    }


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    folder = tmp_path / "up" / "tests" / "gpu" / "end2end"
    folder.mkdir(parents=True)
    (folder / "tiny.co").write_text(TINY)
    (folder / "other.co").write_text("__co__ void a() {}\n__co__ void b() {}\n")
    return tmp_path / "up"


def test_discovery_names_spans_and_defines(checkout: Path) -> None:
    kernels = e2e.discover(checkout)
    assert [k.name for k in kernels] == [
        "gpu/end2end/other.co::a", "gpu/end2end/other.co::b", f"{REL}::scaled",
        f"{REL}::plus_one", f"{REL}::broken"]  # 'hidden' sits in #if 0
    scaled = kernels[2]
    assert scaled.span == (4, 9) and scaled.run_defines == {"SCALE": "3"}
    text = e2e.isolate(scaled).splitlines()
    assert len(text) == len(TINY.splitlines())           # line numbers kept
    assert "undeclared_name" not in "\n".join(text) and text[1] == "#define N 8"


def test_function_name_skips_bracketed_dims() -> None:
    assert e2e.function_name(["__co__ f16 [cdiv(M, 2), (N)] foo (f16 [M] a) {"]) == "foo"
    assert e2e.function_name(["__co__ auto", "  bar(s32 [4] x) {"]) == "bar"


def test_statuses_and_report(checkout: Path, tmp_path: Path) -> None:
    recipes = _recipes()
    kernels = e2e.discover(checkout)
    results = {r.kernel.function: r for r in e2e.evaluate(kernels, recipes, verbose=True)}
    assert results["scaled"].status == e2e.PASS and results["scaled"].total == 8
    wrong = results["plus_one"]
    assert wrong.status == e2e.WRONG and wrong.bad == 8 and wrong.max_abs == 1
    broken = results["broken"]
    assert broken.status == e2e.COMPILE_ERROR and broken.code.startswith("CQ")
    assert broken.line == 21  # the upstream file's own line
    assert results["a"].status == "OUT"
    totals = e2e.totals(list(results.values()))
    assert (totals.in_scope, totals.passed) == (3, 1)
    report = e2e.render(list(results.values()), "cpu", [])
    assert "in scope: 3, pass: 1 (33.3%)" in report
    assert f"{broken.code}: 1" in report and "WRONG: 1" in report


def test_main_writes_json_and_lists_missing_recipes(checkout: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    recipes = _recipes()
    del recipes[(REL, "broken")]
    recipes[(REL, "renamed")] = recipes[(REL, "scaled")]
    monkeypatch.setattr(e2e, "load_recipes", lambda: recipes)
    out = tmp_path / "r.json"
    assert e2e.main([str(checkout), "--json", str(out), "--only", "tiny"]) == 0
    data = json.loads(out.read_text())
    statuses = {k["function"]: k["status"] for k in data["kernels"]}
    assert statuses == {"scaled": "PASS", "plus_one": "WRONG", "broken": "NO-RECIPE"}
    assert data["totals"]["in_scope"] == 3 and data["totals"]["pass"] == 1
    assert e2e.stale_recipes(e2e.discover(checkout), recipes) == [(REL, "renamed")]


def test_in_place_outputs_poison_and_timeout(tmp_path: Path) -> None:
    text = """\
__co__ void fill(s32 [4] x, global s32 [4] out) {
  parallel i by 4
    out.at(i) = x.at(i) - 1;
}
"""
    [kernel] = e2e.file_kernels("gpu/end2end/inplace.co", text)
    recipe = Recipe(args=lambda g: [arange((4,), "s32"), torch.zeros(4, dtype=torch.int32)],
                    reference=lambda x, out: {1: x - 1}, poison=(1,))
    assert e2e.run_kernel(kernel, recipe).status == e2e.PASS
    slow = e2e.run_kernel(kernel, Recipe(args=recipe.args, reference=_sleep), timeout=0.2)
    assert slow.status == e2e.TIMEOUT


def _sleep(*args: object) -> None:
    import time
    time.sleep(5)


def test_tutorial_sources_archives_and_markdown(tmp_path: Path) -> None:
    root = tmp_path / "tut"
    (root / "tutorial").mkdir(parents=True)
    (root / "tutorial" / "ch.md").write_text(
        "text\n```cpp\n__co__ void snippet() {}\n```\n"
        "```cpp\n__co__ void prog() {}\nint main() { prog(); }\n```\n")
    member = tmp_path / "k.co"
    member.write_text("__co__ void packed() {}\n")
    (root / "optimization").mkdir()
    with tarfile.open(root / "optimization" / "kernels.tar.gz", "w:gz") as archive:
        archive.add(member, arcname="k.co")
    names = [k.name for k in e2e.discover(None, root)]
    assert names == ["tutorial/tutorial/ch.md#1::prog",
                     "tutorial/optimization/kernels.tar.gz:k.co::packed"]
    named = {("tutorial/tutorial/ch.md#0", "snippet"): excluded("OUT", "x")}
    assert "tutorial/tutorial/ch.md#0::snippet" in [k.name for k in e2e.discover(None, root, named)]


def test_helpers_are_exact() -> None:
    assert wrap(torch.tensor([130, -129, 255]), "s8").tolist() == [-126, 127, -1]
    assert cast(torch.tensor([300.0]), "u8").tolist() == [44]
    a = torch.tensor([[1.0, 2.0]], dtype=torch.float16)
    b = torch.tensor([[3.0], [4.0]], dtype=torch.float16)
    assert gemm(a, b).tolist() == [[11.0]] and gemm(a, b.T, rhs_nk=True).tolist() == [[11.0]]
    assert gemm(a.to(torch.int8), b.to(torch.int8), "s32").dtype == torch.int32


def test_further_argument_sets_and_reference_engine(checkout: Path) -> None:
    scaled = e2e.discover(checkout)[2]
    base = _recipes()[(REL, "scaled")]
    right = Recipe(args=lambda g: [arange((8,), "s32")], reference=lambda x: x * 3)
    wrong = Recipe(args=right.args, reference=lambda x: x * 4)
    both = Recipe(args=base.args, reference=base.reference, also=(right,))
    assert e2e.run_kernel(scaled, both).status == e2e.PASS
    failing = e2e.run_kernel(scaled, Recipe(args=base.args, reference=base.reference,
                                            also=(right, wrong)))
    assert failing.status == e2e.WRONG and failing.detail.startswith("argument set 3:")
    interpreted = e2e.run_kernel(scaled, both, engine="reference")
    assert interpreted.status == e2e.PASS and interpreted.total == 16  # both sets


def test_shards_merge_into_one_report(checkout: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(e2e, "load_recipes", _recipes)
    parts = [tmp_path / f"s{i}.json" for i in range(2)]
    for i, part in enumerate(parts):
        assert e2e.main([str(checkout), "--shard", f"{i}/2", "--json", str(part)]) == 0
    capsys.readouterr()
    assert e2e.main(["--merge", *map(str, parts)]) == 0
    report = capsys.readouterr().out
    assert "in scope: 3, pass: 1 (33.3%)" in report and "OUT" in report


def test_message_shape_keeps_constructs_and_drops_names() -> None:
    def shape(detail: str) -> str:
        kernel = e2e.Kernel("f.co", "k", "", (0, 0))
        return e2e.message_shape(e2e.Result(kernel, e2e.COMPILE_ERROR, detail))
    assert shape("not supported yet: reading 'buf' before it holds data") == \
        shape("not supported yet: reading 'counts' before it holds data")
    assert "'.sqz'" in shape("not supported yet: '.sqz'")
    assert "'__sinh'" in shape("the built-in '__sinh'") and "'yield'" in shape("x: 'yield'")
    assert shape("index 'i' reaches 3, outside [0, 3)") == "index '_' reaches N, outside [N, N)"


def test_nan_in_a_reference_is_not_compared(checkout: Path) -> None:
    scaled = e2e.discover(checkout)[2]

    def partly(x: torch.Tensor) -> torch.Tensor:
        expected = (x * 3).to(torch.float64)
        expected[4:] = float("nan")  # unspecified
        expected[0] += 1             # wrong on purpose
        return expected
    result = e2e.run_kernel(scaled, Recipe(args=lambda g: [arange((8,), "s32")], reference=partly))
    assert result.status == e2e.WRONG and result.bad == 1 and result.total == 4


def test_changes_against_a_baseline() -> None:
    def result(name: str, status: str, code: str = "") -> e2e.Result:
        return e2e.Result(e2e.Kernel("f.co", name, "", (0, 0)), status, code=code)
    old = [result("a", e2e.WRONG), result("b", e2e.PASS), result("c", e2e.COMPILE_ERROR, "CQ0701")]
    new = [result("a", e2e.PASS), result("b", e2e.COMPILE_ERROR, "CQ0704"),
           result("c", e2e.COMPILE_ERROR, "CQ0701")]
    lines = e2e.changes(new, old)
    assert lines[0].endswith("1 fixed, 1 broken, 0 other ==")
    assert lines[1].strip() == "WRONG -> PASS  f.co::a"
    assert lines[2].strip() == "PASS -> COMPILE-ERROR/CQ0704  f.co::b"
