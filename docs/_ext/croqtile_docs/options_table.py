"""The ``croqtile-options`` directive: a table of a frozen dataclass's fields (name, type,
default, and the field's ``metadata["doc"]``), for the compile options ``croqtile.Options``.

    ```{croqtile-options} croqtile.Options
    ```

The documentation text of each field is parsed as the page's markup (Markdown on a MyST
page), so it may hold code spans and links."""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from .generated import note

HEADERS = ("Option", "Type", "Default", "Meaning")


@dataclass(frozen=True)
class Row:
    """One field as the table shows it."""

    name: str
    type: str
    default: str
    doc: str


def find(path: str) -> Any:
    """The object at a dotted path: ``package.module.Name``."""
    module_name, _, attribute = path.rpartition(".")
    if not module_name:
        raise ValueError(f"{path!r} is not a dotted path module.Name")
    return getattr(importlib.import_module(module_name), attribute)


def rows(cls: Any) -> list[Row]:
    """The rows of a dataclass's table; every field must carry ``metadata["doc"]``."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    found: list[Row] = []
    for field in dataclasses.fields(cls):
        doc = field.metadata.get("doc")
        if not isinstance(doc, str) or not doc.strip():
            raise ValueError(f"{cls.__name__}.{field.name} has no metadata['doc']")
        found.append(Row(field.name, _type_name(field.type), _default(field), doc.strip()))
    return found


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, str):  # postponed annotations are the text as written
        return annotation
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return repr(field.default_factory())
    return "(required)"


class OptionsTable(SphinxDirective):
    """The table of the dataclass named by the directive's argument."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        note(self.env)
        try:
            table_rows = rows(find(self.arguments[0]))
        except (ImportError, AttributeError, TypeError, ValueError) as err:
            raise self.error(f"croqtile-options {self.arguments[0]}: {err}") from None
        table = nodes.table(classes=["croqtile-options"])
        group = nodes.tgroup(cols=len(HEADERS))
        table += group
        for width in (14, 14, 12, 60):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        head += self._row([nodes.paragraph(text=h) for h in HEADERS])
        group += head
        body = nodes.tbody()
        for row in table_rows:
            doc = nodes.container()
            self.state.nested_parse(StringList(row.doc.split("\n"), self.get_source_info()[0]),
                                    self.content_offset, doc)
            body += self._row([_literal(row.name), _literal(row.type), _literal(row.default),
                               *doc.children])
        group += body
        return [table]

    @staticmethod
    def _row(cells: list[nodes.Node]) -> nodes.row:
        row = nodes.row()
        for cell in cells[:len(HEADERS) - 1]:
            entry = nodes.entry()
            entry += cell
            row += entry
        last = nodes.entry()
        last.extend(cells[len(HEADERS) - 1:])
        row += last
        return row


def _literal(text: str) -> nodes.paragraph:
    paragraph = nodes.paragraph()
    paragraph += nodes.literal(text, text)
    return paragraph
