"""Names the lowering invents for its temporaries never shadow a kernel parameter. A
scalar parameter joins the kernel's parameters when first read, so a built-in lowered
before that read (``__gelu(...) + x``) once named its temporary ``x`` and the kernel added
the temporary instead of the parameter: a wrong result with no error."""

from __future__ import annotations

import pytest
import torch

import croqtile

PROGRAM = """
__co__ void f(global f32 [N] y, float PARAM) {
  parallel p by cdiv(N, 64) : block
    parallel t by 64 : thread
      y.at(p # t) = BUILTIN(y.at(p # t)) + PARAM;
}"""

REFERENCES = {
    "__gelu": lambda v: torch.nn.functional.gelu(v, approximate="tanh"),
    "__tanh": torch.tanh,
    "__sign": torch.sign,
    "__softplus": torch.nn.functional.softplus,
}


@pytest.mark.parametrize("builtin", sorted(REFERENCES))
@pytest.mark.parametrize("param", ["x", "v", "t_1", "tanh"])
def test_a_builtin_before_the_first_read_of_a_scalar_parameter(builtin: str, param: str) -> None:
    src = PROGRAM.replace("BUILTIN", builtin).replace("PARAM", param)
    module = croqtile.compile(src)
    y = torch.randn(128)
    offset = float(torch.randint(10, 1000, ()).item())
    expected = REFERENCES[builtin](y.double()) + offset
    module.f(y, offset)
    torch.testing.assert_close(y.double(), expected, rtol=1e-5, atol=1e-4)
