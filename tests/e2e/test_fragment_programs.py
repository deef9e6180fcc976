"""Random fragment programs (``frag`` tiles and row vectors, ``apply`` bodies with
temporaries, in-place and conditional element updates, row reductions, ``copy``) run
through the Triton path and the reference interpreter, against the values torch computes
in float64 for the same statements. An ``apply`` temporary that read an element after the
same body rewrote it (a lowering that named the temporary by the tile itself) failed
here."""

from __future__ import annotations

import random as stdlib_random
import re
from dataclasses import dataclass, field

import pytest
import torch

from .checks import Case, check, poison

N = 16


@dataclass
class Program:
    """A program being generated: its lines and the float64 value of every tile
    (``[N, N]``) and row vector (``[N, 1]``) it holds so far."""

    rng: stdlib_random.Random
    x: torch.Tensor
    y: torch.Tensor
    lines: list[str] = field(default_factory=list)
    tiles: dict[str, torch.Tensor] = field(default_factory=dict)
    vectors: dict[str, torch.Tensor] = field(default_factory=dict)
    count: int = 0

    def const(self) -> tuple[str, float]:
        c = self.rng.choice([0.5, 1.0, 1.5, 2.0, 0.25, 3.0])
        return f"{c}f", c

    def elem_expr(self, temps: dict[str, torch.Tensor], depth: int = 0) -> tuple[str, torch.Tensor]:
        """An expression of one element of an ``apply {i, j}`` body."""
        rng = self.rng
        if depth >= 2 or rng.random() < 0.4:
            choices = ["x", "y"] + [f"T:{t}" for t in self.tiles] + [f"R:{v}" for v in self.vectors] \
                + [f"t:{t}" for t in temps] + ["c"]
            pick = rng.choice(choices)
            if pick == "x":
                return "x.at(i, j)", self.x
            if pick == "y":
                return "y.at(i, j)", self.y
            if pick == "c":
                text, c = self.const()
                return text, torch.full((N, N), c, dtype=torch.float64)
            kind, name = pick.split(":")
            if kind == "T":
                return f"{name}.at(i, j)", self.tiles[name].clone()
            if kind == "R":
                return f"{name}.at(i)", self.vectors[name].expand(N, N).clone()
            return name, temps[name].clone()
        op = rng.choice(["+", "-", "*c", "max"])
        left, lv = self.elem_expr(temps, depth + 1)
        if op == "*c":
            text, c = self.const()
            return f"({left} * {text})", lv * c
        right, rv = self.elem_expr(temps, depth + 1)
        if op == "max":
            return f"__max({left}, {right})", torch.maximum(lv, rv)
        return f"({left} {op} {right})", lv + rv if op == "+" else lv - rv

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def tile_apply(self) -> None:
        rng = self.rng
        over = rng.choice(sorted(self.tiles))
        body: list[str] = []
        temps: dict[str, torch.Tensor] = {}
        for _ in range(rng.randint(2, 5)):
            kind = rng.choice(["temp", "temp", "set", "add", "when", "keep"])
            if kind == "keep" and len(self.tiles) > 1:
                # an element kept in a temporary, its tile rewritten, the temporary used
                source, other = rng.sample(sorted(self.tiles), 2)
                name = self.fresh("t")
                text, value = self.elem_expr(temps)
                body += [f"{name} = {source}.at(i, j);", f"{source}.at(i, j) = {text};",
                         f"{other}.at(i, j) = {name} - {other}.at(i, j);"]
                temps[name] = self.tiles[source]
                self.tiles[source] = value
                self.tiles[other] = temps[name] - self.tiles[other]
                continue
            text, value = self.elem_expr(temps)
            if kind == "temp":
                name = self.fresh("t")
                body.append(f"{name} = {text};")
                temps[name] = value
                continue
            target = rng.choice(sorted(self.tiles))
            if kind == "set":
                body.append(f"{target}.at(i, j) = {text};")
                self.tiles[target] = value
            elif kind == "add":
                body.append(f"{target}.at(i, j) += {text};")
                self.tiles[target] = self.tiles[target] + value
            else:
                cond, cv = self.elem_expr(temps)
                # a threshold no element lies near (f32 and float64 compare alike)
                limit = next((t for t in (1.0, 0.375, 1.625, -0.5) if
                              (cv - t).abs().min().item() > 1e-3), None)
                if limit is None:
                    continue
                body.append(f"if ({cond} > {limit}f) {target}.at(i, j) = {text};")
                self.tiles[target] = torch.where(cv > limit, value, self.tiles[target])
        self.lines.append(f"apply {{i, j}} in {over}.span {{")
        self.lines += [f"  {line}" for line in body]
        self.lines.append("}")

    def reduction(self) -> None:
        op = self.rng.choice(["reduce_sum", "reduce_max"])
        vector = self.rng.choice(sorted(self.vectors))
        tile = self.rng.choice(sorted(self.tiles))
        self.lines.append(f"{op}({vector}, {tile}, 1);")
        t = self.tiles[tile]
        self.vectors[vector] = (t.sum(1, keepdim=True) if op == "reduce_sum"
                                else t.max(1, keepdim=True).values) / (N if op == "reduce_sum"
                                                                       else 1)
        if op == "reduce_sum":  # (kept in range: the sum's scale taken back out below)
            self.lines.append(f"apply {{i}} in {vector}.span {vector}.at(i) = "
                              f"{vector}.at(i) * {1.0 / N}f;")

    def row_apply(self) -> None:
        rng = self.rng
        target = rng.choice(sorted(self.vectors))
        other = rng.choice(sorted(self.vectors))
        text, c = self.const()
        self.lines.append(f"apply {{i}} in {target}.span {target}.at(i) = "
                          f"__max({target}.at(i), {other}.at(i)) - {text};")
        self.vectors[target] = torch.maximum(self.vectors[target], self.vectors[other]) - c

    def copy(self) -> None:
        dst, src = self.rng.sample(sorted(self.tiles), 2)
        self.lines.append(f"copy({dst}, {src});")
        self.tiles[dst] = self.tiles[src].clone()


