"""The last block computes only the positions its output reads, and that changes nothing.

An encoder or ViT that pools its CLS token reads position 0 of the last block only; a decoder whose
task's loss reads some positions (`Task.outputs`) asks for those (`Transformer.forward(x, outputs=…)`).
The last block then computes queries, attention, output projection and feed-forward for those rows
alone, every position still a key. Each prior hands such queries what it hands them in the whole
sequence (`q_start` in `attend`, `Prior.rotate`, GOAT's lanes). Checked in float64 against the
whole computation, outputs and gradients, for every position and prior kind; the tolerance is
rounding (1e-12; a wrong bias row, rotation angle or causal offset moves outputs by ~1e-2).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from companion.attention import attend
from companion.config import ModelConfig, PriorConfig
from companion.model import Transformer, init_weights_
from companion.positions import RotaryEmbedding
from companion.priors import interpolated
from companion.tasks import TaskSpec

TOL = 1e-12
LM = TaskSpec(inputs="tokens", output="lm", vocab_size=11, seq_len=12)
DECODER = ModelConfig(arch="decoder", d_model=32, n_layers=2, n_heads=4, d_head=8, d_ff=32)
DECODERS = {
    "learned": DECODER,
    "rope": replace(DECODER, positions="rope"),
    "sinusoidal": replace(DECODER, positions="sinusoidal"),
    "alibi": replace(DECODER, positions="none", prior=PriorConfig(kind="alibi")),
    "goat": replace(DECODER, positions="none", prior=PriorConfig(kind="goat", goat_rank=2, goat_init="seeded")),
    "goat-eager": replace(DECODER, positions="none", attn_backend="eager",
                          prior=PriorConfig(kind="goat", goat_rank=2, goat_init="seeded")),
    "mask-per-head-qknorm": replace(DECODER, qk_norm=True, prior=PriorConfig(kind="mask", per_head=True)),
    "mask-first-layer": replace(DECODER, prior=PriorConfig(kind="mask", layers="first")),
}
CLS = TaskSpec(inputs="tokens", output="regression", vocab_size=2, seq_len=9, n_outputs=1)
ENCODER = ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=48)
ENCODERS = {
    "default": ENCODER,
    "mask": replace(ENCODER, prior=PriorConfig(kind="mask", per_head=True)),
    "goat": replace(ENCODER, positions="none", prior=PriorConfig(kind="goat", goat_rank=2, goat_init="seeded")),
    "alibi-rope": replace(ENCODER, positions="rope", prior=PriorConfig(kind="alibi")),
}
IMAGES = TaskSpec(inputs="images", output="classification", n_outputs=3, image_shape=(1, 8, 8))


def _model(cfg: ModelConfig, spec: TaskSpec, n: int) -> Transformer:
    """A float64 model whose every parameter, priors included, is moved off its initial value (a
    flat prior would hide a wrong row)."""
    g = torch.Generator().manual_seed(0)
    pattern = torch.rand(n, n, generator=g) > 0.4
    pattern |= torch.eye(n, dtype=torch.bool)
    model = Transformer(cfg, spec, pattern=pattern, generator=g)
    init_weights_(model, g)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
        for b in model.buffers():
            if b.is_floating_point():
                b.add_(0.3 * torch.randn(b.shape, generator=g, dtype=b.dtype))
    return model.double()


def _every_row(model: Transformer, x: torch.Tensor) -> torch.Tensor:
    """The whole computation: every block at every position, then the readout."""
    h = model.embed(x)
    for block in model.blocks:
        h = block(h)
    return model.readout(h)


def _grads(model, loss) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("kind", list(DECODERS))
@pytest.mark.parametrize("rows", [slice(-5, None), slice(7, 10), slice(0, 3), slice(11, 12), slice(0, None)])
def test_decoder_outputs_equal_those_rows_of_the_whole_output(kind, rows):
    model = _model(DECODERS[kind], LM, 12)
    x = torch.randint(0, 11, (3, 12), generator=torch.Generator().manual_seed(1))
    whole = _every_row(model, x)
    part = model(x, outputs=rows)
    assert part.shape == whole[:, rows].shape
    assert (part - whole[:, rows]).abs().max() < TOL
    target = torch.randn(part.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    g_whole = _grads(model, (whole[:, rows] * target).sum())
    g_part = _grads(model, (model(x, outputs=rows) * target).sum())
    assert g_part.keys() == g_whole.keys()
    for name in g_whole:
        assert (g_part[name] - g_whole[name]).abs().max() < TOL, name


def test_rope_with_position_interpolation_gives_the_last_rows_their_interpolated_angles():
    model = _model(DECODERS["rope"], LM, 12)
    x = torch.randint(0, 11, (2, 20), generator=torch.Generator().manual_seed(3))
    with interpolated(model, 12):
        whole = _every_row(model, x)
        part, middle = model(x, outputs=slice(-4, None)), model(x, outputs=slice(5, 10))
    assert (part - whole[:, -4:]).abs().max() < TOL
    # rows that end before the input does: the angles are still those of all 20 positions
    assert (middle - whole[:, 5:10]).abs().max() < TOL
    assert (model(x, outputs=slice(-4, None)) - part).abs().max() > 1e-3  # interpolation changed them


@pytest.mark.parametrize("kind", list(ENCODERS))
def test_an_encoder_that_pools_cls_computes_its_last_block_at_cls_only(kind):
    model = _model(ENCODERS[kind], CLS, 10)
    x = torch.randint(0, 2, (5, 9), generator=torch.Generator().manual_seed(4))
    assert model.output_rows(10) == slice(0, 1)
    whole, fast = _every_row(model, x), model(x)
    assert (fast - whole).abs().max() < TOL
    g_whole, g_fast = _grads(model, whole.square().sum()), _grads(model, model(x).square().sum())
    for name in g_whole:
        assert (g_fast[name] - g_whole[name]).abs().max() < TOL, name


def test_mean_pooling_and_vit_pooling():
    mean = _model(replace(ENCODER, pool="mean"), CLS, 9)
    assert mean.output_rows(9) is None  # every position is read
    vit = _model(replace(ENCODER, arch="vit", patch_size=4, prior=PriorConfig(kind="mask")), IMAGES, 5)
    assert vit.output_rows(5) == slice(0, 1)
    img = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    assert (vit(img) - _every_row(vit, img)).abs().max() < TOL


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_attend_with_q_start_is_those_rows_of_causal_attention(backend):
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 3, 10, 4, generator=g, dtype=torch.float64) for _ in range(3))
    bias = torch.randn(3, 10, 10, generator=g, dtype=torch.float64)
    for b in (None, bias):
        whole = attend(q, k, v, bias=b, causal=True, backend=backend)
        rows = attend(q[:, :, 6:], k, v, bias=None if b is None else b[:, 6:], causal=True, backend=backend,
                      q_start=6)
        assert (rows - whole[:, :, 6:]).abs().max() < TOL
        top_left = attend(q[:, :, 6:], k, v, bias=None if b is None else b[:, 6:], causal=True, backend=backend)
        assert (top_left - whole[:, :, 6:]).abs().max() > 1e-3  # without q_start the rule would be wrong


def test_bad_rows_name_the_fix():
    dec, enc = _model(DECODER, LM, 12), _model(ENCODER, CLS, 10)
    x = torch.randint(0, 11, (2, 12))
    with pytest.raises(ValueError, match="pools its positions into one output"):
        enc(torch.randint(0, 2, (2, 9)), outputs=slice(0, 1))
    with pytest.raises(ValueError, match="no run of positions"):
        dec(x, outputs=slice(5, 5))
    with pytest.raises(ValueError, match="no run of positions"):
        dec(x, outputs=slice(0, None, 2))
    with pytest.raises(ValueError, match="must be a slice"):
        dec(x, outputs=3)
    with pytest.raises(ValueError, match="ask for all outputs"):
        dec(x, return_attention=True, outputs=slice(-2, None))
    with pytest.raises(ValueError, match="integer >= 0"):
        attend(*(torch.randn(1, 1, 3, 2) for _ in range(3)), causal=True, q_start=-1)
    rope = RotaryEmbedding(8)
    with pytest.raises(ValueError, match="not among the keys"):
        rope.rotate(torch.randn(1, 1, 3, 8), torch.randn(1, 1, 4, 8), q_start=2)
