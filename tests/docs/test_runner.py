"""The runner itself: each block language passes when the block is right and fails at the
block's line when it is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import console
from .blocks import BadBlock, Block, page_blocks
from . import runner
from .runner import BlockFailure, Stats, run_page

PROGRAM = """\
// file: twice.co
__co__ s32 [8] twice(s32 [8] x) {
  s32 [x.span] y;
  parallel i by 8
    y.at(i) = x.at(i) * 2;
  return y;
}
"""

FENCE = "```"


@pytest.fixture(autouse=True)
def _own_stats(monkeypatch: pytest.MonkeyPatch) -> Stats:
    """The blocks of these made-up pages stay out of the session's documentation count."""
    stats = Stats()
    monkeypatch.setattr(runner, "STATS", stats)
    return stats


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text)
    return page


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, gpu: bool = False) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    run_page(_page(tmp_path, text), "page.md", work, gpu=gpu)


def _fails_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, line: int,
              words: str) -> None:
    with pytest.raises(BlockFailure) as caught:
        _run(tmp_path, monkeypatch, text)
    message = str(caught.value)
    assert message.startswith(f"page.md:{line}: "), message
    assert words in message, message


def test_blocks_and_their_lines() -> None:
    text = f"# T\n\n{FENCE}python\nx = 1\n{FENCE}\n\n`{FENCE}{{note}}\n{FENCE}pycon\n>>> 1\n1\n" \
           f"{FENCE}\n`{FENCE}\n\n    indented\n\n{FENCE}text\nno\n{FENCE}\n"
    blocks = page_blocks(text)
    assert blocks[0] == Block("python", 3, "x = 1\n")
    assert blocks[1] == Block("pycon", 8, ">>> 1\n1\n")
    assert isinstance(blocks[2], BadBlock) and blocks[2].line == 14
    assert isinstance(blocks[3], BadBlock) and blocks[3].line == 16 and "'text'" in blocks[3].reason
    assert len(blocks) == 4


def test_a_whole_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (f"{FENCE}croqtile\n{PROGRAM}{FENCE}\n\n"
            f"{FENCE}python\nimport croqtile, torch\nmod = croqtile.load('twice.co')\n"
            f"out = mod.twice(torch.arange(8, dtype=torch.int32))\n{FENCE}\n\n"
            f"{FENCE}pycon\n>>> out.tolist()\n[0, 2, 4, 6, 8, 10, 12, 14]\n>>> n = 3\n{FENCE}\n\n"
            f"{FENCE}python\nassert n == 3\n{FENCE}\n\n"
            f"{FENCE}triton\n# from twice.co: twice\n@triton.jit\n...\n{FENCE}\n\n"
            f"{FENCE}console\n$ croqtile check twice.co\n{FENCE}\n")
    _run(tmp_path, monkeypatch, text)
    assert (tmp_path / "work" / "twice.co").read_text() == PROGRAM


def test_python_failure_names_the_page_line(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    text = f"intro\n\n{FENCE}python\nx = 1\nassert x == 2\n{FENCE}\n"
    with pytest.raises(BlockFailure) as caught:
        _run(tmp_path, monkeypatch, text)
    assert str(caught.value).startswith("page.md:3: python block failed")
    assert 'File "page.md", line 5' in str(caught.value)


def test_python_syntax_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fails_at(tmp_path, monkeypatch, f"{FENCE}python\nx = (\n{FENCE}\n", 1, "SyntaxError")


def test_gpu_blocks_are_left_to_the_gpu_tier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             _own_stats: Stats) -> None:
    _run(tmp_path, monkeypatch, f"{FENCE}python\n# gpu\nraise SystemError\n{FENCE}\n")
    assert _own_stats.gpu_not_run == 1 and not _own_stats.run
    with pytest.raises(BlockFailure, match="SystemError"):
        run_page(_page(tmp_path, f"{FENCE}python\n# gpu\nraise SystemError\n{FENCE}\n"),
                 "page.md", tmp_path, gpu=True)