def generate(seed: int) -> tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A program, its inputs x and y, and the expected ``out``."""
    rng = stdlib_random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand((N, N), generator=gen, dtype=torch.float32) * 4 - 2
    y = torch.rand((N, N), generator=gen, dtype=torch.float32) * 4 - 2
    prog = Program(rng, x.double(), y.double())
    decls = []
    for _ in range(rng.randint(2, 3)):
        name = prog.fresh("F")
        text, c = prog.const()
        decls.append(f"frag f32[{N}, {N}] {name} {{{text}}};")
        prog.tiles[name] = torch.full((N, N), c, dtype=torch.float64)
    for _ in range(rng.randint(1, 2)):
        name = prog.fresh("R")
        text, c = prog.const()
        decls.append(f"frag f32[{N}] {name} {{{text}}};")
        prog.vectors[name] = torch.full((N, 1), c, dtype=torch.float64)
    for _ in range(rng.randint(3, 7)):
        rng.choice([prog.tile_apply, prog.tile_apply, prog.reduction, prog.row_apply,
                    prog.copy])()
    names = sorted(prog.tiles) + sorted(prog.vectors)
    outs = [f"  out.at({k}, i, j) = {n}.at(i, j);" if n in prog.tiles
            else f"  out.at({k}, i, j) = {n}.at(i);" for k, n in enumerate(names)]
    first = sorted(prog.tiles)[0]
    body = decls + prog.lines + [f"apply {{i, j}} in {first}.span {{", *outs, "}"]
    source = "\n".join([
        f"__co__ void frags(f32 [{N}, {N}] x, f32 [{N}, {N}] y, "
        f"global f32 [{len(names)}, {N}, {N}] out) {{",
        "  parallel p by 1 : block {",
        "    parallel g by 1 : group-4 {",
        *[f"      {line}" for line in body],
        "    }",
        "  }",
        "}",
    ])
    expected = torch.stack([prog.tiles[n] if n in prog.tiles else prog.vectors[n].expand(N, N)
                            for n in names])
    return source, x, y, expected


@pytest.mark.parametrize("seed", range(30))
def test_random_fragment_programs(seed: int) -> None:
    source, x, y, expected = generate(seed)
    case = Case(f"frags_{seed}", source,
                lambda: [x.clone(), y.clone(),
                         poison(torch.empty(tuple(expected.shape), dtype=torch.float32))],
                lambda args: expected, torch.float32, output=2)
    check(case)


def test_the_generator_makes_programs_with_temporaries_and_rewrites() -> None:
    sources = [generate(seed)[0] for seed in range(30)]
    kept = re.compile(r"(t\d+) = (F\d+)\.at\(i, j\);\n\s*\2\.at\(i, j\) = .*;\n.*= \1 - ")
    assert sum(bool(kept.search(s)) for s in sources) >= 10
    assert sum("reduce_" in s for s in sources) >= 5
    assert sum("if (" in s for s in sources) >= 5
