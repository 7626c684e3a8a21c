"""Describe the interpreter it runs in: Python, installed distributions, torch/CUDA/cuDNN/NCCL and
the environment variables that steer training. Standard library only; torch is imported (when
installed and not disabled) only to read CUDA, cuDNN and NCCL versions, which have no metadata.
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import traceback

KEY_PACKAGES = (
    "torch",
    "torchvision",
    "torchaudio",
    "triton",
    "numpy",
    "transformers",
    "tokenizers",
    "datasets",
    "diffusers",
    "accelerate",
    "deepspeed",
    "peft",
    "trl",
    "flash-attn",
    "xformers",
    "bitsandbytes",
    "safetensors",
    "apex",
    "megatron-core",
    "lightning",
    "pytorch-lightning",
    "timm",
    "torchao",
    "vllm",
    "optimum",
    "sentencepiece",
    "einops",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu11",
    "nvidia-cudnn-cu12",
    "nvidia-cudnn-cu11",
    "nvidia-cublas-cu12",
    "nvidia-cuda-runtime-cu12",
    "jax",
    "jaxlib",
    "tensorflow",
    "wandb",
    "mlflow",
    "tensorboard",
)
ENV_PATTERNS = (
    r"CUDA_.*",
    r"NCCL_.*",
    r"TORCH_.*",
    r"TORCHINDUCTOR_.*",
    r"PYTORCH_.*",
    r"CUBLAS_.*",
    r"CUDNN_.*",
    r"NVIDIA_.*",
    r"OMP_NUM_THREADS",
    r"MKL_.*",
    r"HF_.*",
    r"TRANSFORMERS_.*",
    r"ACCELERATE_.*",
    r"DEEPSPEED_.*",
    r"MASTER_ADDR",
    r"MASTER_PORT",
    r"WORLD_SIZE",
    r"RANK",
    r"LOCAL_RANK",
    r"LD_LIBRARY_PATH",
    r"PYTHONPATH",
    r"GLOO_.*",
    r"TF_.*",
    r"XLA_.*",
)
SECRET = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions():
    from importlib import metadata

    found: dict = {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
        except Exception:
            name = None
        if not name:
            continue
        found.setdefault(normalize(name), dist.version)
    return found


def env_vars():
    out = {}
    pats = [re.compile(p + "$") for p in ENV_PATTERNS]
    for k, v in os.environ.items():
        if any(p.match(k) for p in pats):
            out[k] = "<set, hidden>" if SECRET.search(k) else v
    return dict(sorted(out.items()))


def torch_info():
    info: dict = {}
    try:
        import torch
    except Exception as exc:
        return {"importable": False, "import_error": f"{type(exc).__name__}: {exc}"[:300]}
    info["importable"] = True
    info["version"] = torch.__version__
    info["git_version"] = getattr(torch.version, "git_version", None)
    info["cuda"] = torch.version.cuda
    info["hip"] = getattr(torch.version, "hip", None)
    try:
        info["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:
        info["cudnn"] = None
    try:
        info["cuda_available"] = torch.cuda.is_available()
        info["device_count"] = torch.cuda.device_count() if info["cuda_available"] else 0
        info["devices"] = [
            {
                "name": torch.cuda.get_device_name(i),
                "capability": ".".join(str(x) for x in torch.cuda.get_device_capability(i)),
            }
            for i in range(info["device_count"])
        ]
    except Exception as exc:
        info["cuda_available"] = False
        info["cuda_error"] = str(exc)[:300]
    try:
        v = torch.cuda.nccl.version()
        info["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:
        info["nccl"] = None
    try:
        import torch.distributed as dist

        info["distributed_available"] = dist.is_available()
        info["nccl_available"] = bool(dist.is_available() and dist.is_nccl_available())
        info["gloo_available"] = bool(dist.is_available() and dist.is_gloo_available())
    except Exception:
        info["distributed_available"] = False
    try:
        info["mps_available"] = bool(torch.backends.mps.is_available())
    except Exception:
        info["mps_available"] = False
    try:
        info["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
        info["tf32_cudnn"] = bool(torch.backends.cudnn.allow_tf32)
        info["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    except Exception:
        pass
    info["num_threads"] = torch.get_num_threads()
    return info


def driver_info():
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=15,
        )
    except Exception as exc:
        return {"error": str(exc)[:200]}
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return {"driver_version": lines[0].split(",")[0].strip() if lines else None, "gpus": lines}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--result", required=True)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args(argv)
    try:
        installed = distributions()
        payload = {
            "ok": True,
            "python": {
                "version": platform.python_version(),
                "implementation": platform.python_implementation(),
                "executable": sys.executable,
                "prefix": sys.prefix,
                "base_prefix": sys.base_prefix,
                "in_venv": sys.prefix != sys.base_prefix,
            },
            "platform": {
                "system": platform.system(),
                "release": platform.release(),
                "machine": platform.machine(),
            },
            "key_packages": {p: installed.get(normalize(p)) for p in KEY_PACKAGES},
            "installed": installed,
            "env": env_vars(),
            "torch": ({"skipped": True} if args.no_torch else torch_info()) if "torch" in installed else None,
            "driver": driver_info(),
        }
    except Exception as exc:
        payload = {
            "ok": False,
            "error": {
                "kind": "runner_failed",
                "message": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-3000:],
            },
        }
    tmp = args.result + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, default=str)
    os.replace(tmp, args.result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
