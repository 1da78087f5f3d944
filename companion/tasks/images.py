"""Image classification for the ViT (arXiv 2608.00418, Tables 3 and 5), through torchvision.

Datasets (`dataset`):
- "digits" (offline default): scikit-learn's 8×8 handwritten digits (1,797 grey images, 10 classes),
  which ship inside the scikit-learn wheel. Split once by `data_seed`: 20 % test. It stands in for
  CIFAR at CPU scale; it is far smaller, grey, centred and nearly noise-free, so it can show whether
  the pipeline and a patch-geometry mask work, not how large the gains are on natural images.
- "cifar10", "cifar100": `torchvision.datasets.CIFAR10` / `CIFAR100` (the python pickle batches,
  `cifar-10-batches-py/` or `cifar-100-python/` under the data root); their own train / test split.
- "imagenet100": `torchvision.datasets.ImageFolder` on `imagenet100/train/<class>/*` and
  `imagenet100/val/<class>/*` under the data root (the 100-class subset of Tian et al., 2019, laid
  out as one folder per class); images are read when a batch needs them.

The data root is `root`, else `$COMPANION_DATA`, `<repo>/data` or `<repo>/../shared/data`
(`companion.paths.data_roots`);
nothing is downloaded unless `download=True` (CIFAR only; ImageNet has no public download). When the
data are missing the error names every folder it looked in and how to provide the data.
torchvision checks the md5 of each CIFAR file; `verify=False` skips that check (the tests use it on
the small files they write in the same format; never needed for the real files). CIFAR's batches are
pickles: before torchvision reads them, each is read by an unpickler that admits only numpy arrays, so
a file that would run code is refused (`check_pickles`).

Images are kept as uint8 (C, H, W) and converted per batch with `torchvision.transforms.v2`
(`ToDtype` and `Normalize` with the dataset's channel statistics); `image_size` resizes them once at
load (`v2.Resize`, ImageFolder also `v2.CenterCrop`). With `augment`, training batches get a random
crop (zero padding of size/8) and a horizontal flip drawn from the run's data-order generator, so a
run stays deterministic (torchvision's random transforms draw from the global generator instead).

Mask pattern (`mask_pattern`, `companion.masks.patch_pattern`): the patches of side `patch_size`
(which must equal the model's) form a grid; "local:R" opens each patch to its neighbours within
Chebyshev radius R ("default" = local:1, the 3×3 neighbourhood), the CLS row and column open;
"impulse" gives nine patterns, one offset of that neighbourhood each, which a per-head mask or the
structured initialisation hands out to the heads (`companion.masks.impulse_patterns`).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from companion.masks import impulse_patterns, parse_local, patch_pattern
from companion.paths import data_roots
from companion.tasks import TaskSpec, model_device, register_task

__all__ = ["ImageTask", "DATASETS", "check_pickles", "load_digits_images", "load_cifar", "load_image_folder"]

DATASETS = ("digits", "cifar10", "cifar100", "imagenet100")
# Channel means and standard deviations of the training images (digits: computed from its split).
STATS = {"cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
         "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
         "imagenet100": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))}
FOLDERS = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python", "imagenet100": "imagenet100"}


def _missing(dataset: str, roots: list[Path]) -> ValueError:
    looked = ", ".join(str(r / FOLDERS[dataset]) for r in roots)
    how = {"cifar10": "extract cifar-10-python.tar.gz (the python version) there",
           "cifar100": "extract cifar-100-python.tar.gz (the python version) there",
           "imagenet100": "lay out train/<class>/*.JPEG and val/<class>/*.JPEG there"}[dataset]
    online = " or pass task.download=true on a machine with network access" if dataset != "imagenet100" else ""
    return ValueError(f"dataset {dataset!r} not found; looked in: {looked}. To provide it, {how}, under a data "
                      f"root given by task.root=PATH or $COMPANION_DATA{online}.")


def load_digits_images(data_seed: int = 0, test_fraction: float = 0.2):
    """scikit-learn's digits as uint8 (n, 1, 8, 8) images (0–16 scaled to 0–255) and labels, split by
    `data_seed`: {"train": (x, y), "test": (x, y)}."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ValueError("the 'digits' images ship with scikit-learn; install it (pip install scikit-learn).") from None
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float64).mul(255 / 16).round().to(torch.uint8)[:, None]
    y = torch.tensor(d.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(data_seed))
    n_test = round(test_fraction * len(y))
    test, train = order[:n_test], order[n_test:]
    return {"train": (x[train], y[train]), "test": (x[test], y[test])}


