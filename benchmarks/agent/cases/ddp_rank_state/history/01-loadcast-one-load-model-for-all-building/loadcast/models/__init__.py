from loadcast.models.mlp import ResidualMLP
from loadcast.models.wrapper import LoadModel

__all__ = ["LoadModel", "ResidualMLP"]
