"""Printer: canonical Croqtile text from the AST; parsing its output gives the AST back.

Parentheses are the fewest the precedence table of spec 4.9 needs, indentation is two
spaces. ``strip_spans`` renders a tree without positions, for round-trip comparisons.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from . import syntax as ast
from .parser import recursion_headroom
from .tokens import (
    ATOM_LEVEL, BINARY_PRECEDENCE, NOT_LEVEL, POSTFIX_LEVEL, TERNARY_LEVEL, TILDE_LEVEL,
)

__all__ = ["format_expr", "format_function", "format_program", "format_stmt", "strip_spans"]

_INDENT = "  "


def format_program(program: ast.Program) -> str:
    return "\n".join(format_function(f) + "\n" for f in program.functions)


def format_function(function: ast.Function) -> str:
    with recursion_headroom():
        ret = "void" if function.ret is None else _type(function.ret)
        params = ", ".join(_param(p) for p in function.params)
        head = f"__co__ {ret} {function.name}({params})"
        return "\n".join(_Printer().body(head, function.body, 0))


def format_stmt(stmt: ast.Stmt) -> str:
    with recursion_headroom():
        return "\n".join(_Printer().stmt(stmt, 0))


def format_expr(expr: ast.Expr) -> str:
    with recursion_headroom():
        return _expr(expr)


# ----------------------------------------------------------------------------------------
# Expressions
# ----------------------------------------------------------------------------------------


def _level(expr: ast.Expr) -> int:
    """How tightly ``expr`` binds (spec 4.9); a child binding looser than its context is
    parenthesised."""
    if isinstance(expr, ast.Binary):
        return BINARY_PRECEDENCE[expr.op]
    if isinstance(expr, ast.Ternary):
        return TERNARY_LEVEL
    if isinstance(expr, ast.Unary):
        return NOT_LEVEL if expr.op == "!" else TILDE_LEVEL if expr.op == "~" else ATOM_LEVEL
    if isinstance(expr, (ast.Select, ast.Index, ast.ElemAccess, ast.Member, ast.View)):
        return POSTFIX_LEVEL
    return ATOM_LEVEL


def _sub(expr: ast.Expr, min_level: int) -> str:
    text = _expr(expr)
    return f"({text})" if _level(expr) < min_level else text


def _expr(expr: ast.Expr) -> str:
    return _EXPRS[type(expr)](expr)


def _list(items: tuple[ast.Expr, ...]) -> str:
    return ", ".join(_expr(item) for item in items)


def _binary(e: ast.Binary) -> str:
    level = BINARY_PRECEDENCE[e.op]
    # left-associative: a right operand of the same level needs parentheses
    return f"{_sub(e.lhs, level)} {e.op} {_sub(e.rhs, level + 1)}"


def _unary(e: ast.Unary) -> str:
    if e.op == "!":
        return "!" + _sub(e.operand, NOT_LEVEL)  # `!!a & b` reads as `!(!(a & b))`
    if e.op == "~":
        return "~" + _sub(e.operand, TILDE_LEVEL)
    return e.op + _sub(e.operand, POSTFIX_LEVEL)  # `&x.at(i)`, `++x`


def _ternary(e: ast.Ternary) -> str:
    return f"{_sub(e.cond, TERNARY_LEVEL + 1)} ? {_expr(e.then)} : {_expr(e.other)}"


def _int_lit(e: ast.IntLit) -> str:
    return e.text or str(e.value)


def _float_lit(e: ast.FloatLit) -> str:
    return e.text or repr(e.value) + ("f" if e.is_f32 else "")


def _str_lit(e: ast.StrLit) -> str:
    return e.text or _quote(e.value)


def _derive(e: ast.Derive) -> str:
    if e.brackets == "{}":
        return f"{_sub(e.base, POSTFIX_LEVEL)} {{{_list(e.items)}}}"
    return f"{_sub(e.base, POSTFIX_LEVEL)}[{_list(e.items)}]"


def _sizeof(e: ast.SizeOf) -> str:
    if e.operand is None:
        return f"|{e.elem_type}|"
    text = _expr(e.operand)
    # an unbracketed `|` operator would close the `|...|`, and `||` would lex as one token
    if _has_bare_pipe(e.operand) or text.startswith("|") or text.endswith("|"):
        return f"|({text})|"
    return f"|{text}|"


def _has_bare_pipe(expr: ast.Expr) -> bool:
    """Whether printing ``expr`` shows a binary `|` outside any brackets."""
    if isinstance(expr, ast.Binary):
        return expr.op == "|" or _has_bare_pipe(expr.lhs) or _has_bare_pipe(expr.rhs)
    if isinstance(expr, ast.Unary):
        return expr.op in ("!", "~") and _has_bare_pipe(expr.operand)
    if isinstance(expr, ast.Ternary):
        return _has_bare_pipe(expr.cond) or _has_bare_pipe(expr.then) or \
            _has_bare_pipe(expr.other)
    return False


def _call(e: ast.CallExpr) -> str:
    template = f"<{_list(e.template)}>" if e.template else ""
    return f"{e.name}{template}({_list(e.args)})"


def _cast(e: ast.Cast) -> str:
    target = _quote(e.target) if e.quoted else e.target
    return f"__to<{target}>({_expr(e.operand)})"


def _extern_call(e: ast.ExternCall) -> str:
    template = f"<{_list(e.template)}>" if e.template else ""
    return f"call {'::'.join(e.path)}{template}({_list(e.args)})"


def _view(e: ast.View) -> str:
    return _sub(e.base, POSTFIX_LEVEL) + "".join(_view_op(op) for op in e.ops)


def _view_op(op: ast.ViewOp) -> str:
    args = _list(op.args)
    if op.strides is not None:
        args += " : " + _list(op.strides)
    text = f".{op.kind}({args})"
    if op.step is not None:
        text += f".step({_list(op.step)})"
    if op.at is not None:
        text += f".{'from' if op.kind == 'view' else 'at'}({_list(op.at)})"
    return text


_EXPRS: dict[type, Callable[..., str]] = {
    ast.IntLit: _int_lit,
    ast.FloatLit: _float_lit,
    ast.BoolLit: lambda e: "true" if e.value else "false",
    ast.InfLit: lambda e: "inf",
    ast.NullLit: lambda e: "nullptr",
    ast.StrLit: _str_lit,
    ast.Ident: lambda e: e.name,
    ast.Member: lambda e: f"{_sub(e.obj, POSTFIX_LEVEL)}.{e.member}",
    ast.ElemAccess: lambda e: f"{_sub(e.base, POSTFIX_LEVEL)}.at({_list(e.indices)})",
    ast.Index: lambda e: f"{_sub(e.base, POSTFIX_LEVEL)}[{_expr(e.index)}]",
    ast.Select: lambda e: f"{_sub(e.base, POSTFIX_LEVEL)}({_expr(e.index)})",
    ast.BoundOf: lambda e: f"#{e.name}",
    ast.Unary: _unary,
    ast.Postfix: lambda e: _sub(e.operand, POSTFIX_LEVEL) + e.op,
    ast.Binary: _binary,
    ast.Ternary: _ternary,
    ast.TupleLit: lambda e: f"{{{_list(e.items)}}}",
    ast.ShapeLit: lambda e: f"[{_list(e.items)}]",
    ast.Derive: _derive,
    ast.DimRef: lambda e: f"({e.index})",
    ast.SizeOf: _sizeof,
    ast.CallExpr: _call,
    ast.Cast: _cast,
    ast.SelectExpr: lambda e: f"select({_expr(e.index)}, {_list(e.options)})",
    ast.ExternCall: _extern_call,
    ast.View: _view,
    ast.StorageDest: lambda e: e.storage,
    ast.AnonDim: lambda e: "??" if e.unbounded else "?",
}


def _quote(value: str) -> str:
    """A double-quoted literal that the lexer decodes back to ``value``."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t") + '"'


