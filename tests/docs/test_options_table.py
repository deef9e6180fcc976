"""The ``croqtile-options`` directive of the documentation extension: the table of a frozen
dataclass's fields, checked on a small dataclass following the convention of
``croqtile.Options`` (a ``metadata["doc"]`` per field)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from croqtile_docs.options_table import Row, rows  # noqa: E402

sys.path.remove(str(ROOT / "docs" / "_ext"))

FAKE = '''
from __future__ import annotations
from dataclasses import dataclass, field

@dataclass(frozen=True)
class Fake:
    num_warps: int | None = field(default=None, metadata={"doc": "Warps per program."})
    target: str = field(default="sm_90", metadata={"doc": "The GPU, e.g. `sm_100a`."})
    sizes: tuple[int, ...] = field(default_factory=lambda: (1, 2),
                                   metadata={"doc": "Sizes.\\n\\nA *second* paragraph."})
'''


@dataclass(frozen=True)
class Typed:
    debug: bool = field(default=False, metadata={"doc": "Checks."})
    limit: int | None = field(default=None, metadata={"doc": "At most."})


@dataclass(frozen=True)
class Undocumented:
    debug: bool = False


def test_rows_give_name_type_default_and_doc() -> None:
    namespace: dict[str, object] = {}
    exec(FAKE, namespace)
    assert rows(namespace["Fake"]) == [
        Row("num_warps", "int | None", "None", "Warps per program."),
        Row("target", "str", "'sm_90'", "The GPU, e.g. `sm_100a`."),
        Row("sizes", "tuple[int, ...]", "(1, 2)", "Sizes.\n\nA *second* paragraph."),
    ]


def test_types_that_are_objects() -> None:
    import typing

    hints = typing.get_type_hints(Typed)
    assert hints["debug"] is bool
    assert [r.type for r in rows(Typed)] == ["bool", "int | None"]


def test_a_field_without_doc_is_refused() -> None:
    with pytest.raises(ValueError, match=r"Undocumented\.debug has no metadata\['doc'\]"):
        rows(Undocumented)
    with pytest.raises(TypeError, match="not a dataclass"):
        rows(int)


def test_the_directive_renders_a_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sphinx.application import Sphinx

    (tmp_path / "fake_options.py").write_text(FAKE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT / "docs" / "_ext"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text('extensions = ["myst_parser", "croqtile_docs"]\n'
                                 'html_theme = "basic"\n')
    (src / "index.md").write_text("# Options\n\n```{croqtile-options} fake_options.Fake\n```\n")
    app = Sphinx(str(src), str(src), str(tmp_path / "out"), str(tmp_path / "doctrees"), "html",
                 status=None, warning=None, warningiserror=True, freshenv=True)
    app.build()
    html = (tmp_path / "out" / "index.html").read_text()
    table = html[html.index("<table"):html.index("</table>")]
    cells = [re.sub(r"<[^>]+>", "", cell).strip()
             for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", table, re.S)]
    assert cells[:4] == ["Option", "Type", "Default", "Meaning"]
    assert cells[4:12] == ["num_warps", "int | None", "None", "Warps per program.",
                           "target", "str", "'sm_90'", "The GPU, e.g. sm_100a."]
    assert cells[12:15] == ["sizes", "tuple[int, ...]", "(1, 2)"]
    # the descriptions are parsed as the page's Markdown
    assert '<span class="pre">sm_100a</span></code>' in table and "<em>second</em>" in table
