"""Modules that are never the user's own: the standard library and the
libraries a training script imports. Their names are not looked up in the
user's files (analysis/resolve.py), and a file importing only from them needs
no look-up at all (the CLI's cheap test before it resolves imports).

One list for both: a name missing here costs a look-up that finds nothing; a
user's module named like one of these is not followed.
"""

from __future__ import annotations

import sys

THIRD_PARTY = frozenset(
    "torch torchvision torchaudio torchtext numpy scipy pandas matplotlib sklearn tqdm lightning pytorch_lightning "
    "accelerate transformers datasets tensorboard wandb einops timm PIL cv2 yaml h5py jax flax tensorflow keras "
    "hydra omegaconf apex deepspeed fairseq sentencepiece tokenizers safetensors huggingface_hub".split()
)
# sys.stdlib_module_names is Python 3.10+; the modules training scripts import
# most are named too, so Python 3.9 skips them as well
STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | frozenset(
    "__future__ typing collections os sys math random time json re itertools functools pathlib argparse "
    "dataclasses abc logging copy warnings contextlib io pickle csv".split()
)
NEVER_USERS = THIRD_PARTY | STDLIB


def never_users(top: str) -> bool:
    """Is the top-level module ``top`` never one of the user's files?"""
    return top in NEVER_USERS