# ----------------------------------------------------------------------------------------
# Types and parameters
# ----------------------------------------------------------------------------------------


def _type(spec: ast.TypeSpec) -> str:
    if spec.shape is None:
        return spec.elem
    if spec.shape.dims is None:
        return f"{spec.elem} mdspan<{spec.shape.rank}>"
    return f"{spec.elem} [{_list(spec.shape.dims)}]"


def _param(param: ast.Param) -> str:
    text = (param.storage + " " if param.storage else "") + _type(param.type)
    if param.by_ref:
        text += "&"
    return text + (" " + param.name if param.name else "")


# ----------------------------------------------------------------------------------------
# Statements
# ----------------------------------------------------------------------------------------


class _Printer:
    """Statements print as lists of lines; ``indent`` counts levels."""

    def stmt(self, stmt: ast.Stmt, indent: int) -> list[str]:
        method: Callable[[ast.Stmt, int], list[str]] = getattr(
            self, "_stmt_" + type(stmt).__name__)
        return method(stmt, indent)

    def body(self, head: str, block: ast.Block, indent: int) -> list[str]:
        """``head { ... }`` or ``head`` with the single statement indented below."""
        pad = _INDENT * indent
        if _braced(block):
            lines = [f"{pad}{head} {{"]
            for stmt in block.stmts:
                lines.extend(self.stmt(stmt, indent + 1))
            lines.append(f"{pad}}}")
            return lines
        return [pad + head] + self.stmt(block.stmts[0], indent + 1)

    @staticmethod
    def _line(indent: int, text: str) -> list[str]:
        return [_INDENT * indent + text]

    # --- blocks and control flow -------------------------------------------------------

    def _stmt_Block(self, s: ast.Block, indent: int) -> list[str]:
        lines = self._line(indent, "{")
        for stmt in s.stmts:
            lines.extend(self.stmt(stmt, indent + 1))
        return lines + self._line(indent, "}")

    def _stmt_Empty(self, s: ast.Empty, indent: int) -> list[str]:
        return self._line(indent, ";")

    def _stmt_Parallel(self, s: ast.Parallel, indent: int) -> list[str]:
        head = "".join(_attribute(a) + " " for a in s.attrs) + "parallel"
        if s.is_async:
            head += ".async"
        if s.stream is not None:
            head += f"<{s.stream}>"
        head += " " + ", ".join(_parallel_level(level) for level in s.levels)
        return self.body(head, s.body, indent)

    def _stmt_With(self, s: ast.With, indent: int) -> list[str]:
        head = "with " + ", ".join(_within(w) for w in s.items)
        if s.where:
            head += " where " + ", ".join(f"{a} <-> {b}" for a, b in s.where)
        return self.body(head, s.body, indent)

    def _stmt_Foreach(self, s: ast.Foreach, indent: int) -> list[str]:
        items = ", ".join(_within(i) if isinstance(i, ast.Within) else _range(i) for i in s.items)
        head = "foreach " + items
        if s.suffixes:
            head += " : " + ", ".join(_suffix(x) for x in s.suffixes)
        return self.body(head, s.body, indent)

    def _stmt_While(self, s: ast.While, indent: int) -> list[str]:
        return self.body(f"while ({_expr(s.cond)})", s.body, indent)

    def _stmt_If(self, s: ast.If, indent: int) -> list[str]:
        lines = self.body(f"if ({_expr(s.cond)})", s.then, indent)
        if s.other is None:
            return lines
        pad = _INDENT * indent
        # `} else` shares the line that closes a braced then-branch
        prefix = lines.pop() + " else" if _braced(s.then) else pad + "else"
        other = s.other
        if not _braced(other) and isinstance(other.stmts[0], ast.If):
            rest = self._stmt_If(other.stmts[0], indent)  # `else if (...)` chains stay flat
            rest[0] = prefix + " " + rest[0][len(pad):]
        else:
            rest = self.body("else", other, indent)
            rest[0] = prefix + rest[0][len(pad) + len("else"):]
        return lines + rest

    def _stmt_InThreads(self, s: ast.InThreads, indent: int) -> list[str]:
        head = f"inthreads{'.async' if s.is_async else ''} ({_expr(s.pred)})"
        return self.body(head, s.body, indent)

    def _stmt_Apply(self, s: ast.Apply, indent: int) -> list[str]:
        return self.body(f"apply {{{', '.join(s.vars)}}} in {s.frag}.span", s.body, indent)

    # --- declarations and assignment ---------------------------------------------------

    def _stmt_SpannedDecl(self, s: ast.SpannedDecl, indent: int) -> list[str]:
        prefix = "frag " if s.frag else (s.storage + " " if s.storage else "")
        dims = "auto" if s.dims is None else _list(s.dims)
        decl_vars = ", ".join(_decl_var(v) for v in s.vars)
        return self._line(indent, f"{prefix}{s.elem} [{dims}] {decl_vars};")

    def _stmt_ScalarDecl(self, s: ast.ScalarDecl, indent: int) -> list[str]:
        words = (["mutable"] if s.mutable else []) + ([s.type] if s.type else [])
        items = ", ".join(_scalar_item(i) for i in s.items)
        return self._line(indent, " ".join(words + [items]) + ";")

    def _stmt_MdspanDecl(self, s: ast.MdspanDecl, indent: int) -> list[str]:
        keyword = ""
        if s.keyword:
            keyword = "mdspan " if s.rank is None else f"mdspan<{s.rank}> "
        return self._line(indent, f"{keyword}{s.name} : {_expr(s.value)};")

    def _stmt_ItupleDecl(self, s: ast.ItupleDecl, indent: int) -> list[str]:
        rank = "" if s.rank is None else f"<{s.rank}>"
        return self._line(indent, f"ituple{rank} {s.name} = {_expr(s.value)};")

    def _stmt_EventDecl(self, s: ast.EventDecl, indent: int) -> list[str]:
        storage = s.storage + " " if s.storage else ""
        count = "" if s.count is None else f"<{s.count}>"
        event_vars = ", ".join(
            v.name + "".join(f"[{_expr(d)}]" for d in v.array_dims)
            + (" = ready" if v.ready else "")
            for v in s.vars)
        return self._line(indent, f"{storage}event{count} {event_vars};")

    def _stmt_AssignStmt(self, s: ast.AssignStmt, indent: int) -> list[str]:
        items = ", ".join(f"{_expr(a.target)} {a.op} {_expr(a.value)}" for a in s.items)
        return self._line(indent, items + ";")

    def _stmt_ExprStmt(self, s: ast.ExprStmt, indent: int) -> list[str]:
        return self._line(indent, _expr(s.expr) + ";")

    # --- misc statements ---------------------------------------------------------------

    def _stmt_AssertStmt(self, s: ast.AssertStmt, indent: int) -> list[str]:
        return self._line(indent, f"assert({_expr(s.cond)}, {_quote(s.message)});")

    def _stmt_PrintStmt(self, s: ast.PrintStmt, indent: int) -> list[str]:
        name = ("println" if s.newline else "print") + ("!" if s.static else "")
        return self._line(indent, f"{name}({_list(s.args)});")

    def _stmt_ReturnStmt(self, s: ast.ReturnStmt, indent: int) -> list[str]:
        return self._line(indent, "return;" if s.value is None else f"return {_expr(s.value)};")

    def _stmt_BreakStmt(self, s: ast.BreakStmt, indent: int) -> list[str]:
        return self._line(indent, "break;")

    def _stmt_ContinueStmt(self, s: ast.ContinueStmt, indent: int) -> list[str]:
        return self._line(indent, "continue;")

    def _stmt_YieldStmt(self, s: ast.YieldStmt, indent: int) -> list[str]:
        return self._line(indent, "yield;")

    def _stmt_CppStmt(self, s: ast.CppStmt, indent: int) -> list[str]:
        return self._line(indent, f"__cpp__({_quote(s.code)});")

    def _stmt_AsmStmt(self, s: ast.AsmStmt, indent: int) -> list[str]:
        return self._line(indent, f"__asm__{' volatile' if s.volatile else ''}({s.text});")

    def _stmt_SyncStmt(self, s: ast.SyncStmt, indent: int) -> list[str]:
        text = f"sync.{s.kind}"
        if s.level is not None:
            text += f" : {s.level}"
        if s.storage is not None:
            text += f" <{s.storage}>"
        return self._line(indent, text + ";")

    def _stmt_WaitStmt(self, s: ast.WaitStmt, indent: int) -> list[str]:
        return self._line(indent, f"wait {_list(s.targets)};")

    def _stmt_TriggerStmt(self, s: ast.TriggerStmt, indent: int) -> list[str]:
        text = f"trigger{'.cluster' if s.cluster else ''} {_list(s.targets)}"
        if s.after:
            text += f" after {_list(s.after)}"
        return self._line(indent, text + ";")

    def _stmt_SwapStmt(self, s: ast.SwapStmt, indent: int) -> list[str]:
        return self._line(indent, f"{s.kind}({', '.join(s.names)});")

    def _stmt_BufferMap(self, s: ast.BufferMap, indent: int) -> list[str]:
        return self._line(indent, s.text + ";")

    # --- DMA / TMA ---------------------------------------------------------------------

    def _stmt_DmaStmt(self, s: ast.DmaStmt, indent: int) -> list[str]:
        text = f"{s.future} = " if s.future is not None else ""
        text += f"{s.engine}.{s.op}"
        if s.pad is not None:
            p = s.pad
            lists = ", ".join(f"{{{_list(values)}}}" for values in (p.low, p.high, p.mid))
            text += f"<{lists}, {_expr(p.value)}>"
        if s.perm is not None:
            text += f"<{_list(s.perm)}>"
        if s.is_async:
            text += ".async"
        text += "".join(_dma_attr(a) for a in s.attrs)
        text += f" {_expr(s.src)} => {_expr(s.dst)}"
        if s.after is not None:
            text += f" after {s.after}"
        return self._line(indent, text + ";")

    def _stmt_DmaAny(self, s: ast.DmaAny, indent: int) -> list[str]:
        return self._line(indent, f"{s.future} = dma.any;")

    # --- MMA ---------------------------------------------------------------------------

    def _stmt_MmaFill(self, s: ast.MmaFill, indent: int) -> list[str]:
        op = "mma.fill" + (f".{s.elem}" if s.elem else "")
        if s.declares:
            return self._line(indent, f"{_expr(s.target)} = {op} {_expr(s.value)};")
        return self._line(indent, f"{op} {_expr(s.target)}, {_expr(s.value)};")

    def _stmt_MmaLoad(self, s: ast.MmaLoad, indent: int) -> list[str]:
        op = "mma.load" + (".frag" if s.frag else "")
        if s.has_swiz:
            op += ".swiz" + (f"<{_expr(s.swiz)}>" if s.swiz is not None else "")
        if s.is_async:
            op += ".async"
        if s.declares:
            return self._line(indent, f"{_expr(s.target)} = {op} {_expr(s.src)};")
        return self._line(indent, f"{op} {_expr(s.src)}, {_expr(s.target)};")

    def _stmt_MmaStore(self, s: ast.MmaStore, indent: int) -> list[str]:
        op = "mma.store" + (f".{s.modifier}" if s.modifier else "")
        operands = [s.frag, s.dst, *s.mask]
        return self._line(indent, f"{op} {_list(tuple(operands))};")

    def _stmt_MmaScale(self, s: ast.MmaScale, indent: int) -> list[str]:
        return self._line(indent, f"mma.scale {_list((s.frag, s.scale_a, s.scale_b))};")

    def _stmt_MmaExec(self, s: ast.MmaExec, indent: int) -> list[str]:
        text = _attribute(s.schedule) + " " if s.schedule is not None else ""
        if s.future is not None:
            text += f"{s.future} = "
        text += f"mma.{s.layout_a}.{s.layout_b}"
        if s.is_async:
            text += ".async"
        if s.kind != "plain":
            text += f".{s.kind}"
        operands = (s.acc, s.a, s.b, *s.extra)
        return self._line(indent, f"{text} {_list(operands)};")

    def _stmt_MmaCommit(self, s: ast.MmaCommit, indent: int) -> list[str]:
        return self._line(indent, "mma.commit;")

    def _stmt_FragDecl(self, s: ast.FragDecl, indent: int) -> list[str]:
        elem = f".{s.elem}" if s.elem else ""
        dims = "".join(f"[{_expr(d)}]" for d in s.array_dims)
        return self._line(indent, f"frag{elem} {s.name}{dims}{{{_expr(s.value)}}};")


