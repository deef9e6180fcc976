"""``console`` blocks: shell sessions of ``$ `` commands, each followed by the output it
shows.

The rules (tests/docs/README.md states them for writers):

- ``$ croqtile ARGS`` runs the command line as ``python -m croqtile ARGS`` in the page's
  directory; it must exit 0, or with the status a trailing ``# exit status N`` names. Leading
  ``NAME=value`` words set environment variables for that command.
- ``$ pip install ...`` is accepted without running when everything it installs is this
  project (``.``, ``-e .``, ``.[EXTRA]``, ``croqtile``, ``croqtile[EXTRA]`` for an extra that
  pyproject.toml declares) or a package that pyproject.toml or the Makefile's pins name: the
  separate wheel-install test covers installing.
- ``$ make TARGET...`` is accepted without running when every target exists in the Makefile:
  the targets are what CI runs.
- ``$ git clone URL [DIR]`` and ``$ cd DIR`` are accepted without running.
- A command that is not run shows no output; any other command is an error.

Output lines below a run command must appear in its output (stdout and stderr together), in
order, each matching a whole line (trailing spaces ignored); ``...`` inside a line matches
any text, and a line that is only ``...`` matches anything. Blank expected lines are
ignored.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_EXIT = re.compile(r"\s+#\s*exit status (\d+)\s*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_LOCAL = re.compile(r"^(\.)/?(?:\[([A-Za-z0-9_,.-]+)\])?$")  # the checkout: `.`, `.[extra]`
_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([A-Za-z0-9_,.-]+)\])?")


class ConsoleError(Exception):
    """A console block that breaks the rules or whose command failed; ``line`` is the
    1-based line of the command within the block."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class Command:
    """A ``$ `` line (with its backslash continuations) and the output lines below it."""

    line: int
    text: str
    expected: list[tuple[int, str]] = field(default_factory=list)  # (line, text)


def parse(text: str) -> list[Command]:
    """The commands of a console block; text before the first ``$ `` is an error."""
    commands: list[Command] = []
    continued = False
    for number, raw in enumerate(text.rstrip("\n").split("\n"), start=1):
        if continued:
            commands[-1].text = commands[-1].text[:-1] + " " + raw.strip()
        elif raw.startswith("$ "):
            commands.append(Command(number, raw[2:].strip()))
        elif commands:
            commands[-1].expected.append((number, raw.rstrip()))
        elif raw.strip():
            raise ConsoleError(number, "a console block starts with a `$ ` command")
        continued = bool(commands) and commands[-1].text.endswith("\\")
    return commands


def run(text: str, cwd: Path) -> int:
    """Run or accept every command of a console block; the number of commands run."""
    count = 0
    for command in parse(text):
        count += _command(command, cwd)
    return count


def _command(command: Command, cwd: Path) -> int:
    status = 0
    line = command.text
    exit_note = _EXIT.search(line)
    if exit_note is not None:
        status = int(exit_note.group(1))
        line = line[:exit_note.start()]
    try:
        words = shlex.split(line)
    except ValueError as err:
        raise ConsoleError(command.line, f"cannot split the command: {err}") from None
    env: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    if not words:
        raise ConsoleError(command.line, "an empty command")
    if words[0] == "croqtile":
        output = _croqtile(command, words[1:], env, status, cwd)
        _match(command, output)
        return 1
    problem = _accepted(words)
    if problem:
        raise ConsoleError(command.line, problem)
    if env or exit_note is not None:
        raise ConsoleError(command.line, "only croqtile commands take environment "
                                         "assignments or an exit status")
    if any(out.strip() for _, out in command.expected):
        raise ConsoleError(command.line, f"`{words[0]}` is not run, so it can show no output")
    return 0


def _croqtile(command: Command, args: list[str], env: dict[str, str], status: int,
              cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "croqtile", *args], cwd=cwd,
                          env={**os.environ, **env}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    if done.returncode != status:
        raise ConsoleError(command.line, f"`{command.text}` exited with {done.returncode}, "
                                         f"not {status}; it printed:\n{done.stdout}")
    return done.stdout