# What a CIFAR batch may reference when unpickled: numpy arrays and dtypes, nothing that runs code.
_SAFE_GLOBALS = {(m, n) for m in ("numpy", "numpy.core.multiarray", "numpy._core.multiarray", "numpy.core.numeric",
                                  "numpy._core.numeric") for n in ("_reconstruct", "ndarray", "dtype", "_frombuffer")}
_SAFE_GLOBALS.add(("_codecs", "encode"))  # how a python 3 pickle stores the bytes of an array (protocol 2)


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _SAFE_GLOBALS:
            raise pickle.UnpicklingError(f"{module}.{name}")
        return super().find_class(module, name)


def check_pickles(folder: Path) -> None:
    """Refuse a CIFAR folder any of whose files would run code when unpickled: each file is read first
    by an unpickler that admits only numpy arrays (torchvision then reads the same bytes with pickle)."""
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")
                       and p.suffix not in (".html", ".gz", ".txt")):
        try:
            with open(path, "rb") as f:
                _SafeUnpickler(f, encoding="latin1").load()
        except pickle.UnpicklingError as err:
            raise ValueError(f"{path} is not a plain CIFAR batch (it references {err}); refusing to unpickle it. "
                             "Replace the folder with the python version of the dataset.") from None
        except Exception as err:  # noqa: BLE001  (truncated or foreign files)
            raise ValueError(f"{path} is not a readable CIFAR batch ({type(err).__name__}: {err}).") from None


def _load_meta_unverified(self) -> None:
    path = Path(self.root) / self.base_folder / self.meta["filename"]
    with open(path, "rb") as f:
        data = _SafeUnpickler(f, encoding="latin1").load()
    self.classes = data[self.meta["key"]]
    self.class_to_idx = {c: i for i, c in enumerate(self.classes)}


def _cifar_class(dataset: str, verify: bool):
    from torchvision import datasets

    base = datasets.CIFAR10 if dataset == "cifar10" else datasets.CIFAR100
    if verify:
        return base
    # The md5 checks are skipped only on request (the tests' small files); the batches are read the same way.
    return type(base.__name__ + "Unverified", (base,),
                {"_check_integrity": lambda self: True, "_load_meta": _load_meta_unverified})


def load_cifar(dataset: str, root: str = "", *, download: bool = False, verify: bool = True):
    """CIFAR-10 or CIFAR-100 through torchvision: {"train": (uint8 (n, 3, 32, 32), labels), "test": …}."""
    roots = data_roots(root)
    cls = _cifar_class(dataset, verify)
    for r in roots:
        if not download and not (r / FOLDERS[dataset]).is_dir():
            continue
        if (r / FOLDERS[dataset]).is_dir():
            check_pickles(r / FOLDERS[dataset])
        try:
            splits = {split: cls(str(r), train=split == "train", download=download) for split in ("train", "test")}
        except RuntimeError as err:  # torchvision: "Dataset not found or corrupted"
            raise ValueError(f"{r / FOLDERS[dataset]} holds no readable {dataset} ({err}); replace it with the "
                             "python version of the dataset.") from None
        return {s: (torch.from_numpy(d.data).permute(0, 3, 1, 2).contiguous(), torch.tensor(d.targets, dtype=torch.long))
                for s, d in splits.items()}
    raise _missing(dataset, roots)


class _LazyFolder:
    """The images of an `ImageFolder`, decoded and resized when a batch asks for them."""

    def __init__(self, folder):
        self.folder = folder
        self.targets = torch.tensor(folder.targets, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, idx: Tensor) -> Tensor:
        return torch.stack([self.folder[int(i)][0] for i in idx])


