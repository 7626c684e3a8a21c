"""Initialisation from the config: `zero_init` lists name patterns whose weights start at zero."""

from torch import nn


def apply_zero_init(model, patterns):
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and any(p in name for p in patterns):
            nn.init.zeros_(module.weight)
            nn.init.zeros_(module.bias)
