"""The Transformer: parameter names, masks as priors, causality, ViT, attention weights."""

import pytest
import torch

from companion.config import ModelConfig, PriorConfig
from companion.model import Transformer, build_model
from companion.tasks import TaskSpec, make_task
from companion.config import TaskConfig


TOY = make_task(TaskConfig.of("toy"))
G = lambda s=0: torch.Generator().manual_seed(s)  # noqa: E731


def toy_model(**kw):
    prior = PriorConfig(**kw.pop("prior", {}))
    return build_model(ModelConfig(d_model=32, n_layers=2, n_heads=2, d_ff=64, prior=prior, **kw), TOY, generator=G())


def test_parameter_names_are_the_documented_api():
    names = {n for n, _ in toy_model(prior={"kind": "mask"}).named_parameters()}
    for l in (0, 1):
        for p in ("q_proj", "k_proj", "v_proj"):
            assert f"blocks.{l}.attn.{p}.weight" in names and f"blocks.{l}.attn.{p}.bias" not in names
        for p in ("attn.out_proj.weight", "attn.out_proj.bias", "attn.prior.logits", "ln1.weight", "ln2.bias",
                  "ff.fc1.weight", "ff.fc2.bias"):
            assert f"blocks.{l}.{p}" in names
    assert {"tok_emb.weight", "pos_emb", "cls", "ln_f.weight", "head.weight"} <= names


def test_fixed_first_layer_per_head_and_zero_masks():
    m = toy_model(prior={"kind": "mask", "trainable": False, "layers": "first", "per_head": True})
    assert m.blocks[1].attn.prior is None
    assert "blocks.0.attn.prior.logits" in dict(m.named_buffers())
    assert m.blocks[0].attn.prior.logits.shape == (2, 7, 7)
    z = toy_model(prior={"kind": "mask", "init": "zero"})
    assert torch.equal(z.blocks[1].attn.prior.logits, torch.zeros(1, 7, 7))


def test_mask_pattern_shapes_the_attention():
    m = toy_model(prior={"kind": "mask", "trainable": False})
    x = TOY.probe_inputs()
    out, maps = m(x, return_attention=True)
    assert torch.allclose(out, m(x), atol=1e-5)  # eager weights path == fused path
    pattern = TOY.mask_pattern("default", cls=True)
    for w in maps:
        assert torch.allclose(w.sum(-1), torch.ones(()), atol=1e-5)
        closed = w[..., ~pattern]
        assert closed.max() < 1e-3  # log σ(−10) ≈ −10: closed keys carry ~e^-10 of the weight
    # CLS (row 0) reads only CLS, x0, x1
    assert maps[0][:, :, 0, 3:].sum() < 1e-2


def test_wrong_pattern_shape_is_rejected():
    cfg = ModelConfig(d_model=32, n_heads=2, prior=PriorConfig(kind="mask"))
    with pytest.raises(ValueError, match=r"\(7, 7\)"):
        Transformer(cfg, TOY.spec, pattern=torch.ones(6, 6, dtype=torch.bool))


def test_mean_pool_has_no_cls_and_uses_smaller_pattern():
    m = toy_model(pool="mean", prior={"kind": "mask"})
    assert not hasattr(m, "cls") and m.blocks[0].attn.prior.logits.shape == (1, 6, 6)
    assert m(TOY.probe_inputs()).shape == (16, 1)


def test_decoder_is_causal():
    spec = TaskSpec(inputs="tokens", output="lm", vocab_size=11, seq_len=9)
    m = Transformer(ModelConfig(arch="decoder", d_model=32, n_heads=4, d_ff=64), spec)
    x = torch.randint(0, 11, (3, 9), generator=G())
    y = x.clone()
    y[:, 5] = (y[:, 5] + 1) % 11
    a, b = m(x), m(y)
    assert a.shape == (3, 9, 11)
    assert torch.allclose(a[:, :5], b[:, :5], atol=1e-6)  # positions before 5 cannot see token 5
    assert not torch.allclose(a[:, 5:], b[:, 5:], atol=1e-4)
    _, maps = m(x, return_attention=True)
    assert maps[0][..., 0, 1:].abs().max() == 0  # the first query reads only itself


def test_vit_patches_and_head():
    spec = TaskSpec(inputs="images", output="classification", n_outputs=10, image_shape=(1, 8, 8))
    m = build_model(ModelConfig(arch="vit", d_model=32, n_heads=2, d_ff=64, patch_size=4), type("T", (), {"spec": spec})(),
                    generator=G())
    img = torch.randn(5, 1, 8, 8, generator=G(1))
    out, maps = m(img, return_attention=True)
    assert out.shape == (5, 10) and maps[0].shape == (5, 2, 5, 5)  # 4 patches + CLS
    # the patch embedding sees each patch: changing one pixel changes the output
    img2 = img.clone()
    img2[0, 0, 7, 7] += 1
    assert not torch.allclose(m(img2)[0], out[0])
    assert torch.allclose(m(img2)[1:], out[1:], atol=1e-6)


def test_incompatible_arch_and_task():
    with pytest.raises(ValueError, match="decoder"):
        Transformer(ModelConfig(arch="decoder", d_model=32, n_heads=2), TOY.spec)
    with pytest.raises(ValueError, match="vit"):
        Transformer(ModelConfig(arch="vit", d_model=32, n_heads=2), TOY.spec)


def test_init_is_generator_determined():
    a, b, c = toy_model(), toy_model(), build_model(ModelConfig(d_model=32, n_heads=2, d_ff=64), TOY, generator=G(1))
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["blocks.0.attn.q_proj.weight"], sc["blocks.0.attn.q_proj.weight"])
    bound = 1 / 32**0.5
    assert sa["blocks.0.attn.q_proj.weight"].abs().max() <= bound


def test_qk_norm_normalises_each_heads_queries_and_keys():
    from companion.config import ModelConfig
    from companion.model import build_model
    from companion.tasks.boolean import BooleanTask
    from companion.train import param_groups

    task = BooleanTask("2parity", n_bits=5)
    model = build_model(ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=16, qk_norm=True), task,
                        generator=torch.Generator().manual_seed(0))
    attn = model.blocks[0].attn
    x = torch.randn(3, 6, 16, generator=torch.Generator().manual_seed(1))
    pre = attn._heads(attn.q_proj(x))
    q = attn.q_norm(pre)
    torch.testing.assert_close(q.mean(-1), torch.zeros(3, 2, 6), atol=1e-6, rtol=0)
    # per head and position, variance v / (v + eps) exactly (weight 1, bias 0 at initialisation)
    v = pre.var(-1, unbiased=False)
    torch.testing.assert_close(q.var(-1, unbiased=False), v / (v + attn.q_norm.eps), atol=1e-6, rtol=1e-5)
    decayed = {id(p) for p in param_groups(model, 0.1)[0]["params"]}
    assert id(attn.q_norm.weight) not in decayed and id(attn.q_proj.weight) in decayed
