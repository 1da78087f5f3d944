"""attend's input contract, the same on every backend: argument types, devices, dtypes, the bias's
dtype rule, and the precision warning of 16-bit attention (companion/attention.py, "Bad input" and
"Precision")."""

import math
import re
import warnings

import numpy as np
import pytest
import torch

from companion.attention import BACKENDS, BIAS_LIMIT, PrecisionWarning, attend

B, H, I, J, D = 2, 3, 6, 6, 8
LOW = [torch.bfloat16, torch.float16]
# bfloat16 attention of a valid bias against float32 on the same rounded inputs: |out − ref| ≤ TOL·(1 + |ref|).
# 4 eps of bfloat16 (2⁻⁵); the worst of 20 seeds at these shapes is 0.020.
TOL = 4 * torch.finfo(torch.bfloat16).eps


def _qkv(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, n, D, generator=g).to(dtype) for n in (I, J, J)]


def _bias(seed=1, scale=2.0):
    return scale * torch.randn(H, I, J, generator=torch.Generator().manual_seed(seed))


def _close(out, ref, tol=TOL) -> bool:
    return bool(((out.double() - ref.double()).abs() <= tol * (1 + ref.double().abs())).all())


EVERY = pytest.mark.parametrize("backend, check", [(b, c) for b in BACKENDS for c in (True, False)])
# The backends that take any dtype; "kernel" serves float32 CPU maps on one thread only (tests/test_kernel.py).
ANY_DTYPE = [b for b in BACKENDS if b != "kernel"]

# ---------------------------------------------------------------- argument types


@EVERY
@pytest.mark.parametrize("scale", [True, False, "0.5", [0.5], torch.tensor(0.5)])
def test_scale_must_be_a_real_number(scale, backend, check):
    q, k, v = _qkv()
    with pytest.raises(TypeError, match=rf"^{re.escape(f'scale={scale!r}')} is not a number \(got {type(scale).__name__}\)"):
        attend(q, k, v, scale=scale, backend=backend, check=check)


def test_an_int_or_numpy_scale_is_that_number():
    q, k, v = _qkv(torch.float64)
    for backend in ("eager", "sdpa"):
        ref = attend(q, k, v, scale=2.0, backend=backend)
        assert torch.equal(attend(q, k, v, scale=2, backend=backend), ref)
        assert torch.equal(attend(q, k, v, scale=np.float64(2.0), backend=backend), ref)


@EVERY
@pytest.mark.parametrize("causal", [1, 0, None, "yes", np.bool_(True), torch.tensor(True)])
def test_causal_must_be_a_bool(causal, backend, check):
    q, k, v = _qkv()
    with pytest.raises(TypeError, match=rf"^causal=.* has type {type(causal).__name__}; pass True or False"):
        attend(q, k, v, causal=causal, backend=backend, check=check)


# ---------------------------------------------------------------- devices and dtypes


@EVERY
@pytest.mark.parametrize("moved", ["q", "k", "v", "bias"])
def test_tensors_on_different_devices_are_named_before_torch_fails(moved, backend, check):
    q, k, v = _qkv()
    tensors = dict(q=q, k=k, v=v, bias=_bias())
    tensors[moved] = tensors[moved].to("meta")  # a second device on any machine
    where = ", ".join(f"{n} on {'meta' if n == moved else 'cpu'}" for n in ("q", "k", "v", "bias"))
    with pytest.raises(ValueError, match=rf"^{where}: .* one device\. Move them to q's, e\.g\. k\.to\(q\.device\)"):
        attend(tensors["q"], tensors["k"], tensors["v"], bias=tensors["bias"], backend=backend, check=check)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cpu_bias_with_cuda_inputs_is_named(backend):
    q, k, v = (t.cuda() for t in _qkv())
    with pytest.raises(ValueError, match=r"^q on cuda:0, k on cuda:0, v on cuda:0, bias on cpu: "):
        attend(q, k, v, bias=_bias(), backend=backend, check=False)


