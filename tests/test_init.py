"""Query-key initialisations: mimetic gives W_q W_kᵀ ≈ α·Z + β·I per head."""

import pytest
import torch

from companion.config import ModelConfig, TaskConfig
from companion.drift import qk_forms
from companion.init import QK_INITS, apply_qk_init_, mimetic_target
from companion.model import build_model
from companion.tasks import make_task

TOY = make_task(TaskConfig.of("toy"))


def _corr_with_identity(a: torch.Tensor) -> float:
    eye = torch.eye(a.shape[-1])
    x, y = a.flatten() - a.mean(), eye.flatten() - eye.mean()
    return float(x @ y / (x.norm() * y.norm()))


def test_mimetic_exact_when_head_dim_covers_d_model():
    d = 16
    model = build_model(ModelConfig(d_model=d, n_heads=2, d_head=d, qk_init="mimetic"), TOY,
                        generator=torch.Generator().manual_seed(3))
    forms = qk_forms(model)[0]  # (h, d, d)
    for a in forms:
        assert abs(float(a.diagonal().mean()) - 0.7) < 0.15          # β on the diagonal
        off = a[~torch.eye(d, dtype=torch.bool)]
        assert abs(float(off.std()) - 0.7 / d**0.5) < 0.06           # α·Z off the diagonal, Z ~ N(0, 1/d)
        assert _corr_with_identity(a) > 0.6
    assert not torch.allclose(forms[0], forms[1])                   # independent draw per head


def test_mimetic_factorisation_reproduces_target():
    d = 8
    model = build_model(ModelConfig(d_model=d, n_heads=1, d_head=d), TOY, generator=torch.Generator().manual_seed(0))
    apply_qk_init_(model, "mimetic", generator=torch.Generator().manual_seed(5))
    target = mimetic_target(d, alpha=0.7, beta=0.7, generator=torch.Generator().manual_seed(5))
    assert torch.allclose(qk_forms(model)[0][0].double(), target, atol=1e-5)


def test_mimetic_truncated_is_identity_like_default_is_not():
    cfg = dict(d_model=64, n_heads=4)  # d_head 16 < d_model: rank-16 truncation of α·Z + β·I
    mim = build_model(ModelConfig(**cfg, qk_init="mimetic"), TOY, generator=torch.Generator().manual_seed(1))
    dflt = build_model(ModelConfig(**cfg), TOY, generator=torch.Generator().manual_seed(1))
    c_mim = [_corr_with_identity(a) for a in qk_forms(mim)[0]]
    c_def = [_corr_with_identity(a) for a in qk_forms(dflt)[0]]
    assert min(c_mim) > 0.3 and max(abs(c) for c in c_def) < 0.1
    assert all(float(a.diagonal().mean()) > 0.2 for a in qk_forms(mim)[0])


def test_registry_and_unknown_name():
    assert {"default", "mimetic"} <= set(QK_INITS)
    with pytest.raises(ValueError, match="mimetic"):
        apply_qk_init_(torch.nn.Module(), "nope", generator=torch.Generator())


# ---------------------------------------------------------------- structured initialisers


def _boolean_model(qk_init, n_bits=6, **kw):
    from companion.config import ModelConfig
    from companion.model import build_model
    from companion.tasks.boolean import BooleanTask

    task = BooleanTask("maj3", n_bits=n_bits)
    cfg = ModelConfig(d_model=32, n_layers=2, n_heads=2, d_ff=32, qk_init=qk_init, **kw)
    return build_model(cfg, task, generator=torch.Generator().manual_seed(0)), task.mask_pattern("support", cls=True)


@torch.no_grad()
def _position_map(model, layer=0, head=0):
    from companion.init import position_inputs

    a = model.blocks[layer].attn
    r = a.d_head
    w = a.q_proj.weight[head * r:(head + 1) * r].double().T @ a.k_proj.weight[head * r:(head + 1) * r].double()
    p = position_inputs(model)
    return p @ w @ p.T / r**0.5


def test_structured_svd_writes_the_pattern_into_the_position_logits():
    model, pattern = _boolean_model("structured-svd")
    for layer in range(2):
        logits = _position_map(model, layer)
        # r = 16 >= n = 7 positions: P W_Q W_Kᵀ Pᵀ is proportional to the target logits, so the open
        # entries are far above every closed one in each row
        gap = logits.masked_fill(~pattern, float("inf")).min(-1).values - logits.masked_fill(pattern, -float("inf")).max(-1).values
        assert (gap[pattern.sum(-1) < pattern.shape[1]] > 0).all()
        weights = torch.softmax(logits, -1)
        assert ((weights * pattern).sum(-1) > 0.999).all()


def test_structured_opt_fits_the_row_normalised_pattern():
    fitted, pattern = _boolean_model("structured-opt")
    plain, _ = _boolean_model("default")
    target = pattern.double() / pattern.sum(-1, keepdim=True)
    err = lambda m: float(((torch.softmax(_position_map(m), -1) - target) ** 2).mean())  # noqa: E731
    assert err(fitted) < err(plain) / 10
    # the same fitted forms go to every layer (init_once)
    torch.testing.assert_close(fitted.blocks[0].attn.q_proj.weight, fitted.blocks[1].attn.q_proj.weight)


def test_structured_init_needs_a_pattern():
    from companion.config import ModelConfig
    from companion.init import apply_qk_init_
    from companion.model import Transformer
    from companion.tasks.boolean import BooleanTask

    model = Transformer(ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=16), BooleanTask("2parity", n_bits=4).spec)
    with pytest.raises(ValueError, match="needs a bool"):
        apply_qk_init_(model, "structured-svd", generator=torch.Generator(), pattern=None)