def test_croqtile_that_does_not_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = "__co__ void f(f32 [4] x) { x.at(0) = undefined_name; }\n"
    # the diagnostics point at the page's own line
    _fails_at(tmp_path, monkeypatch, f"\n{FENCE}croqtile\n{bad}{FENCE}\n", 2,
              "does not compile:\nerror[CQ0201]")
    with pytest.raises(BlockFailure, match=r"--> page\.md:3:"):
        run_page(tmp_path / "page.md", "page.md", tmp_path, gpu=False)


def test_croqtile_expected_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = "// error: CQ0201\n__co__ void f(f32 [4] x) { x.at(0) = undefined_name; }\n"
    _run(tmp_path, monkeypatch, f"{FENCE}croqtile\n{bad}{FENCE}\n")
    wrong = bad.replace("CQ0201", "CQ0103")
    (tmp_path / "work").rename(tmp_path / "old")
    _fails_at(tmp_path, monkeypatch, f"{FENCE}croqtile\n{wrong}{FENCE}\n", 1,
              "should fail with CQ0103")
    saved = "// file: bad.co\n" + bad
    _run(tmp_path / "old", monkeypatch, f"{FENCE}croqtile\n{saved}{FENCE}\n")
    assert (tmp_path / "old" / "work" / "bad.co").read_text() == saved
    good = "// error: CQ0201\n" + PROGRAM
    (tmp_path / "work").rename(tmp_path / "old2")
    _fails_at(tmp_path, monkeypatch, f"{FENCE}croqtile\n{good}{FENCE}\n", 1,
              "compiles, but its first line says")


def test_pycon_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fails_at(tmp_path, monkeypatch, f"{FENCE}pycon\n>>> 1 + 1\n3\n{FENCE}\n", 1,
              "line 2")


def test_unknown_language_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fails_at(tmp_path, monkeypatch, f"x\n\n{FENCE}bash\nls\n{FENCE}\n", 3, "'bash'")
    (tmp_path / "work").rename(tmp_path / "old")
    _fails_at(tmp_path, monkeypatch, f"{FENCE}\nplain\n{FENCE}\n", 1, "no language")
    (tmp_path / "work").rename(tmp_path / "old2")
    _fails_at(tmp_path, monkeypatch, f"{FENCE}{{code-block}} python\nx = 1\n{FENCE}\n", 1,
              "{code-block}")


def test_triton_excerpt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    head = f"{FENCE}croqtile\n{PROGRAM}{FENCE}\n"
    _fails_at(tmp_path, monkeypatch,
              head + f"{FENCE}triton\n# from twice.co: twice\n@triton.jit\nno_such_line()\n"
                     f"{FENCE}\n", 13, "'no_such_line()' is not in")
    (tmp_path / "work").rename(tmp_path / "old")
    _fails_at(tmp_path, monkeypatch, f"{FENCE}triton\n# from other.co: f\n{FENCE}\n", 1,
              "was not saved")


def test_console_rules(tmp_path: Path) -> None:
    assert console.run("$ croqtile explain CQ0201\nCQ0201 (error)\n  message: ...\n", tmp_path) == 1
    assert console.run("$ pip install 'croqtile[transformers]'\n"
                       "$ pip install -e '.[transformers]'\n$ make test\n"
                       "$ git clone https://example.org/croqtile.git\n$ cd croqtile\n",
                       tmp_path) == 0
    for text, words in [("$ croqtile explain CQ0201\nno such line\n", "is not in the output"),
                        ("$ croqtile explain CQ9999\n", "exited with 2, not 0"),
                        ("$ ls\n", "`ls`"),
                        ("$ make nothing\n", "no target nothing"),
                        ("$ pip install requests\n", "not a dependency"),
                        ("$ pip install croqtile[gui]\n", "no extra"),
                        ("$ pip install .[gui]\n", "no extra"),
                        ("$ make test\nok\n", "can show no output"),
                        ("text first\n", "starts with")]:
        with pytest.raises(console.ConsoleError, match=words):
            console.run(text, tmp_path)
    assert console.run("$ croqtile explain CQ9999  # exit status 2\n", tmp_path) == 1


def test_console_output_in_order(tmp_path: Path) -> None:
    with pytest.raises(console.ConsoleError) as caught:
        console.run("$ croqtile explain CQ0201\nFixed:\n...\nA program with this problem"
                    "...\n", tmp_path)
    assert caught.value.line == 4