def load_image_folder(dataset: str = "imagenet100", root: str = "", *, image_size: int = 224):
    """ImageNet-100 through `ImageFolder`: {"train": (lazy images, labels), "test": (…)} from train/ and val/."""
    from torchvision import datasets
    from torchvision.transforms import v2

    roots = data_roots(root)
    for r in roots:
        base = r / FOLDERS[dataset]
        if (base / "train").is_dir() and (base / "val").is_dir():
            tf = v2.Compose([v2.ToImage(), v2.Resize(image_size, antialias=True), v2.CenterCrop(image_size)])
            out = {}
            for split, sub in (("train", "train"), ("test", "val")):
                lazy = _LazyFolder(datasets.ImageFolder(str(base / sub), transform=tf))
                out[split] = (lazy, lazy.targets)
            if out["train"][0].folder.classes != out["test"][0].folder.classes:
                raise ValueError(f"{base}: train/ and val/ hold different class folders; they must match.")
            return out
    raise _missing(dataset, roots)


@register_task("images")
class ImageTask:
    """Image classification (module docstring); inputs are normalised float images (C, H, W).

    Args:
        dataset: one of DATASETS. root: data root ("" searches `data_roots`).
        patch_size: patch side of the mask geometry (equal to the model's patch_size).
        image_size: resize to this side at load (0: the native size).
        n_train: training images used (0: all; else the first n of a fixed shuffle).
        augment: random crop and flip of training batches (from the run's generator).
        eval_points: test and train images scored by intermediate evaluations (the final one reads all
            of the test split).
        download: let torchvision download CIFAR (needs network). verify: check CIFAR's md5s.
        data_seed: the digits split and the n_train subsample.
    """

    def __init__(self, dataset: str = "digits", root: str = "", patch_size: int = 2, image_size: int = 0,
                 n_train: int = 0, augment: bool = False, eval_points: int = 1000, download: bool = False,
                 verify: bool = True, data_seed: int = 0):
        if dataset not in DATASETS:
            raise ValueError(f"unknown image dataset {dataset!r}; valid: {', '.join(DATASETS)}.")
        if patch_size < 1 or n_train < 0 or image_size < 0 or eval_points < 1:
            raise ValueError("images needs patch_size >= 1, n_train >= 0, image_size >= 0 and eval_points >= 1.")
        if dataset == "digits":
            splits = load_digits_images(data_seed)
        elif dataset == "imagenet100":
            splits = load_image_folder(dataset, root, image_size=image_size or 224)
        else:
            splits = load_cifar(dataset, root, download=download, verify=verify)
        if image_size and dataset != "imagenet100":
            from torchvision.transforms import v2

            resize = v2.Resize(image_size, antialias=True)
            splits = {s: (resize(x), y) for s, (x, y) in splits.items()}
        x, y = splits["train"]
        if n_train:
            if n_train > len(y):
                raise ValueError(f"n_train={n_train} exceeds the {len(y)} training images of {dataset!r}.")
            keep = torch.randperm(len(y), generator=torch.Generator().manual_seed(data_seed))[:n_train].sort().values
            x, y = (x[keep] if isinstance(x, Tensor) else _Subset(x, keep)), y[keep]
            splits["train"] = (x, y)
        self.splits, self.dataset, self.augment, self.eval_points = splits, dataset, augment, eval_points
        self.n_train = len(y)
        self.n_classes = int(max(int(splits["train"][1].max()), int(splits["test"][1].max())) + 1)
        sample = splits["test"][0][torch.arange(1)]
        c, h, w = sample.shape[1:]
        if h % patch_size or w % patch_size:
            raise ValueError(f"{dataset} images are {h}×{w}; patch_size {patch_size} must divide both sides.")
        self.patch_size, self.grid = patch_size, (h // patch_size, w // patch_size)
        mean, std = STATS.get(dataset) or self._channel_stats(splits["train"][0])
        from torchvision.transforms import v2

        self.to_float = v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(mean), list(std))])
        self.spec = TaskSpec(inputs="images", output="classification", n_outputs=self.n_classes,
                             image_shape=(int(c), int(h), int(w)))

    @staticmethod
    def _channel_stats(x: Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
        f = x.double() / 255
        return tuple(f.mean(dim=(0, 2, 3)).tolist()), tuple(f.std(dim=(0, 2, 3)).tolist())

    def _images(self, split: str, idx: Tensor) -> Tensor:
        return self.to_float(self.splits[split][0][idx])

    def _augment(self, x: Tensor, generator: torch.Generator) -> Tensor:
        b, _, h, w = x.shape
        pad = max(1, h // 8)
        flip = torch.rand(b, generator=generator) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        padded = F.pad(x, (pad, pad, pad, pad))
        oy = torch.randint(0, 2 * pad + 1, (b,), generator=generator)
        ox = torch.randint(0, 2 * pad + 1, (b,), generator=generator)
        rows = (oy[:, None] + torch.arange(h))[:, None, :, None]
        cols = (ox[:, None] + torch.arange(w))[:, None, None, :]
        return padded[torch.arange(b)[:, None, None, None], torch.arange(x.shape[1])[None, :, None, None], rows, cols]

    def train_batches(self, batch_size: int, generator: torch.Generator):
        y = self.splits["train"][1]
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(y), batch_size):
            idx = order[start : start + batch_size]
            x = self._images("train", idx)
            yield (self._augment(x, generator) if self.augment else x), y[idx]

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(output, target)

    @torch.no_grad()
    def evaluate(self, model: nn.Module, *, final: bool = True, batch_size: int = 500) -> dict[str, dict[str, float]]:
        """Top-1 accuracy and cross-entropy: the whole test split when final, else its first
        `eval_points`; the training split's first `eval_points` (un-augmented) either way."""
        out = {}
        for split in ("train", "test"):
            y = self.splits[split][1]
            n = len(y) if (final and split == "test") else min(len(y), self.eval_points)
            out[split] = self.score(model, lambda idx, split=split: self._images(split, idx), y[:n], batch_size)
        return out

    @staticmethod
    @torch.no_grad()
    def score(model: nn.Module, images, y: Tensor, batch_size: int = 500) -> dict[str, float]:
        """{"acc": top-1 accuracy, "ce": mean cross-entropy} of `model` on labels `y` (n,), the inputs of a batch
        of indices given by `images(idx)`, `batch_size` at a time on the model's device."""
        dev, n = model_device(model), len(y)
        correct, ce = 0, 0.0
        for start in range(0, n, batch_size):
            idx = torch.arange(start, min(n, start + batch_size))
            logits = model(images(idx).to(dev)).float().cpu()
            correct += int((logits.argmax(-1) == y[idx]).sum())
            ce += float(F.cross_entropy(logits, y[idx], reduction="sum"))
        return {"acc": correct / n, "ce": ce / n}

    def test_at(self, side: int, *, canvas: bool = False) -> tuple[Tensor, Tensor]:
        """The whole test split at side × side, normalised as in training: (x float (n, C, side, side), y).
        Resized (`v2.Resize`, bilinear, antialiased, on the stored images: the same picture in more pixels),
        or with `canvas` the image unchanged in the centre of a blank (zero) canvas of that side (the same
        patches, more of them). For a model read at a size it never trained at (`companion.resolution`)."""
        from torchvision.transforms import v2

        x, y = self.splits["test"]
        if not isinstance(x, Tensor):
            x = x[torch.arange(len(y))]
        if not canvas:
            return self.to_float(v2.Resize(side, antialias=True)(x)), y
        extra = [side - n for n in x.shape[-2:]]
        if min(extra) < 0 or any(e % 2 for e in extra):
            raise ValueError(f"a canvas of side {side} must exceed the {tuple(x.shape[-2:])} images by an even "
                             "number of pixels, so that the image sits in its centre.")
        return self.to_float(F.pad(x, (extra[1] // 2,) * 2 + (extra[0] // 2,) * 2)), y

    def mask_pattern(self, variant: str, *, cls: bool) -> Tensor:
        """Bool open pattern over [CLS +] the patch grid, rows = queries ("local:R"; module docstring), or
        "impulse": the nine single-offset patterns (9, n, n) of `companion.masks.impulse_patterns`, one per head."""
        if variant == "impulse":
            if cls:
                raise ValueError("the impulse patterns cover the patches only (Zheng et al.'s ViTs pool by mean); "
                                 "use model.pool='mean' with mask variant 'impulse'.")
            return impulse_patterns(*self.grid)
        radius = parse_local(variant, what="Chebyshev radius on the patch grid (or 'impulse')", default=1)
        return patch_pattern(*self.grid, radius, cls=cls)

    def probe_inputs(self) -> Tensor:
        return self._images("test", torch.arange(min(16, len(self.splits["test"][1]))))


class _Subset:
    """A lazy image set restricted to the indices `keep`."""

    def __init__(self, images, keep: Tensor):
        self.images, self.keep = images, keep

    def __len__(self) -> int:
        return len(self.keep)

    def __getitem__(self, idx: Tensor) -> Tensor:
        return self.images[self.keep[idx]]
