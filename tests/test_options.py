"""The typed compile options: ``croqtile.Options`` is the one home of every option (its
type, default, documentation and accepted values), ``compile`` and ``load`` spell each
as a keyword parameter, and a bad value is an ``OptionError`` naming the option and what
it accepts."""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import croqtile

from .test_api import STATIC  # a small program with a scalar parameter

DATA = Path(__file__).resolve().parent / "data"
FIELDS = dataclasses.fields(croqtile.Options)


# a value each option refuses (its type or its range), and what the message must say
BAD: dict[str, tuple[Any, str]] = {
    "target": ("sm_91", 'one of "sm_80"'),
    "backend": ("cud", '"triton" or "cuda"'),
    "cta_group": (True, "1 (one CTA per tile) or 2"),
    "num_warps": (6, "a power of two"),
    "num_stages": (0, "a positive integer"),
    "descriptors": ("device", 'True (where aligned), "host"'),
    "f32_precision": ("fp32", '"tf32" or "ieee"'),
    "group_m": (2.0, "a positive integer"),
    "heavy_first": (1, "True or False"),
    "persistent": ("yes", "None (on for MMA kernels), True or False"),
    "flatten": (None, "True or False"),
    "warp_specialize": (0, "True or False"),
    "epilogue_split": (4, "1 or 2"),
    "stream_k": (1, '"always" or the most parts'),
    "split_tiles": ("no", "True or False"),
    "halve_last_wave": (1, "True or False"),
    "debug": ("yes", "True or False"),
    "fill_buffers": (0, "True or False"),
}


def test_every_option_documents_itself() -> None:
    """The options reference renders name, type, default and ``metadata["doc"]``."""
    assert [f.name for f in FIELDS] == list(BAD)
    for f in FIELDS:
        doc = f.metadata["doc"]
        assert isinstance(f.type, str) and f.type, f.name
        assert len(doc) > 80 and doc.endswith(".") and "  " not in doc and "\n" not in doc, f.name
        assert f.default is not dataclasses.MISSING, f.name
        assert f.metadata["accepts"](f.default), f.name  # the default is a value it accepts


@pytest.mark.parametrize("entry", ["compile", "load"])
def test_compile_and_load_spell_every_option_as_a_keyword(entry: str) -> None:
    params = inspect.signature(getattr(croqtile, entry)).parameters
    for f in FIELDS:
        param = params[f.name]
        assert param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is None, f.name
        assert set(param.annotation.split(" | ")) == set(f.type.split(" | ")) | {"None"}, f.name
    assert params["options"].default is None


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_value_names_the_option_and_what_it_accepts(name: str) -> None:
    value, allowed = BAD[name]
    with pytest.raises(croqtile.OptionError) as info:
        croqtile.Options(**{name: value})
    assert str(info.value).startswith(f"compile option {name}={value!r}: expected ")
    assert allowed in str(info.value)
    assert isinstance(info.value, ValueError)
    if value is not None:  # (None as a keyword means "the default")
        with pytest.raises(croqtile.OptionError, match=f"compile option {name}="):
            croqtile.compile(STATIC, **{name: value})


@pytest.mark.parametrize("values, message", [
    ({"descriptors": "host", "epilogue_split": 2}, "epilogue_split=2 needs descriptors made"),
    ({"cta_group": 2}, "cta_group=2 applies to backend='cuda'"),
])
def test_options_that_do_not_go_together_are_refused(values: dict, message: str) -> None:
    with pytest.raises(croqtile.OptionError, match=message):
        croqtile.Options(**values)


def test_accepted_values() -> None:
    opts = croqtile.Options(target="sm90", num_warps=4, stream_k="always", descriptors="kernel",
                            backend="cuda", cta_group=2, persistent=False)
    assert opts.target_rules.name == "sm_90"
    assert opts.changed() == {"target": "sm90", "num_warps": 4, "stream_k": "always",
                              "descriptors": "kernel", "backend": "cuda", "cta_group": 2,
                              "persistent": False}
    assert croqtile.Options(stream_k=2).stream_k == 2
    assert croqtile.Options().changed() == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.num_warps = 8  # type: ignore[misc]


def test_a_mapping_with_an_unknown_name_is_a_type_error() -> None:
    assert croqtile.Options.of({"num_warps": 8}).num_warps == 8
    with pytest.raises(TypeError, match="unknown compile option.*num_wraps; known: backend"):
        croqtile.Options.of({"num_wraps": 8})


def _source(fn: croqtile.Function) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn.triton_source


def test_options_object_and_keywords() -> None:
    """``options=`` gives every field; a keyword given overrides its field."""
    path = DATA / "seed000_sm90_gemm.co"
    gemm = path.read_text()
    by_keyword = _source(croqtile.compile(gemm, filename=str(path), num_warps=2,
                                          num_stages=1).matmul)
    by_object = _source(croqtile.load(
        path, options=croqtile.Options(num_warps=2, num_stages=1)).matmul)
    overridden = _source(croqtile.load(
        path, options=croqtile.Options(num_warps=8, num_stages=1), num_warps=2).matmul)
    default = _source(croqtile.load(path).matmul)
    assert by_keyword == by_object == overridden != default
    assert "num_warps=2" in by_keyword
    with pytest.raises(TypeError, match="options=.*expected a croqtile.Options"):
        croqtile.compile(gemm, options={"num_warps": 2})  # type: ignore[arg-type]


def test_the_options_run_the_same_results() -> None:
    mod = croqtile.compile(STATIC, options=croqtile.Options(debug=True, num_warps=1))
    x = torch.randint(-100, 100, (4, 8), dtype=torch.int32)
    assert torch.equal(mod.add(x, x, 3), x * 2 + 3)