def _braced(block: ast.Block) -> bool:
    """Whether a body prints in braces (an unbraced body holds exactly one statement)."""
    return block.braced or len(block.stmts) != 1


def _attribute(attr: ast.Attribute) -> str:
    return f"[[{attr.name}({_list(attr.args)})]]"


def _parallel_level(level: ast.ParallelLevel) -> str:
    if level.braced:
        names = f"{{{', '.join(level.vars)}}}"
        if level.tuple_name is not None:
            names = f"{level.tuple_name} = {names}"
        text = f"{names} by [{_list(level.bounds)}]"
    else:
        bound = f"by {_list(level.bounds)}"
        text = f"{level.vars[0]} {bound}" if level.vars else bound
    if level.level is not None:
        text += f" : {level.level}"
        if level.device_name is not None:
            text += f"({level.device_name})"
        if level.cooperative:
            text += "<cooperative>"
    return text


def _within(item: ast.Within) -> str:
    names = f"{{{', '.join(item.vars)}}}" if item.braced else item.vars[0]
    if item.tuple_name is not None:
        names = f"{item.tuple_name} = {names}"
    return f"{names} in {_expr(item.shape)}"


def _range(item: ast.RangeItem) -> str:
    text = f"{item.name} = {item.var}" if item.name is not None else item.var
    if not item.has_range:
        return text
    bounds = "" if item.lb is None else _expr(item.lb)
    bounds += ":" + ("" if item.ub is None else _expr(item.ub))
    if item.step is not None:
        bounds += ":" + _expr(item.step)
    return f"{text}({bounds})"


