"""Fast mode's random unit vectors, drawn with numpy (engines without a usable seeded RNG)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SEED = 67280421310721  # torch.Generator's default seed, for want of a better constant


def unit_vectors(numels: Sequence[int], dtypes: Sequence[np.dtype], seed: int = SEED) -> list[np.ndarray]:
    """One vector per entry, uniform in [0, 1), cast to its dtype and divided by its norm, drawn
    in order from a fresh generator with a fixed seed: deterministic, and the global RNGs are
    left alone. Complex dtypes get real values (as torch's gradcheck draws them)."""
    generator = np.random.default_rng(seed)
    vectors = []
    for numel, dtype in zip(numels, dtypes):
        vec = generator.random(int(numel)).astype(dtype)
        vectors.append(vec / np.linalg.norm(vec).astype(vec.real.dtype) if vec.size else vec)
    return vectors
