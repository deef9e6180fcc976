"""Under torch.compile, croqtile.nn's GPU operators whose kernels take tensor descriptors
made on the host (which tracing cannot capture) decompose into the same program compiled
with descriptors made in the kernel: the graph holds those kernels, not the opaque
operator. No GPU here: the GPU variants are traced on CPU tensors as if they were CUDA
ones (``decomposing_on_cpu``) and the recorded kernels run in Triton's interpreter."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from croqtile.ops import library
from croqtile.nn import kernels
from croqtile.ops.traced import takes_host_descriptors

from ..e2e.checks import assert_close, random
from ..library.test_traced import Graphs, decomposing_on_cpu  # noqa: F401 (a fixture)


def test_the_gpu_linear_decomposes_into_its_kernel_made_descriptor_form(
        decomposing_on_cpu: list[Any]) -> None:  # noqa: F811
    name = kernels.linear_name("f32", "SILU", True, "gpu", "wide")
    function = kernels.function(name)
    assert takes_host_descriptors(function)  # (the eager form: the host's descriptors)
    stand_in = library.decomposition(kernels.NAMESPACE, name)
    assert stand_in is not None and stand_in.reason is None
    assert not takes_host_descriptors(stand_in.function)
    assert "make_tensor_descriptor" in stand_in.function.triton_source

    def model(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return kernels.run(name, torch.cos(x), w, b) * 2

    graphs = Graphs()
    compiled = torch.compile(model, fullgraph=True, backend=graphs)
    x, w, b = random((20, 48), torch.float32), random((40, 48), torch.float32), \
        random((40,), torch.float32)
    expected = F.silu(F.linear(torch.cos(x).double(), w.double(), b.double())) * 2
    assert_close(compiled(x, w, b), expected, torch.float32)
    code = "\n".join(graphs.code)
    assert "triton_kernel_wrapper_functional" in code and name not in code
    assert [k.fn.__name__ for k in decomposing_on_cpu] == [f"{name}_k0"]


def test_a_residual_variant_decomposes_too(decomposing_on_cpu: list[Any]) -> None:  # noqa: F811
    """The narrow bf16 linear with a residual added in its epilogue: traced whole, with
    the residual one more argument of the kernel."""
    name = kernels.linear_name("bf16", "NONE", False, "gpu", "narrow", True)
    assert name.endswith("_residual_gpu_narrow")
    stand_in = library.decomposition(kernels.NAMESPACE, name)
    assert stand_in is not None and stand_in.reason is None

    def model(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return kernels.run(name, x, w, r)

    graphs = Graphs()
    compiled = torch.compile(model, fullgraph=True, backend=graphs)
    x, w, r = (random(s, torch.bfloat16) for s in ((20, 48), (40, 48), (20, 40)))
    expected = F.linear(x.double(), w.double()) + r.double()
    assert_close(compiled(x, w, r), expected, torch.bfloat16)
    code = "\n".join(graphs.code)
    assert "triton_kernel_wrapper_functional" in code and name not in code


def test_cpu_variants_have_no_stand_ins() -> None:
    name = kernels.linear_name("f32", "NONE", False, "cpu", "wide")
    assert takes_host_descriptors(kernels.function(name))
    assert library.decomposition(kernels.NAMESPACE, name) is None


def test_a_stand_in_compiles_with_the_stage_count_its_eager_kernel_settled_on(
        monkeypatch: Any) -> None:
    name = kernels.linear_name("f32", "NONE", False, "gpu", "wide")
    eager = kernels.function(name)
    stand_in = library.decomposition(kernels.NAMESPACE, name)
    kernel = stand_in.kernels()[0]
    eager_kernel = eager.host()[1].__globals__[kernel.fn.__name__]
    assert eager_kernel is not kernel  # (two compilations: host- and kernel-made descriptors)
    settled = {id(eager_kernel): 2}  # (as after a launch that ran out of shared memory)
    monkeypatch.setattr(eager.launcher, "stages",
                        lambda k, n: settled.get(id(k), n))
    assert stand_in.stages(kernel, 4) == 2
    assert stand_in.stages(object(), 4) == 4  # (a kernel the eager form does not have)