def _suffix(suffix: ast.LoopSuffix) -> str:
    return suffix.kind + (f"({_list(suffix.args)})" if suffix.args else "")


def _decl_var(var: ast.DeclVar) -> str:
    text = var.name + "".join(f"[{_expr(d)}]" for d in var.array_dims)
    return text + (f"{{{_expr(var.init)}}}" if var.init is not None else "")


def _scalar_item(item: ast.ScalarItem) -> str:
    if item.init is None:
        return item.name
    if item.brace_init:
        return f"{item.name}{{{_expr(item.init)}}}"
    return f"{item.name} = {_expr(item.init)}"


def _dma_attr(attr: ast.DmaAttr) -> str:
    if not attr.args:
        return f".{attr.name}"
    separator = ":" if attr.name == "sp" else ", "
    return f".{attr.name}<{separator.join(_expr(a) for a in attr.args)}>"


# ----------------------------------------------------------------------------------------
# Comparison modulo spans
# ----------------------------------------------------------------------------------------

_SPAN_FIELDS = frozenset({"span", "name_span"})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def strip_spans(node: object) -> object:
    """``node`` as nested tuples of class names and field values, without source spans:
    ``strip_spans(a) == strip_spans(b)`` is AST equality modulo positions."""
    with recursion_headroom():
        return _strip(node)


def _strip(node: object) -> object:
    if isinstance(node, tuple):
        return tuple([_strip(item) for item in node])
    if isinstance(node, ast.Node):
        cls = type(node)
        names = _FIELD_NAMES.get(cls)
        if names is None:
            names = tuple(f.name for f in dataclasses.fields(cls) if f.name not in _SPAN_FIELDS)
            _FIELD_NAMES[cls] = names
        return (cls.__name__, *[(name, _strip(getattr(node, name))) for name in names])
    return node
