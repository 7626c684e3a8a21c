"""Print the attention of the last patch token over the lookback for a few test windows.

    python tools/inspect_attention.py --config configs/synth_patchtst.yaml --checkpoint runs/x/best.pt
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from patchcast.config import load_config  # noqa: E402
from patchcast.data.loaders import build_loaders  # noqa: E402
from patchcast.models import build_model  # noqa: E402
from patchcast.models.checkpoint import load_checkpoint  # noqa: E402
from patchcast.models.layers import MultiHeadAttention  # noqa: E402
from patchcast.utils.seed import seed_everything  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--windows", type=int, default=2)
    p.add_argument("--layer", type=int, default=-1)
    args = p.parse_args()
    cfg = load_config(args.config)
    data = build_loaders(cfg.data, cfg.model.lookback, cfg.model.horizon, seed_everything(cfg.train.seed))
    model = build_model(cfg.model, data.n_channels)
    load_checkpoint(args.checkpoint, model)
    model.eval()
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not layers:
        print("this model has no attention layers")
        return 1
    layer = layers[args.layer]
    layer.keep_attention = True
    x, _ = next(iter(data.test))
    with torch.no_grad():
        model(x[: args.windows])
    attn = layer.last_attention  # (B*C, H, N, N)
    assert attn is not None
    torch.set_printoptions(precision=2, linewidth=160)
    for i in range(min(args.windows * data.n_channels, 4)):
        print(f"series {i}: attention of the last token, averaged over heads")
        print(attn[i, :, -1].mean(0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
