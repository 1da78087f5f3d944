"""ALiBi and RoPE: closed forms, relative-offset invariance, re-exports, and error messages."""

import math

import pytest
import torch

from companion import attend
from companion.positions import ALiBi, RotaryEmbedding, alibi_slopes, apply_rotary


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# ---------------------------------------------------------------- ALiBi


def test_alibi_slopes_power_of_two_and_interleaved_otherwise():
    f64 = dict(dtype=torch.float64)
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -h for h in range(1, 9)], **f64))
    torch.testing.assert_close(alibi_slopes(4), torch.tensor([2.0 ** -(2 * h) for h in range(1, 5)], **f64))
    # 6 heads: the 4-head slopes, then slopes 1 and 3 of the 8-head set
    want = [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]
    torch.testing.assert_close(alibi_slopes(6), torch.tensor(want, dtype=torch.float64))


def test_alibi_bias_is_the_closed_form():
    alibi = ALiBi(4).double()
    bias = alibi(5, 7)
    assert bias.shape == (4, 5, 7)
    m = alibi_slopes(4)
    for h, i, j in [(0, 4, 1), (3, 2, 2), (1, 0, 6), (2, 4, 0)]:
        assert bias[h, i, j].item() == pytest.approx(-m[h].item() * (i - j), abs=1e-15)
    sym = ALiBi(4, symmetric=True).double()(5, 7)
    torch.testing.assert_close(sym, -bias.abs())


def test_alibi_under_causal_masking_equals_a_key_linear_bias():
    """−m(i − j) = m·j − m·i: the row constant −m·i does not change the softmax."""
    q, k, v = (_x(1, 4, 6, 8, seed=s) for s in range(3))
    m = alibi_slopes(4)
    key_linear = (m[:, None] * torch.arange(6.0, dtype=torch.float64))[:, None, :].expand(4, 6, 6)
    torch.testing.assert_close(attend(q, k, v, bias=ALiBi(4).double()(6), causal=True),
                               attend(q, k, v, bias=key_linear, causal=True), rtol=1e-12, atol=1e-13)


def test_alibi_has_no_parameters_and_follows_dtype():
    alibi = ALiBi(3)
    assert list(alibi.parameters()) == [] and alibi(2).dtype == torch.float32
    with pytest.raises(ValueError, match="at least one head"):
        ALiBi(0)


# ---------------------------------------------------------------- RoPE


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_scores_depend_on_relative_offset_only(interleaved):
    rope = RotaryEmbedding(8, interleaved=interleaved)
    q, k = _x(2, 3, 6, 8, seed=1), _x(2, 3, 6, 8, seed=2)
    pos = torch.arange(6)

    def scores(positions):
        qr, kr = rope(q, k, positions)
        return qr @ kr.transpose(-1, -2)

    for shift in (1, 17, 1000):
        torch.testing.assert_close(scores(pos + shift), scores(pos), rtol=1e-10, atol=1e-10)
    # and it does depend on the offset: unrotated scores differ
    assert not torch.allclose(scores(pos), q @ k.transpose(-1, -2))


def test_rope_closed_form_and_norms():
    # d = 2: θ_0 = 1, so position p rotates (x, y) by p radians
    x = torch.tensor([1.0, 0.0], dtype=torch.float64).expand(1, 1, 4, 2)
    out = apply_rotary(x)[0, 0]
    want = torch.stack([torch.cos(torch.arange(4.0)), torch.sin(torch.arange(4.0))], -1).double()
    torch.testing.assert_close(out, want)
    # half-split pairs (x_k, x_{k+d/2}) with θ_k = base^(−2k/d): check channel pair k = 1 at p = 3
    y = _x(1, 1, 5, 6)
    r = apply_rotary(y)[0, 0, 3]
    a = 3 * 10000 ** (-2 / 6)
    assert r[1].item() == pytest.approx(y[0, 0, 3, 1].item() * math.cos(a) - y[0, 0, 3, 4].item() * math.sin(a))
    assert r[4].item() == pytest.approx(y[0, 0, 3, 4].item() * math.cos(a) + y[0, 0, 3, 1].item() * math.sin(a))
    # rotations keep norms; position 0 is the identity
    torch.testing.assert_close(apply_rotary(y).norm(dim=-1), y.norm(dim=-1))
    torch.testing.assert_close(apply_rotary(y)[..., 0, :], y[..., 0, :])


def test_rope_bad_inputs_name_the_fix():
    with pytest.raises(ValueError, match="even"):
        RotaryEmbedding(7)
    with pytest.raises(ValueError, match="odd head dim 5"):
        apply_rotary(_x(1, 1, 3, 5))
    with pytest.raises(ValueError, match=r"\(batch, heads, seq, dim\)"):
        apply_rotary(_x(3, 4))
    rope = RotaryEmbedding(4)
    with pytest.raises(ValueError, match=r"built for dim=4; build it with RotaryEmbedding\(6\)"):
        rope(_x(1, 1, 3, 6), _x(1, 1, 3, 6))
    with pytest.raises(ValueError, match=r"one position per token, shape \(3,\)"):
        rope(_x(1, 1, 3, 4), _x(1, 1, 3, 4), torch.arange(4))


