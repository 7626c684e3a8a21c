from patchcast.models.layers.attention import MultiHeadAttention
from patchcast.models.layers.decomposition import MovingAverage, SeriesDecomposition
from patchcast.models.layers.mlp import MLP
from patchcast.models.layers.patching import PatchEmbedding, Patcher, n_patches
from patchcast.models.layers.positional import build_positional
from patchcast.models.layers.revin import RevIN

__all__ = [
    "MLP",
    "MovingAverage",
    "MultiHeadAttention",
    "PatchEmbedding",
    "Patcher",
    "RevIN",
    "SeriesDecomposition",
    "build_positional",
    "n_patches",
]
