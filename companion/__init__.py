"""companion: the machinery behind the book *Attention Priors, Reproduced*.

The core (`companion/*.py`, `tasks/`) trains and is what a run's identity hashes; `experiments/` names
every run and grid; `book/` reads records and never trains; `cost/` benchmarks attention; `cli/` is
the command line. The most used names are re-exported here; everything else lives in its own module.
"""

import importlib

from companion.attention import attend, visible_keys
from companion.priors import LearnableMask, sinusoidal_positions

__version__ = "0.1.0"
__all__ = [
    "attend", "visible_keys", "LearnableMask", "sinusoidal_positions", "__version__",
    "ModelConfig", "PriorConfig", "TaskConfig", "TrainConfig", "RunConfig", "EXPERIMENTS",
    "build_model", "train", "make_task", "ensure_runs",
]

_LAZY = {
    "ModelConfig": "companion.config", "PriorConfig": "companion.config", "TaskConfig": "companion.config",
    "TrainConfig": "companion.config", "RunConfig": "companion.config", "EXPERIMENTS": "companion.experiments",
    "build_model": "companion.model", "train": "companion.train", "make_task": "companion.tasks",
    "ensure_runs": "companion.sweep",
}


def __getattr__(name):
    """Import the engine's modules on first use, so `import companion` stays light."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'companion' has no attribute {name!r}")
