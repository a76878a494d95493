"""Pure numpy helpers for embedding matrices."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatMatrix = npt.NDArray[np.float32]

# Rows with a norm below this are left as zero vectors instead of being divided by ~0.
_MIN_NORM = 1e-12


def l2_normalize(matrix: npt.ArrayLike) -> FloatMatrix:
    """Return ``matrix`` as a C-contiguous float32 (n, d) array with unit-L2-norm rows.

    All-zero rows stay zero. Raises ``ValueError`` if ``matrix`` is not two-dimensional or holds
    NaN/inf.
    """
    array = np.asarray(matrix, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError("embedding matrix holds NaN or infinite values")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    normalized = array / np.maximum(norms, _MIN_NORM)
    return np.ascontiguousarray(normalized, dtype=np.float32)


def empty_matrix(dim: int) -> FloatMatrix:
    """A (0, dim) float32 matrix, the result of embedding no text."""
    return np.zeros((0, dim), dtype=np.float32)
