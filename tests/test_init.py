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