def test_position_interpolation_squeezes_long_inputs_into_the_training_range():
    from companion.positions import RotaryEmbedding, apply_rotary

    g = torch.Generator().manual_seed(0)
    rope = RotaryEmbedding(8)
    q, k = torch.randn(2, 3, 40, 8, generator=g, dtype=torch.float64), torch.randn(2, 3, 40, 8, generator=g, dtype=torch.float64)
    plain = rope(q, k)
    rope.interpolate = 16
    pi = rope(q, k)
    expect = torch.arange(40, dtype=torch.float64) * (15 / 39)
    torch.testing.assert_close(pi[0], apply_rotary(q, expect), rtol=0, atol=1e-12)
    assert not torch.allclose(pi[0], plain[0])
    # inputs no longer than the training length are read as before
    short = rope(q[:, :, :16], k[:, :, :16])
    torch.testing.assert_close(short[1], apply_rotary(k[:, :, :16]), rtol=0, atol=0)
    assert "interpolate=16" in repr(rope)


def test_sincos_2d_encodes_the_row_in_one_half_and_the_column_in_the_other():
    from companion.positions import sincos_2d_positions, sinusoidal_positions

    side, d = 4, 16
    pe = sincos_2d_positions(side, d, dtype=torch.float64)
    axis = sinusoidal_positions(side, d // 2, dtype=torch.float64)
    assert pe.shape == (side * side, d)
    for p in range(side * side):  # patch p = r·side + c, as F.unfold lays out the patches
        r, c = divmod(p, side)
        assert torch.equal(pe[p, : d // 2], axis[r]) and torch.equal(pe[p, d // 2:], axis[c])
    # patches in one row share the first half, patches in one column the second
    assert torch.equal(pe[0, : d // 2], pe[3, : d // 2]) and not torch.equal(pe[0, d // 2:], pe[3, d // 2:])
    with pytest.raises(ValueError, match="multiple of 4"):
        sincos_2d_positions(4, 18)


def test_sincos_2d_needs_a_square_grid_and_a_vit_without_cls():
    from companion.config import ModelConfig
    from companion.positions import SinCos2DPositions

    with pytest.raises(ValueError, match="square grid"):
        SinCos2DPositions().embed(torch.zeros(1, 17, 8))  # 16 patches and a CLS token
    with pytest.raises(ValueError, match="pool='mean'"):
        ModelConfig(arch="vit", d_model=32, n_layers=1, n_heads=4, pool="cls", patch_size=2, positions="sincos-2d")
    with pytest.raises(ValueError, match="arch='vit'"):
        ModelConfig(arch="decoder", d_model=32, n_layers=1, n_heads=4, positions="sincos-2d")
    h = torch.randn(2, 16, 8, dtype=torch.float64)
    from companion.positions import sincos_2d_positions

    assert torch.equal(SinCos2DPositions().embed(h), h + sincos_2d_positions(4, 8, dtype=torch.float64))


def test_the_matched_encoding_starts_on_the_scale_of_the_learned_embeddings():
    """"sinusoidal-matched" is the encoding times MATCHED_SCALE: its entries' root mean square equals the 0.02 the
    model draws its embeddings with; "sinusoidal" adds the encoding itself, bit for bit as before."""
    from companion.config import ModelConfig
    from companion.model import Transformer, init_weights_
    from companion.positions import MATCHED_SCALE, SinusoidalPositions, sinusoidal_positions
    from companion.priors import build_positions
    from companion.tasks import TaskSpec

    pe = sinusoidal_positions(64, 64, dtype=torch.float64)
    assert float((MATCHED_SCALE * pe).pow(2).mean().sqrt()) == pytest.approx(0.02, rel=1e-3)
    h = torch.randn(2, 64, 64)
    assert torch.equal(SinusoidalPositions().embed(h), h + sinusoidal_positions(64, 64))
    spec = TaskSpec(inputs="tokens", output="lm", vocab_size=40, seq_len=64, n_outputs=40)
    cfg = ModelConfig(arch="decoder", d_model=64, n_layers=1, n_heads=4, positions="sinusoidal-matched")
    model = init_weights_(Transformer(cfg, spec), torch.Generator().manual_seed(0))
    assert model.positions.scale == MATCHED_SCALE and "scale=" in repr(model.positions)
    # the same embedding standard deviation the model draws its token embeddings with
    assert float(model.tok_emb.weight.detach().std()) == pytest.approx(0.02, rel=0.1)
    assert build_positions("sinusoidal", None).scale == 1.0
