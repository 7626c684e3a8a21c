"""Train torchvision's Faster R-CNN with the torchvision detection reference loop on synthetic shapes.

The loop and its log lines are pytorch/vision's references/detection `engine.train_one_epoch` and
`utils.MetricLogger` (BSD-3-Clause), kept in a scratch directory passed as --ref-dir (not committed).
The model is `fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None)`: no
downloads. Images are drawn here (filled squares and discs on noise, two classes plus background).
The reference prints one line every --print-freq iterations with the total `loss` and its
components (`loss_classifier`, `loss_box_reg`, `loss_objectness`, `loss_rpn_box_reg`).

    python torchvision_detection_shapes.py --ref-dir REF [--epochs 4] [--lr 0.01] [--n-train 96]
        [--min-size 320] [--proposals 2000] [--roi-batch 512]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch
from PIL import Image, ImageDraw


class Shapes(torch.utils.data.Dataset):
    def __init__(self, n: int, size: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.items = []
        for _ in range(n):
            img = Image.fromarray(rng.integers(0, 80, size=(size, size, 3), dtype=np.uint8))
            draw = ImageDraw.Draw(img)
            boxes, labels = [], []
            for _ in range(int(rng.integers(1, 4))):
                cls = int(rng.integers(1, 3))
                w, h = (int(v) for v in rng.integers(size // 8, size // 3, size=2))
                x0, y0 = int(rng.integers(0, size - w)), int(rng.integers(0, size - h))
                box = (x0, y0, x0 + w, y0 + h)
                colour = (230, 60, 60) if cls == 1 else (60, 200, 230)
                (draw.rectangle if cls == 1 else draw.ellipse)(box, fill=colour)
                boxes.append(box)
                labels.append(cls)
            x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1)
            target = {
                "boxes": torch.tensor(boxes, dtype=torch.float32),
                "labels": torch.tensor(labels, dtype=torch.int64),
            }
            self.items.append((x, target))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        return self.items[i]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ref-dir", required=True)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--n-train", type=int, default=96)
    p.add_argument("--size", type=int, default=160)
    p.add_argument("--print-freq", type=int, default=5)
    p.add_argument("--min-size", type=int, default=320, help="the model's resize (min_size = max_size)")
    p.add_argument("--proposals", type=int, default=2000, help="RPN pre/post-NMS top-n while training")
    p.add_argument("--roi-batch", type=int, default=512, help="ROI head samples per image")
    a = p.parse_args()
    sys.path.insert(0, a.ref_dir)
    import utils  # the reference's utils.py
    from engine import train_one_epoch
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn

    torch.manual_seed(0)
    data = Shapes(a.n_train, a.size, seed=0)
    loader = torch.utils.data.DataLoader(
        data, batch_size=4, shuffle=True, num_workers=0, collate_fn=utils.collate_fn
    )
    model = fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None,
        weights_backbone=None,
        num_classes=3,
        min_size=a.min_size,
        max_size=a.min_size,
        rpn_pre_nms_top_n_train=a.proposals,
        rpn_post_nms_top_n_train=a.proposals,
        box_batch_size_per_image=a.roi_batch,
    )
    params = [q for q in model.parameters() if q.requires_grad]
    optimizer = torch.optim.SGD(params, lr=a.lr, momentum=0.9, weight_decay=1e-4)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.1)
    for epoch in range(a.epochs):
        train_one_epoch(model, optimizer, loader, torch.device("cpu"), epoch, print_freq=a.print_freq)
        lr_scheduler.step()


if __name__ == "__main__":
    main()
