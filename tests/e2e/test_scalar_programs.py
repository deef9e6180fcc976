"""Random straight-line programs over integer scalars (locals, mutable scalars, updates,
conditional updates, at block and at thread level), run through the Triton path and the
reference interpreter, against the values Python computes for the same statements. A
lowering that named a local by the variable it was copied from (so that a later update of
the variable changed the local) failed here."""

from __future__ import annotations

import random as stdlib_random
from dataclasses import dataclass, field

import pytest
import torch

from .checks import Case, check, poison

THREADS = 16


@dataclass
class Program:
    """A program being generated: its lines, and per thread the Python value of every
    scalar it has declared so far (block-level scalars hold one value for every thread)."""

    rng: stdlib_random.Random
    inputs: list[int]
    n: int
    lines: list[str] = field(default_factory=list)
    values: dict[str, list[int]] = field(default_factory=dict)
    mutable: set[str] = field(default_factory=set)
    count: int = 0

    def expr(self, depth: int = 0) -> tuple[str, list[int]]:
        """A random expression over the declared scalars: its text and values."""
        rng = self.rng
        if depth >= 2 or rng.random() < 0.35:
            if self.values and rng.random() < 0.8:
                name = rng.choice(sorted(self.values))
                return name, list(self.values[name])
            c = rng.randint(0, 9)
            return str(c), [c] * THREADS
        op = rng.choice("+-*")
        left, lv = self.expr(depth + 1)
        if op == "*":  # (by a small constant: values stay far from 32-bit overflow)
            c = rng.randint(0, 3)
            return f"({left} * {c})", [x * c for x in lv]
        right, rv = self.expr(depth + 1)
        combine = (lambda x, y: x + y) if op == "+" else (lambda x, y: x - y)
        return f"({left} {op} {right})", [combine(x, y) for x, y in zip(lv, rv)]

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def statement(self, indent: str, names: list[str]) -> None:
        """One random statement; ``names`` are the mutable scalars it may update."""
        rng = self.rng
        kind = rng.choice(["local", "local", "mutable", "assign", "update", "step", "when"])
        if kind in ("local", "mutable") or not names:
            text, values = self.expr()
            mutable = kind == "mutable" or not names
            name = self.fresh("m" if mutable else "c")
            self.lines.append(f"{indent}{'mutable ' if mutable else ''}int {name} = {text};")
            self.values[name] = values
            if mutable:
                self.mutable.add(name)
                names.append(name)
            return
        target = rng.choice(names)
        old = self.values[target]
        if kind == "step":
            op = rng.choice(["++", "--"])
            self.lines.append(f"{indent}{target}{op};" if rng.random() < 0.5
                              else f"{indent}{op}{target};")
            self.values[target] = [x + (1 if op == "++" else -1) for x in old]
            return
        text, values = self.expr()
        if kind == "assign":
            self.lines.append(f"{indent}{target} = {text};")
            self.values[target] = values
        elif kind == "update":
            op = rng.choice(["+=", "-="])
            self.lines.append(f"{indent}{target} {op} {text};")
            self.values[target] = [x + y if op == "+=" else x - y for x, y in zip(old, values)]
        else:  # a conditional update
            cond, cv = self.expr()
            limit = rng.randint(-5, 20)
            self.lines.append(f"{indent}if ({cond} > {limit}) {target} += {text};")
            self.values[target] = [x + y if c > limit else x
                                   for x, y, c in zip(old, values, cv)]


def generate(seed: int) -> tuple[str, list[int], int, list[list[int]]]:
    """A program, its inputs (a, n) and the expected rows of ``out``."""
    rng = stdlib_random.Random(seed)
    inputs = [rng.randint(-20, 20) for _ in range(THREADS)]
    n = rng.randint(-20, 20)
    prog = Program(rng, inputs, n)
    prog.values["n"] = [n] * THREADS
    block_names: list[str] = []
    for _ in range(rng.randint(2, 6)):
        prog.statement("    ", block_names)
    block_lines = list(prog.lines)
    prog.lines = []
    # threads read the block's scalars but update only their own
    prog.values["a_t"] = list(inputs)
    prog.values["t"] = list(range(THREADS))
    thread_names: list[str] = []
    for _ in range(rng.randint(3, 9)):
        prog.statement("      ", thread_names)
    shown = sorted(k for k in prog.values if k not in ("n", "a_t", "t"))
    outs = [f"      out.at({i}, t) = {name};" for i, name in enumerate(shown)]
    source = "\n".join([
        f"__co__ void scalars(s32 [{THREADS}] a, global s32 [{len(shown)}, {THREADS}] out, "
        "int n) {",
        "  parallel p by 1 : block {",
        *block_lines,
        f"    parallel t by {THREADS} : thread {{",
        "      int a_t = a.at(t);",
        *prog.lines,
        *outs,
        "    }",
        "  }",
        "}",
    ])
    return source, inputs, n, [prog.values[name] for name in shown]


@pytest.mark.parametrize("seed", range(40))
def test_random_scalar_programs(seed: int) -> None:
    source, inputs, n, expected = generate(seed)
    rows = torch.tensor(expected, dtype=torch.float64)
    case = Case(f"scalars_{seed}", source,
                lambda: [torch.tensor(inputs, dtype=torch.int32),
                         poison(torch.empty(tuple(rows.shape), dtype=torch.int32)), n],
                lambda args: rows, torch.int32, output=1)
    check(case)


def test_the_generator_makes_programs_with_copies_and_updates() -> None:
    """The programs exercise what they are for: locals copied from scalars that are
    updated later, at both levels, and conditional updates."""
    sources = [generate(seed)[0] for seed in range(40)]
    assert sum("if (" in s for s in sources) >= 10
    assert sum("++" in s or "--" in s for s in sources) >= 10
    assert all("mutable int" in s for s in sources)