def _accepted(words: list[str]) -> str:
    """Why a command that is not run breaks the rules; empty when it is accepted."""
    name, args = words[0], words[1:]
    if name in ("pip", "pip3") or words[:3] in (["python", "-m", "pip"],
                                                ["python3", "-m", "pip"]):
        args = words[3:] if name.startswith("python") else args
        return _pip(args)
    if name == "make":
        known = makefile_targets()
        unknown = [a for a in args if not a.startswith("-") and a not in known]
        return f"make: no target {', '.join(unknown)} in the Makefile" if unknown or not args \
            else ""
    if name == "git" and args[:1] == ["clone"] and 2 <= len(args) <= 3:
        return ""
    if name == "cd" and len(args) == 1:
        return ""
    return (f"`{' '.join(words)}`: a console block runs `croqtile` commands and accepts "
            "`pip install`, `make`, `git clone` and `cd` lines (tests/docs/README.md)")


def _pip(args: list[str]) -> str:
    if args[:1] != ["install"]:
        return "pip: only `pip install` is accepted"
    names = known_packages()
    extras = project_extras()
    rest = args[1:]
    if not [a for a in rest if not a.startswith("-")]:
        return "pip install: nothing to install"
    for arg in rest:
        if arg.startswith("-"):
            if arg not in ("-e", "--editable", "-U", "--upgrade", "--no-deps", "--quiet", "-q"):
                return f"pip install: option {arg} is not accepted"
            continue
        local = _LOCAL.match(arg)
        match = _REQUIREMENT.match(arg) if local is None else local
        if match is None:
            return f"pip install: cannot read {arg!r}"
        name = "croqtile" if local is not None else _normal(match.group(1))
        if name == "croqtile":
            wanted = set((match.group(2) or "").split(",")) - {""}
            if wanted - extras:
                return (f"pip install: croqtile has no extra {sorted(wanted - extras)}; "
                        f"pyproject.toml declares {sorted(extras)}")
        elif name not in names:
            return (f"pip install: {match.group(1)} is not a dependency that pyproject.toml "
                    "or the Makefile names")
    return ""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyproject() -> dict[str, object]:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def project_extras() -> set[str]:
    """The optional-dependency groups of pyproject.toml."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    return set(project.get("optional-dependencies", {}))


def known_packages() -> set[str]:
    """Every package pyproject.toml depends on (optional ones included) and the Makefile
    pins, normalised."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    specs = list(project.get("dependencies", []))
    for group in project.get("optional-dependencies", {}).values():
        specs.extend(group)
    pins = re.search(r"^PINS\s*:?=(.*)$", (ROOT / "Makefile").read_text(), re.M)
    if pins is not None:
        specs.extend(pins.group(1).split())
    found = {_REQUIREMENT.match(spec.strip()) for spec in specs}
    return {_normal(m.group(1)) for m in found if m is not None} | {"croqtile"}


def makefile_targets() -> set[str]:
    """The rule targets of the Makefile."""
    text = (ROOT / "Makefile").read_text()
    return {name for names in re.findall(r"^([A-Za-z0-9_.\- ]+):(?!=)", text, re.M)
            for name in names.split() if not name.startswith(".")}


def _match(command: Command, output: str) -> None:
    """Each expected line, in order, matches a later line of ``output``."""
    actual = [line.rstrip() for line in output.split("\n")]
    position = 0
    for number, want in command.expected:
        if not want.strip() or want.strip() == "...":
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in want.split("...")) + r"\Z")
        while position < len(actual) and not pattern.match(actual[position]):
            position += 1
        if position == len(actual):
            raise ConsoleError(number,
                               f"`{command.text}`: the expected line {want!r} is not in the "
                               f"output (in order); the output was:\n{output}")
        position += 1
