"""companion: the machinery behind the book *Attention Priors, Reproduced*."""

from companion.attention import attend, visible_keys
from companion.priors import LearnableMask, sinusoidal_positions

__version__ = "0.1.0"
__all__ = ["attend", "visible_keys", "LearnableMask", "sinusoidal_positions", "__version__"]