@EVERY
def test_q_k_v_of_different_dtypes_are_named(backend, check):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"^q, k and v have dtypes torch.float32, torch.bfloat16, torch.float32; "
                                         r".*k\.to\(q\.dtype\)"):
        attend(q, k.bfloat16(), v, backend=backend, check=check)


@EVERY
@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8])
def test_a_bias_neither_bool_nor_float_is_refused(dtype, backend, check):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=rf"^bias has dtype {dtype}; use a float tensor"):
        attend(q, k, v, bias=torch.zeros(I, J, dtype=dtype), backend=backend, check=check)


# ---------------------------------------------------------------- the bias's dtype


@pytest.mark.parametrize("q_dtype, bias_dtype", [(torch.float32, torch.float64), (torch.float64, torch.float32),
                                                 (torch.bfloat16, torch.float32), (torch.float16, torch.float64)])
@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_a_float_bias_of_another_dtype_is_cast_to_q_dtype(q_dtype, bias_dtype, backend):
    q, k, v = _qkv(q_dtype)
    bias = _bias().to(bias_dtype).requires_grad_(True)
    out = attend(q, k, v, bias=bias, causal=True, backend=backend)
    assert out.dtype == q_dtype
    cast = bias.detach().to(q_dtype).requires_grad_(True)  # (a mask needing grad may take another kernel)
    assert torch.equal(out, attend(q, k, v, bias=cast, causal=True, backend=backend))
    out.float().sum().backward()
    assert bias.grad is not None and bias.grad.dtype == bias_dtype  # the gradient comes back in its dtype


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_a_bool_bias_keeps_its_meaning_in_every_dtype(dtype, backend):
    q, k, v = _qkv(dtype)
    visible = torch.rand(I, J, generator=torch.Generator().manual_seed(2)) > 0.4
    visible[:, 0] = True
    additive = torch.zeros(I, J, dtype=dtype).masked_fill(~visible, -math.inf)
    assert torch.equal(attend(q, k, v, bias=visible, backend=backend), attend(q, k, v, bias=additive, backend=backend))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bias_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_bfloat16_with_a_valid_bias_matches_float32(seed, causal, bias_dtype, backend):
    q, k, v = _qkv(torch.bfloat16, seed)
    bias = _bias(seed + 10).to(bias_dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a bias of order 1 draws no PrecisionWarning
        out = attend(q, k, v, bias=bias, causal=causal, backend=backend)
    ref = attend(q.float(), k.float(), v.float(), bias=bias.float(), causal=causal, backend="eager")
    assert out.dtype == torch.bfloat16 and _close(out, ref)


# ---------------------------------------------------------------- precision warning


def _row_max_bias(value: float, dtype, sign: int) -> torch.Tensor:
    """Zeros, with query row 2's largest visible entry = value: one entry for a positive value, the whole
    row for a negative one."""
    bias = torch.zeros(I, J, dtype=dtype)
    if sign > 0:
        bias[2, 1] = value
    else:
        bias[2] = value
    return bias


def _warnings(q, k, v, **kw) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        attend(q, k, v, **kw)
    return [w for w in caught if issubclass(w.category, PrecisionWarning)]


def test_the_limits_are_where_the_dtype_spaces_values_one_apart():
    assert BIAS_LIMIT == {torch.bfloat16: 128.0, torch.float16: 1024.0}
    for dtype, limit in BIAS_LIMIT.items():
        above = torch.tensor(limit, dtype=dtype)
        assert float(torch.nextafter(above, torch.tensor(math.inf, dtype=dtype)) - above) == 1.0
        below = torch.nextafter(above, torch.tensor(0.0, dtype=dtype))
        assert float(above - below) == 0.5


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("backend", ANY_DTYPE)
def test_precision_warning_fires_at_the_limit_and_not_below(dtype, sign, backend):
    q, k, v = _qkv(dtype)
    limit = BIAS_LIMIT[dtype]
    below = limit * (1 - torch.finfo(dtype).eps / 2)  # the dtype's value just under the limit (127.5, 1023.5)
    for bias_dtype in (dtype, torch.float32):
        assert not _warnings(q, k, v, bias=_row_max_bias(sign * below, bias_dtype, sign), backend=backend)
        caught = _warnings(q, k, v, bias=_row_max_bias(sign * limit, bias_dtype, sign), backend=backend)
        assert len(caught) == 1
        message = str(caught[0].message)
        assert message.startswith(f"bias: a query row's largest visible entry is {sign * limit:g}, which is kept "
                                  f"in {dtype}, where values of magnitude ≥ {limit:g} are 1 or more apart")
        assert "compute in float32" in message and "\n" not in message
        assert caught[0].filename == __file__  # it points at attend's caller


def test_the_row_maximum_is_compared_as_rounded_to_q_dtype():
    q, k, v = _qkv(torch.bfloat16)
    just_under = torch.nextafter(torch.tensor(128.0), torch.tensor(0.0)).item()  # float32 127.99999, bfloat16 128
    assert len(_warnings(q, k, v, bias=_row_max_bias(just_under, torch.float32, 1))) == 1


def test_a_bias_that_overflows_16_bits_is_named():
    q, k, v = _qkv(torch.float16)
    caught = _warnings(q, k, v, bias=_row_max_bias(1e5, torch.float32, 1))
    assert len(caught) == 1 and "100000, which overflows to ±inf in torch.float16" in str(caught[0].message)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("backend", ANY_DTYPE)
def test_float32_and_float64_never_warn(dtype, backend):
    q, k, v = _qkv(dtype)
    for sign in (1, -1):
        assert not _warnings(q, k, v, bias=_row_max_bias(sign * 1e30, dtype, sign), backend=backend)


@pytest.mark.parametrize("dtype", LOW)
def test_only_entries_that_carry_weight_count(dtype):
    q, k, v = _qkv(dtype)
    soft_block = torch.zeros(I, J).masked_fill(torch.rand(I, J, generator=torch.Generator().manual_seed(3)) > 0.5, -1e4)
    soft_block[:, 0] = 0.0  # each row keeps a key at 0: the -1e4 keys get no weight however they round
    assert not _warnings(q, k, v, bias=soft_block)
    hidden = torch.ones(I, J, dtype=torch.bool).tril().logical_not()
    above = torch.zeros(I, J).masked_fill(hidden, 1e4)  # large only where the causal rule hides it
    assert not _warnings(q, k, v, bias=above, causal=True)
    assert len(_warnings(q, k, v, bias=above, causal=False)) == 1
    assert not _warnings(q, k, v, bias=_row_max_bias(1e4, torch.float32, 1), check=False)  # check=False: no pass


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_the_warning_is_deserved_and_the_fix_it_names_works(backend):
    """A bias shifted to the limit moves bfloat16 attention far outside TOL; shifting each row so its largest
    visible entry is 0 (what the warning suggests) changes no weight and brings it back within TOL."""
    q, k, v = _qkv(torch.bfloat16)
    visible = torch.ones(I, J, dtype=torch.bool).tril()
    bias = _bias() - BIAS_LIMIT[torch.bfloat16]
    ref = attend(q.float(), k.float(), v.float(), bias=bias, causal=True, backend="eager")
    with pytest.warns(PrecisionWarning):
        out = attend(q, k, v, bias=bias, causal=True, backend=backend)
    assert not _close(out, ref)
    shifted = bias - torch.where(visible, bias, -math.inf).amax(-1, keepdim=True)
    assert not _warnings(q, k, v, bias=shifted, causal=True, backend=backend)
    assert _close(attend(q, k, v, bias=shifted, causal=True, backend=backend), ref)
