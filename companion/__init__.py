"""companion: the machinery behind the book *Attention Priors, Reproduced*.

The core (`companion/*.py`, `tasks/`) trains and is what a run's identity hashes; `experiments/` names
every run and grid; `book/` reads records and never trains; `cost/` benchmarks attention; `cli/` is
the command line. The most used names are re-exported here: the prior protocol and the priors a model of your own can use
(`LearnableMask`, `GoatPrior`, `ALiBi`, `RotaryEmbedding`, `SinusoidalPositions`, the structured query–key
initialisations), `attend`, and `prior_bias` / `mha_mask` / `score_mod` / `attention_function` (`companion.interop`), which put a prior's
bias into SDPA, `nn.MultiheadAttention`, FlexAttention or a Hugging Face-style attention module; everything else lives in its own module.
"""

import importlib

from companion.attention import attend, visible_keys
from companion.interop import attention_function, fastpath_off, mha_mask, prior_bias, score_mod
from companion.priors import LearnableMask, Prior, sinusoidal_positions

__version__ = "0.2.0"
__all__ = [
    "attend", "visible_keys", "Prior", "LearnableMask", "GoatPrior", "ALiBi", "RotaryEmbedding", "SinusoidalPositions",
    "sinusoidal_positions", "init_structured_svd_", "init_structured_opt_", "init_mimetic_",
    "prior_bias", "mha_mask", "score_mod", "attention_function", "fastpath_off",
    "__version__",
    "ModelConfig", "PriorConfig", "TaskConfig", "TrainConfig", "RunConfig", "EXPERIMENTS",
    "build_model", "make_task", "ensure_runs",
]

# The priors and initialisations a model of your own can use (imported on first use, like the engine below).
_LAZY_PRIORS = {
    "GoatPrior": "companion.goat", "ALiBi": "companion.positions", "RotaryEmbedding": "companion.positions",
    "SinusoidalPositions": "companion.positions", "init_structured_svd_": "companion.init",
    "init_structured_opt_": "companion.init", "init_mimetic_": "companion.init",
}
_LAZY = _LAZY_PRIORS | {
    "ModelConfig": "companion.config", "PriorConfig": "companion.config", "TaskConfig": "companion.config",
    "TrainConfig": "companion.config", "RunConfig": "companion.config", "EXPERIMENTS": "companion.experiments",
    "build_model": "companion.model", "make_task": "companion.tasks",
    "ensure_runs": "companion.sweep",
}


def __getattr__(name):
    """Import the engine's modules on first use, so `import companion` stays light."""
    if name == "EXPERIMENTS":  # the registry, filled as its modules are imported: give it filled
        return importlib.import_module("companion.experiments").load_experiments()
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'companion' has no attribute {name!r}")
