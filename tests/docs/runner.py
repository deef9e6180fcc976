"""Running one documentation page: its code blocks in page order, in the page's own
directory and Python namespace (the contract is in tests/docs/README.md).

``run_page`` raises ``BlockFailure`` naming the page, the block's line and what went wrong;
``STATS`` counts the blocks run, per language, for the summary at the end of the session.
"""

from __future__ import annotations

import doctest
import io
import re
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import console
from .blocks import LANGUAGES, BadBlock, Block, page_blocks

_FILE = re.compile(r"^//\s*file:\s*([\w.-]+\.co)\s*$")
_ERROR = re.compile(r"^//\s*error:\s*(CQ\d{4})\s*$")
_FROM = re.compile(r"^#\s*from\s+([\w./-]+\.co)\s*:\s*(\w+)\s*$")


class BlockFailure(AssertionError):
    """A block that failed: the message starts with ``PAGE:LINE:``."""


@dataclass
class Stats:
    """What the documentation runner did in this session."""

    run: Counter[str] = field(default_factory=Counter)  # blocks run, per language
    gpu_not_run: int = 0  # GPU-only blocks left to the GPU tier (no CUDA here)
    gpu_run: int = 0  # GPU-only blocks that ran

    def summary(self) -> str:
        """One line: ``documentation: N code blocks run (...), M GPU-only ...``."""
        total = sum(self.run.values())
        kinds = ", ".join(f"{self.run[k]} {k}" for k in LANGUAGES if self.run[k])
        gpu = (f"{self.gpu_not_run} GPU-only not run (no CUDA)" if self.gpu_not_run
               else f"{self.gpu_run} of them GPU-only")
        return f"documentation: {total} code blocks run ({kinds or 'none'}), {gpu}"


STATS = Stats()


def run_page(page: Path, label: str, workdir: Path, *, gpu: bool) -> None:
    """Run every block of ``page`` (shown as ``label`` in failures) with ``workdir`` as its
    directory; the caller makes ``workdir`` the current directory. With ``gpu`` False the
    blocks marked ``# gpu`` are left out."""
    PageRun(label, workdir, gpu).run(page_blocks(page.read_text(encoding="utf-8")))


class PageRun:
    """The state of one page: its namespace and the modules its triton blocks loaded."""

    def __init__(self, label: str, workdir: Path, gpu: bool) -> None:
        self.label = label
        self.workdir = workdir
        self.gpu = gpu
        self.namespace: dict[str, Any] = {"__name__": "__main__"}
        self.loaded: dict[tuple[str, float], Any] = {}

    def run(self, blocks: list[Block | BadBlock]) -> None:
        """Run the blocks in order; the first failure stops the page."""
        for block in blocks:
            if isinstance(block, BadBlock):
                self.fail(block.line, block.reason)
            if block.gpu and not self.gpu:
                STATS.gpu_not_run += 1
                continue
            getattr(self, f"_{block.language}")(block)
            STATS.run[block.language] += 1
            STATS.gpu_run += block.gpu

    def fail(self, line: int, message: str) -> None:
        raise BlockFailure(f"{self.label}:{line}: {message}")

    # --- the languages -----------------------------------------------------------------------

    def _croqtile(self, block: Block) -> None:
        import croqtile

        head = block.text.split("\n", 2)[:2]  # `// file:` and `// error:`, in either order
        saved = next((m for m in map(_FILE.match, head) if m), None)
        expected = next((m for m in map(_ERROR.match, head) if m), None)
        if saved is not None:
            (self.workdir / saved.group(1)).write_text(block.text, encoding="utf-8")
        # blank lines ahead of the program put the diagnostics at the page's lines
        source = "\n" * block.line + block.text
        try:
            croqtile.compile(source, filename=self.label)
        except croqtile.CompileError as err:
            codes = [d.code for d in err.diagnostics if d.severity == "error"]
            if expected is None:
                self.fail(block.line, f"croqtile block does not compile:\n{err}")
            elif expected.group(1) not in codes:
                self.fail(block.line, f"croqtile block should fail with {expected.group(1)}, "
                                      f"got {codes}:\n{err}")
            return
        if expected is not None:
            self.fail(block.line, f"croqtile block compiles, but its first line says it "
                                  f"fails with {expected.group(1)}")

    def _python(self, block: Block) -> None:
        try:
            code = compile("\n" * block.line + block.text, self.label, "exec")
            exec(code, self.namespace)
        except Exception:  # noqa: BLE001 - any error of the block fails the page
            self.fail(block.line, "python block failed:\n" + _traceback())

    def _pycon(self, block: Block) -> None:
        text = block.text.split("\n", 1)[1] if block.gpu else block.text
        first = block.line + (1 if block.gpu else 0)
        parser = doctest.DocTestParser()
        test = parser.get_doctest(text, self.namespace, self.label, self.label, first)
        test.globs = self.namespace  # (get_doctest copies them; the page shares one)
        if not test.examples:
            self.fail(block.line, "pycon block has no `>>>` example")
        report = io.StringIO()
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        runner.run(test, out=report.write, clear_globs=False)
        if runner.failures:
            self.fail(block.line, "pycon block failed:\n" + report.getvalue())

    def _console(self, block: Block) -> None:
        try:
            console.run(block.text, self.workdir)
        except console.ConsoleError as err:
            self.fail(block.line + err.line, f"console: {err}")

    def _triton(self, block: Block) -> None:
        import croqtile

        head = _FROM.match(block.first_line)
        if head is None:
            self.fail(block.line, "a triton block starts with `# from NAME.co: FUNCTION`")
            return
        path = self.workdir / head.group(1)
        if not path.is_file():
            self.fail(block.line, f"{head.group(1)} was not saved by an earlier block "
                                  "(`// file: NAME.co` on a croqtile block's first line)")
        key = (str(path), path.stat().st_mtime)
        if key not in self.loaded:
            self.loaded[key] = croqtile.load(path)
        module = self.loaded[key]
        if head.group(2) not in module.functions:
            self.fail(block.line, f"{head.group(1)} has no function {head.group(2)}; it has "
                                  f"{sorted(module.functions)}")
        source = module.functions[head.group(2)].triton_source
        lines = [line.strip() for line in source.split("\n")]
        position = 0
        for number, want in enumerate(block.text.split("\n")[1:], start=block.line + 2):
            want = want.strip()
            if not want or want == "...":
                continue
            while position < len(lines) and want not in lines[position]:
                position += 1
            if position == len(lines):
                self.fail(number, f"triton: {want!r} is not in the Triton source of "
                                  f"{head.group(2)} (after the lines matched before it):\n"
                                  f"{source}")
            position += 1


def _traceback() -> str:
    """The current exception's traceback without the runner's own frame."""
    import sys

    kind, value, tb = sys.exc_info()
    frames = traceback.extract_tb(tb)[1:]
    return "".join(traceback.format_list(frames) + traceback.format_exception_only(kind, value))
