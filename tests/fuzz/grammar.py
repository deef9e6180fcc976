"""Grammar-directed random programs.

Most programs are well-formed: parameters with random element types and shapes, local
buffers, parallel nests over block / group / thread levels, foreach / with / if / while,
DMA and TMA copies with chunkat / subspan / view tiles, the four MMA steps, scalar
declarations and random expressions over everything in scope. Shapes are drawn so that
tiles usually divide, so the checker accepts most programs and the lowering and the code
generator run on them. A few faults (a wrong rank, an unknown name, a mismatched type)
are planted on purpose, so that the checker's error paths run deep inside valid code.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

FLOATS = ("f32", "f16", "bf16", "f64")
INTS = ("s32", "s8", "u8", "s16", "u16", "s64", "u32")
ODD_TYPES = ("f8_e4m3", "f8_e5m2", "tf32", "u1", "f4_e2m1", "bool", "int", "half", "float",
             "double", "bfp16")
LEVELS = ("block", "group-4", "group", "thread")
SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
MATH = ("__exp", "__sqrt", "__fabs", "__sin", "__tanh", "__sigmoid", "__floor", "__log1p",
        "__gelu", "__rsqrt", "__sign", "__round")


@dataclass
class Tensor:
    name: str
    elem: str
    dims: list[str]  # each an int literal or a symbolic name
    storage: str = "global"

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass
class Scope:
    """What the program may name at the current point."""

    tensors: list[Tensor] = field(default_factory=list)
    ints: list[str] = field(default_factory=list)  # int scalars, dims, loop variables
    mutables: list[str] = field(default_factory=list)
    values: list[tuple[str, str]] = field(default_factory=list)  # (scalar name, elem type)
    bounded: list[tuple[str, int]] = field(default_factory=list)  # loop var, static extent
    futures: list[Tensor] = field(default_factory=list)  # DMA results: name.data is a tile
    dims: list[str] = field(default_factory=list)  # symbolic dims of the parameters
    device: bool = False
    loops: int = 0
    level: int = -1  # index in LEVELS of the innermost parallel level, -1 on the host

    def child(self) -> Scope:
        return Scope(list(self.tensors), list(self.ints), list(self.mutables), list(self.values),
                     list(self.bounded), list(self.futures), list(self.dims), self.device,
                     self.loops, self.level)


class Builder:
    """Writes one random program; ``fault`` is the chance of a planted mistake per choice."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.fault = rng.choice((0.0, 0.0, 0.0, 0.0, 0.002, 0.01))
        self.counter = 0
        self.lines: list[str] = []
        self.indent = 1

    # --- helpers -----------------------------------------------------------------------

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def faulty(self) -> bool:
        return self.rng.random() < self.fault

    def emit(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)

    def elem(self) -> str:
        if self.faulty():
            return self.rng.choice(ODD_TYPES)
        return self.rng.choice(FLOATS + INTS if self.rng.random() < 0.5 else ("f32", "s32", "f16"))

    def size(self, small: bool = False) -> int:
        return self.rng.choice(SIZES[:5] if small else SIZES)

    def literal(self, elem: str) -> str:
        rng = self.rng
        if elem in FLOATS or elem in ("half", "float", "double", "bfp16", "tf32"):
            return rng.choice(("0.0f", "1.0f", "0.5", "2.0", "-1.5f", "3.25"))
        return str(rng.choice((0, 1, 2, 3, -1, 7, 100)))

    # --- expressions -------------------------------------------------------------------

    def int_expr(self, scope: Scope, depth: int = 0) -> str:
        rng = self.rng
        if depth > 3 or rng.random() < 0.35:
            atoms = [str(rng.choice((0, 1, 2, 3, 4, 8, 16)))] + scope.ints
            atoms += [f"#{v}" for v, _ in scope.bounded]
            atoms += [f"{t.name}.span({rng.randrange(t.rank)})" for t in scope.tensors if t.rank]
            atoms += [f"|{t.name}.span|" for t in scope.tensors[:2]]
            if self.faulty():
                atoms.append(rng.choice(("undeclared", "1.5f", "a.span", "true", "_")))
            return rng.choice(atoms)
        kind = rng.randrange(8)
        a, b = self.int_expr(scope, depth + 1), self.int_expr(scope, depth + 1)
        if kind < 3:
            return f"{a} {rng.choice(('+', '-', '*'))} {b}"
        if kind == 3:
            return f"({a}) {rng.choice(('/', '%'))} {rng.choice((1, 2, 3, 4, 16))}"
        if kind == 4:
            return f"cdiv({a}, {rng.choice((1, 2, 16))})"
        if kind == 5:
            return f"{rng.choice(('__max', '__min'))}({a}, {b})"
        if kind == 6:
            return f"({self.bool_expr(scope, depth + 1)} ? {a} : {b})"
        return f"({a} {rng.choice(('&', '|', '^', '<<', '>>'))} {rng.choice((1, 2, 3))})"

    def bool_expr(self, scope: Scope, depth: int = 0) -> str:
        rng = self.rng
        if depth > 3 or rng.random() < 0.5:
            op = rng.choice(("<", "<=", ">", ">=", "==", "!="))
            return f"{self.int_expr(scope, depth + 1)} {op} {self.int_expr(scope, depth + 1)}"
        kind = rng.randrange(4)
        if kind == 0:
            return f"!({self.bool_expr(scope, depth + 1)})"
        if kind == 1:
            return rng.choice(("true", "false"))
        op = rng.choice(("&&", "||"))
        return f"({self.bool_expr(scope, depth + 1)}) {op} ({self.bool_expr(scope, depth + 1)})"

    def value_expr(self, scope: Scope, elem: str, access: list[str], depth: int = 0) -> str:
        """An expression of about type ``elem``; ``access`` are element reads in scope."""
        rng = self.rng
        if depth > 3 or rng.random() < 0.3:
            atoms = [self.literal(elem)] + access + [n for n, _ in scope.values]
            if scope.ints and rng.random() < 0.2:
                atoms.append(rng.choice(scope.ints))
            return rng.choice(atoms)
        kind = rng.randrange(9)
        a = self.value_expr(scope, elem, access, depth + 1)
        b = self.value_expr(scope, elem, access, depth + 1)
        if kind < 4:
            return f"{a} {rng.choice(('+', '-', '*'))} {b}"
        if kind == 4:
            return f"({a})"
        if kind == 5 and elem in FLOATS:
            return f"{rng.choice(MATH)}({a})"
        if kind == 6:
            return f"__to<{elem if not self.faulty() else self.elem()}>({a})"
        if kind == 7:
            return f"({self.bool_expr(scope, depth + 1)} ? {a} : {b})"
        return f"{rng.choice(('__max', '__min'))}({a}, {b})"

    # --- declarations ----------------------------------------------------------------------

    def params(self, scope: Scope) -> list[str]:
        """Parameters: a few tensors sharing dims and, sometimes, int scalars."""
        rng = self.rng
        rank = rng.choice((1, 2, 2, 2, 3))
        dims = [str(self.size()) if rng.random() < 0.7 else rng.choice("MNK") for _ in range(rank)]
        elem = self.elem()
        out: list[str] = []
        for i in range(rng.randint(1, 3)):
            t = Tensor(rng.choice(("a", "b", "c", "lhs", "rhs", "x"))
                       + str(i), elem if rng.random() < 0.8 else self.elem(), list(dims))
            if self.faulty():
                t.dims = t.dims[:-1] or ["4"]
            scope.tensors.append(t)
            storage = rng.choice(("", "", "global "))
            out.append(f"{storage}{t.elem} [{', '.join(t.dims)}] {t.name}")
        for d in dims:
            if not d.isdigit() and d not in scope.ints:
                scope.ints.append(d)
                scope.dims.append(d)
        if rng.random() < 0.3:
            name = self.fresh("num")
            scope.ints.append(name)
            out.append(f"int {name}")
        if rng.random() < 0.2:
            name = self.fresh("sc")
            scope.values.append((name, elem))
            out.append(f"{elem} {name}")
        return out

    def local_buffer(self, scope: Scope, like: Tensor | None = None) -> Tensor:
        rng = self.rng
        name = self.fresh("buf")
        storage = ("shared" if rng.random() < 0.6 else "local") if scope.device else ""
        static = like is not None and all(d.isdigit() for d in like.dims)
        if like is not None and (static or not scope.device) and rng.random() < 0.5:
            t = Tensor(name, like.elem, list(like.dims), storage or "global")
            self.emit(f"{storage + ' ' if storage else ''}{t.elem} [{like.name}.span] {name};")
        else:
            dims = [str(self.size(small=scope.device)) for _ in range(rng.choice((1, 2)))]
            t = Tensor(name, self.elem(), dims, storage or "global")
            self.emit(f"{storage + ' ' if storage else ''}{t.elem} [{', '.join(dims)}] {name};")
        scope.tensors.append(t)
        return t

    def scalar_decl(self, scope: Scope) -> None:
        rng = self.rng
        name = self.fresh("v")
        if rng.random() < 0.6:
            mutable = rng.random() < 0.4
            self.emit(f"{'mutable ' if mutable else ''}int {name} = {self.int_expr(scope)};")
            scope.ints.append(name)
            if mutable:
                scope.mutables.append(name)
        else:
            elem = rng.choice(FLOATS)
            self.emit(f"{elem} {name} = {self.value_expr(scope, elem, [])};")
            scope.values.append((name, elem))

    # --- statements ------------------------------------------------------------------------

    def access(self, t: Tensor, scope: Scope) -> str:
        """``t.at(...)`` with indices from the loop variables in scope."""
        rng = self.rng
        rank = max(1, t.rank + (rng.choice((-1, 1)) if self.faulty() else 0))
        idx = []
        for _ in range(max(rank, 0)):
            if scope.bounded and rng.random() < 0.8:
                names = [v for v, _ in scope.bounded]
                if len(names) >= 2 and rng.random() < 0.4:
                    idx.append(f"{rng.choice(names)} # {rng.choice(names)}")
                else:
                    idx.append(rng.choice(names))
            else:
                idx.append(rng.choice(("0", "1")) if rng.random() < 0.7 else self.int_expr(scope))
        return f"{t.name}.at({', '.join(idx)})"

    def reads(self, scope: Scope, elem: str) -> list[str]:
        out = [self.access(t, scope) for t in scope.tensors if t.elem == elem and t.rank]
        out += [self.access(Tensor(f"{f.name}.data", f.elem, f.dims), scope)
                for f in scope.futures if f.elem == elem]
        return out[:4]

    def element_assign(self, scope: Scope) -> None:
        targets = [t for t in scope.tensors if t.rank]
        if not targets:
            return
        t = self.rng.choice(targets)
        op = self.rng.choice(("=", "=", "+=", "-=", "*="))
        value = self.value_expr(scope, t.elem, self.reads(scope, t.elem))
        self.emit(f"{self.access(t, scope)} {op} {value};")

    def statement(self, scope: Scope, depth: int) -> None:
        rng = self.rng
        if not scope.device and not self.faulty():
            self.host_statement(scope, depth)
            return
        kind = rng.randrange(15 if depth < 4 else 8)
        if kind < 3:
            self.element_assign(scope)
        elif kind == 3:
            self.scalar_decl(scope)
        elif kind == 4 and scope.mutables:
            name = rng.choice(scope.mutables)
            self.emit(f"{name} {rng.choice(('=', '+=', '-='))} {self.int_expr(scope)};")
        elif kind == 5 and scope.device:
            self.dma(scope)
        elif kind == 6 and scope.loops:
            self.emit(f"if ({self.bool_expr(scope)}) {rng.choice(('break;', 'continue;'))}")
        elif kind == 7 and scope.device and rng.random() < 0.3:
            self.emit(rng.choice(("sync.shared;", "yield;", "sync.barrier : block;")))
        elif kind in (8, 9):
            self.foreach(scope, depth)
        elif kind == 10:
            self.if_stmt(scope, depth)
        elif kind == 11:
            self.with_stmt(scope, depth)
        elif kind == 12 and not scope.device and rng.random() < 0.3:
            self.while_stmt(scope, depth)
        elif kind == 13 and (scope.level + 1 < len(LEVELS) or self.faulty()):
            deeper = LEVELS[scope.level + 1:] or LEVELS
            self.parallel(scope, depth, rng.choice(deeper))
        elif kind == 14 and scope.device:
            self.mma(scope)
        else:
            self.element_assign(scope)

    def host_statement(self, scope: Scope, depth: int) -> None:
        """Host code may declare buffers and constants and launch parallel blocks."""
        choice = self.rng.randrange(6)
        if choice == 0:
            name = self.fresh("v")
            self.emit(f"int {name} = {self.rng.choice((1, 2, 4, 16))};")
            scope.ints.append(name)
        elif choice == 1:
            self.local_buffer(scope, self.rng.choice(scope.tensors) if scope.tensors else None)
        else:
            self.parallel(scope, depth, "block")

    def block(self, scope: Scope, depth: int, count: int | None = None) -> None:
        self.indent += 1
        for _ in range(count if count is not None else self.rng.randint(1, 4)):
            self.statement(scope, depth + 1)
        self.indent -= 1

    def foreach(self, scope: Scope, depth: int) -> None:
        rng = self.rng
        inner = scope.child()
        inner.loops += 1
        names = [self.fresh("i") for _ in range(rng.choice((1, 1, 2)))]
        if scope.futures and rng.random() < 0.4:
            fut = rng.choice(scope.futures)
            names = names[:1] if len(fut.dims) == 1 else [self.fresh("i") for _ in fut.dims]
            over = f"{fut.name}.span"
            extents = [int(d) if d.isdigit() else 1 for d in fut.dims]
        else:
            extents = [self.size(small=True) for _ in names]
            over = f"[{', '.join(map(str, extents))}]" if rng.random() < 0.8 else str(extents[0])
            if not over.startswith("["):
                names, extents = names[:1], extents[:1]
        for n, e in zip(names, extents):
            inner.bounded.append((n, e))
            inner.ints.append(n)
        braced = f"{{{', '.join(names)}}}" if len(names) > 1 or rng.random() < 0.5 else names[0]
        suffix = " : unroll" if rng.random() < 0.1 else ""
        self.emit(f"foreach {braced} in {over}{suffix} {{")
        self.block(inner, depth)
        self.emit("}")

    def with_stmt(self, scope: Scope, depth: int) -> None:
        inner = scope.child()
        name = self.fresh("w")
        extent = self.size(small=True)
        inner.bounded.append((name, extent))
        inner.ints.append(name)
        self.emit(f"with {name} in {extent} {{")
        self.block(inner, depth)
        self.emit("}")

    def if_stmt(self, scope: Scope, depth: int) -> None:
        self.emit(f"if ({self.bool_expr(scope)}) {{")
        self.block(scope.child(), depth)
        if self.rng.random() < 0.4:
            self.emit("} else {")
            self.block(scope.child(), depth)
        self.emit("}")

    def while_stmt(self, scope: Scope, depth: int) -> None:
        name = self.fresh("c")
        self.emit(f"mutable int {name} = 0;")
        inner = scope.child()
        inner.loops += 1
        self.emit(f"while ({name} < {self.rng.randint(1, 4)}) {{")
        self.indent += 1
        self.emit(f"{name} += 1;")
        self.indent -= 1
        self.block(inner, depth, self.rng.randint(0, 2))
        self.emit("}")

    def parallel(self, scope: Scope, depth: int, level: str) -> None:
        rng = self.rng
        inner = scope.child()
        inner.device = True
        inner.level = LEVELS.index(level)
        names = [self.fresh("p") for _ in range(rng.choice((1, 1, 2)))]
        if level == "block":
            bounds = [str(self.size(small=True)) if rng.random() < 0.7 or not scope.dims else
                      f"cdiv({rng.choice(scope.dims)}, {self.size(small=True)})"
                      for _ in names]
        else:
            bounds = [str(rng.choice((1, 2, 4, 8))) for _ in names]
        for n, b in zip(names, bounds):
            inner.bounded.append((n, int(b) if b.isdigit() else 1))
            inner.ints.append(n)
        head = f"{{{', '.join(names)}}} by [{', '.join(bounds)}]" if len(names) > 1 \
            else f"{names[0]} by {bounds[0]}"
        suffix = f" : {level}" if rng.random() < 0.9 or level != "block" else ""
        self.emit(f"parallel {head}{suffix} {{")
        self.indent += 1
        for _ in range(rng.randint(0, 2)):
            if rng.random() < 0.5:
                self.local_buffer(inner, rng.choice(scope.tensors) if scope.tensors else None)
        self.indent -= 1
        self.block(inner, depth)
        self.emit("}")

    # --- DMA and MMA -----------------------------------------------------------------------

    def tile(self, t: Tensor, scope: Scope) -> tuple[str, list[str]]:
        """A view of ``t`` and the shape it has (when the random choice is consistent)."""
        rng = self.rng
        names = [v for v, _ in scope.bounded] or ["0"]
        kind = rng.randrange(4)
        if kind == 0:
            return t.name, list(t.dims)
        if kind == 1:
            factors = [rng.choice(names) for _ in t.dims]
            return f"{t.name}.chunkat({', '.join(factors)})", ["?"] * t.rank
        sizes = [str(rng.choice([s for s in (1, 2, 4, 8, 16) if not d.isdigit() or s <= int(d)]))
                 for d in t.dims]
        idx = [rng.choice(names) for _ in t.dims]
        if kind == 2:
            return f"{t.name}.subspan({', '.join(sizes)}).at({', '.join(idx)})", sizes
        return f"{t.name}.view({', '.join(sizes)}).from({', '.join(idx)})", sizes

    def dma(self, scope: Scope) -> None:
        rng = self.rng
        sources = [t for t in scope.tensors if t.rank]
        if not sources:
            return
        t = rng.choice(sources)
        view, shape = self.tile(t, scope)
        engine = "tma" if t.storage == "global" and rng.random() < 0.2 else "dma"
        mods = ""
        if rng.random() < 0.15:
            mods += ".zfill"
        if rng.random() < 0.1:
            mods += f".swiz<{rng.choice((32, 64, 128))}>"
        is_async = rng.random() < 0.2
        name = self.fresh("fu")
        dest = "shared" if rng.random() < 0.7 or engine == "tma" else "local"
        if rng.random() < 0.2 and engine == "dma":
            local = [b for b in scope.tensors if b.storage in ("shared", "local")]
            if local:
                dest = rng.choice(local).name
        self.emit(f"{name} = {engine}.copy{'.async' if is_async else ''}{mods} {view} => {dest};")
        if is_async:
            self.emit(f"wait {name};")
        if all(d.isdigit() for d in shape):
            scope.futures.append(Tensor(name, t.elem, shape, "shared"))
        if rng.random() < 0.3 and scope.futures:
            fut = scope.futures[-1]
            targets = [g for g in scope.tensors if g.storage == "global" and g.rank == len(fut.dims)]
            if targets:
                g = rng.choice(targets)
                names = [v for v, _ in scope.bounded] or ["0"]
                idx = ", ".join(rng.choice(names) for _ in fut.dims)
                self.emit(f"dma.copy {fut.name}.data => {g.name}.subspan("
                          f"{', '.join(fut.dims)}).at({idx});")

    def mma(self, scope: Scope) -> None:
        """fill / load / exec / store on tiles copied from a rank-2 global tensor."""
        rng = self.rng
        sources = [t for t in scope.tensors if t.rank == 2 and t.storage == "global"
                   and t.elem in ("f16", "bf16", "f32", "s8", "f8_e4m3")]
        if not sources:
            return
        t = rng.choice(sources)
        size = rng.choice((16, 16, 32, 8))
        names = [v for v, _ in scope.bounded] or ["0"]
        idx = f"{rng.choice(names)}, {rng.choice(names)}"
        acc = {"f16": rng.choice(("", ".f32", ".f16")), "s8": ".s32"}.get(t.elem, ".f32")
        fa, fb, mc, ma, mb = (self.fresh(x) for x in ("fa", "fb", "mc", "ma", "mb"))
        self.emit(f"{fa} = dma.copy {t.name}.subspan({size}, {size}).at({idx}) => shared;")
        self.emit(f"{fb} = dma.copy {t.name}.subspan({size}, {size}).at({idx}) => shared;")
        self.emit(f"{mc} = mma.fill{acc} 0.0f;")
        self.emit(f"{ma} = mma.load {fa}.data;")
        self.emit(f"{mb} = mma.load {fb}.data;")
        self.emit(f"mma.{rng.choice(('row', 'col'))}.{rng.choice(('row', 'col'))} {mc}, {ma}, {mb};")
        out_elem = "s32" if t.elem == "s8" else rng.choice(("f16", "f32"))
        c = self.fresh("so")
        self.emit(f"shared {out_elem} [{size}, {size}] {c};")
        self.emit(f"mma.store {mc}, {c};")
        scope.tensors.append(Tensor(c, out_elem, [str(size), str(size)], "shared"))

    # --- families of whole kernels ---------------------------------------------------------

    def gemm(self, name: str) -> str:
        """A tiled GEMM in the shape of the seed programs, with random tiles and choices."""
        rng = self.rng
        elem = rng.choice(("f16", "f16", "bf16", "f8_e4m3", "f32", "s8"))
        acc = {"f16": rng.choice(("", ".f32", ".f16")), "s8": ".s32"}.get(elem, ".f32")
        out_elem = "s32" if elem == "s8" else rng.choice(("f16", "f32", elem))
        tm, tn = rng.choice((16, 32, 64, 128)), rng.choice((16, 32, 64, 128))
        tk, wk = rng.choice((16, 32, 64)), rng.choice((8, 16, 32))
        if self.faulty():
            tm = rng.choice((3, 24, 1000))
        warps = rng.choice((1, 1, 2))
        scope_level = rng.choice(("group-4", "group", None))
        dims = {"M": "M", "N": "N", "K": "K"}
        if rng.random() < 0.3:
            dims = {k: str(rng.choice((16, 64, 128, 256))) for k in dims}
        trans_b = rng.random() < 0.3
        b_dims = f"{dims['K']}, {dims['N']}" if trans_b else f"{dims['N']}, {dims['K']}"
        layout = f"mma.row.{'col' if trans_b else 'row'}"
        b_tile = f"{tk}, {tn}" if trans_b else f"{tn}, {tk}"
        b_at = "iv_k, block_n" if trans_b else "block_n, iv_k"
        engine = rng.choice(("dma", "dma", "tma"))
        lines = [
            f"__co__ void {name}(global {elem} [{dims['M']}, {dims['K']}] lhs, "
            f"global {elem} [{b_dims}] rhs, global {out_elem} [{dims['M']}, {dims['N']}] output) {{",
            f"  parallel {{block_m, block_n}} by [cdiv({dims['M']}, {tm * warps}), "
            f"cdiv({dims['N']}, {tn})] : block {{",
            f"    shared {out_elem} [{tm * warps}, {tn}] output_s;",
            f"    mc = mma.fill{acc} 0.0f;",
            f"    foreach {{iv_k}} in [cdiv({dims['K']}, {tk})] {{",
            f"      la = {engine}.copy lhs.subspan({tm * warps}, {tk}).at(block_m, iv_k) => shared;",
            f"      lb = {engine}.copy rhs.subspan({b_tile}).at({b_at}) => shared;",
        ]
        a_view = "la.data"
        scoped = warps > 1 or scope_level is not None
        if scoped:
            lines.append(f"      parallel w by {warps} : {scope_level or 'group-4'} {{")
            a_view = f"la.data.subspan({tm}, {tk}).at(w, 0)"
        b_chunk = "chunkat(iv_w, _)" if trans_b else "chunkat(_, iv_w)"
        lines += [
            f"        foreach {{iv_w}} in [cdiv({tk}, {wk})] {{",
            f"          ma = mma.load {a_view}.chunkat(_, iv_w);",
            f"          mb = mma.load lb.data.{b_chunk};",
            f"          {layout} mc, ma, mb;",
            "        }",
        ]
        if scoped:
            lines.append("      }")
        lines.append("    }")
        if warps > 1:
            lines += [f"    parallel w by {warps} : {scope_level or 'group-4'} {{",
                      f"      mma.store mc, output_s.subspan({tm}, {tn}).at(w, 0);", "    }"]
        else:
            lines.append("    mma.store mc, output_s;")
        lines += [f"    dma.copy output_s => output.subspan({tm * warps}, {tn}).at(block_m, block_n);",
                  "  }", "}"]
        return "\n".join(lines) + "\n"

    def tiled(self, name: str) -> str:
        """Element-wise work on tiles staged through shared memory (README example)."""
        rng = self.rng
        elem = self.elem()
        rows, cols = rng.choice((8, 16, 64)), rng.choice((8, 32, 128))
        tr, tc = rng.choice((1, 2, 4)), rng.choice((1, 2, 8))
        op = rng.choice(("+", "-", "*"))
        threads = rng.random() < 0.5
        body = [
            f"__co__ {elem} [{rows}, {cols}] {name}({elem} [{rows}, {cols}] lhs, "
            f"{elem} [{rows}, {cols}] rhs) {{",
            f"  {elem} [lhs.span] output;",
            f"  parallel {{tr, tc}} by [{tr}, {tc}]{' : block' if threads else ''} {{",
            "    l = dma.copy lhs.chunkat(tr, tc) => shared;",
            "    r = dma.copy rhs.chunkat(tr, tc) => shared;",
        ]
        value = f"l.data.at(i, j) {op} r.data.at(i, j)"
        if rng.random() < 0.5:
            scope = Scope(ints=["i", "j"], bounded=[("i", 1), ("j", 1)])
            value = self.value_expr(scope, elem, ["l.data.at(i, j)", "r.data.at(i, j)"])
        if threads:
            body += [f"    parallel {{i, j}} by [{rows // tr}, {cols // tc}] : thread",
                     f"      output.at(tr # i, tc # j) = {value};"]
        else:
            body += ["    foreach {i, j} in l.span",
                     f"      output.at(tr # i, tc # j) = {value};"]
        body += ["  }", "  return output;", "}"]
        return "\n".join(body) + "\n"

    # --- whole programs ----------------------------------------------------------------------

    def function(self, name: str) -> str:
        rng = self.rng
        scope = Scope()
        params = self.params(scope)
        self.lines = []
        returns = rng.random() < 0.6 and scope.tensors
        out = None
        if returns:
            out = self.local_buffer(scope, scope.tensors[0])
        for _ in range(rng.randint(1, 3)):
            self.statement(scope, 0)
        if out is not None:
            self.emit(f"return {out.name};")
            ret = rng.choice((f"{out.elem} [{', '.join(out.dims)}]", "auto"))
        else:
            ret = "void"
        body = "\n".join(self.lines)
        return f"__co__ {ret} {name}({', '.join(params)}) {{\n{body}\n}}\n"


def program(rng: random.Random) -> str:
    """One random program of one to three ``__co__`` functions, with optional defines."""
    builder = Builder(rng)
    parts = []
    if rng.random() < 0.2:
        parts.append(f"#define TILE {rng.choice(SIZES)}\n")
    for i in range(rng.choice((1, 1, 1, 2, 3))):
        family = rng.random()
        if family < 0.2:
            parts.append(builder.gemm(f"fn{i}"))
        elif family < 0.35:
            parts.append(builder.tiled(f"fn{i}"))
        else:
            parts.append(builder.function(f"fn{i}"))
    return "\n".join(parts)
