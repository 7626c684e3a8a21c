"""Train ultralytics YOLO from a model yaml (no pretrained weights) on a synthetic dataset made here.

No downloads: the images are drawn locally (filled rectangles and ellipses of two classes on a noisy
background) with YOLO-format labels, and the model is built from ultralytics' own `yolov8n.yaml`.
The run writes ultralytics' real `results.csv` (and its console output to stdout).

    python yolo_synthetic.py --root DIR [--epochs 30] [--imgsz 128]

Needs ultralytics, torch and torchvision. On a CPU-only torch, PyPI's CUDA-built torchvision loads only
with stub libc10_cuda.so / libtorch_cuda.so on LD_LIBRARY_PATH (CUDA entry points that abort if called;
none is called on CPU); see the manifest entry.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw


def make_split(root: Path, split: str, n: int, size: int, rng: np.random.Generator) -> None:
    img_dir = root / "images" / split
    lbl_dir = root / "labels" / split
    img_dir.mkdir(parents=True, exist_ok=True)
    lbl_dir.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        bg = rng.integers(0, 80, size=(size, size, 3), dtype=np.uint8)
        img = Image.fromarray(bg)
        draw = ImageDraw.Draw(img)
        lines = []
        for _ in range(int(rng.integers(1, 4))):
            cls = int(rng.integers(0, 2))
            w, h = rng.integers(size // 8, size // 3, size=2)
            x0 = int(rng.integers(0, size - w))
            y0 = int(rng.integers(0, size - h))
            colour = (230, 60, 60) if cls == 0 else (60, 200, 230)
            box = (x0, y0, x0 + int(w), y0 + int(h))
            if cls == 0:
                draw.rectangle(box, fill=colour)
            else:
                draw.ellipse(box, fill=colour)
            cx, cy = (x0 + w / 2) / size, (y0 + h / 2) / size
            lines.append(f"{cls} {cx:.6f} {cy:.6f} {w / size:.6f} {h / size:.6f}")
        img.save(img_dir / f"{i:04d}.png")
        (lbl_dir / f"{i:04d}.txt").write_text("\n".join(lines) + "\n")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--imgsz", type=int, default=128)
    p.add_argument("--n-train", type=int, default=96)
    p.add_argument("--n-val", type=int, default=24)
    a = p.parse_args()
    root = Path(a.root).resolve()
    rng = np.random.default_rng(0)
    data = root / "shapes"
    make_split(data, "train", a.n_train, a.imgsz, rng)
    make_split(data, "val", a.n_val, a.imgsz, rng)
    yaml = root / "shapes.yaml"
    yaml.write_text(f"path: {data}\ntrain: images/train\nval: images/val\nnames:\n  0: square\n  1: disc\n")
    from ultralytics import YOLO

    model = YOLO("yolov8n.yaml")
    model.train(
        data=str(yaml),
        epochs=a.epochs,
        imgsz=a.imgsz,
        batch=16,
        device="cpu",
        workers=0,
        pretrained=False,
        amp=False,
        plots=False,
        project=str(root / "runs"),
        name="train",
        exist_ok=True,
        seed=0,
        deterministic=True,
        verbose=True,
    )


if __name__ == "__main__":
    main()
