"""Image and text data for Chapter 5: patch-geometry and causal local masks, the digits task, CIFAR and
ImageFolder read through torchvision from small files in their own on-disk formats, TinyStories."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pytest
import torch

from companion.config import ModelConfig, PriorConfig, TaskConfig
from companion.masks import IMPULSE_ORDER, causal_local_pattern, impulse_patterns, parse_local, patch_pattern
from companion.model import build_model
from companion.tasks import make_task
from companion.tasks.images import ImageTask, check_pickles, load_cifar, load_image_folder
from companion.tasks.text import SEPARATOR, CharCorpusTask, read_stories, tinystories_files


# --- masks ---------------------------------------------------------------------------------------

def test_patch_pattern_opens_the_chebyshev_neighbourhood():
    p = patch_pattern(3, 3, 1, cls=False)
    assert p.shape == (9, 9) and torch.equal(p, p.T)
    assert p[0].nonzero().flatten().tolist() == [0, 1, 3, 4]  # corner: itself, right, below, diagonal
    assert p[4].all()  # the centre sees the whole 3×3 grid
    assert p[2].nonzero().flatten().tolist() == [1, 2, 4, 5]
    assert torch.equal(patch_pattern(3, 3, 0, cls=False), torch.eye(9, dtype=torch.bool))
    assert patch_pattern(4, 4, 3, cls=False).all()
    assert int(patch_pattern(4, 4, 1, cls=False).sum()) == 4 * 4 + 8 * 6 + 4 * 9  # corners, edges, inside


def test_patch_pattern_with_cls_opens_its_row_and_column():
    p = patch_pattern(2, 3, 1, cls=True)
    assert p.shape == (7, 7) and p[0].all() and p[:, 0].all()
    assert torch.equal(p[1:, 1:], patch_pattern(2, 3, 1, cls=False))
    assert not p[1, 3]  # (0, 0) and (0, 2) are two columns apart


def test_causal_local_pattern_is_a_band_under_the_diagonal():
    p = causal_local_pattern(5, 2)
    expected = torch.tensor([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]],
                            dtype=torch.bool)
    assert torch.equal(p, expected)
    assert torch.equal(causal_local_pattern(6, 6), torch.ones(6, 6, dtype=torch.bool).tril())


def test_local_variants_parse_and_bad_ones_name_the_form():
    assert parse_local("local:3", what="radius", default=1) == 3
    assert parse_local("default", what="radius", default=1) == 1
    for bad in ("local", "local:-1", "local:x", "support"):
        with pytest.raises(ValueError, match=r"valid: default \(local:1\) or local:N"):
            parse_local(bad, what="radius", default=1)
    with pytest.raises(ValueError, match="rows, cols >= 1"):
        patch_pattern(0, 2, 1, cls=False)


def test_impulse_patterns_give_each_head_one_offset_in_zheng_order():
    p = impulse_patterns(3, 3)
    assert p.shape == (9, 9, 9) and IMPULSE_ORDER == (4, 1, 5, 3, 7, 0, 2, 6, 8)
    centre = 4  # patch (1, 1) reads, per head: itself, the one above, right, left, below, then the diagonals
    assert [int(p[h, centre].nonzero()) for h in range(9)] == [4, 1, 5, 3, 7, 0, 2, 6, 8]
    assert torch.equal(p[0], torch.eye(9, dtype=torch.bool))
    assert p[1, 0].sum() == 0 and p[1, 3].nonzero().flatten().tolist() == [0]  # "up" from the top row: none
    assert (p.sum(-1) <= 1).all()  # at most one open key per query and head
    assert torch.equal(p.any(0), patch_pattern(3, 3, 1, cls=False))  # together: the 3×3 neighbourhood


def test_impulse_heads_reach_the_mask_and_the_structured_start(digits):
    pattern = digits.mask_pattern("impulse", cls=False)
    assert pattern.shape == (9, 16, 16)
    with pytest.raises(ValueError, match="pool='mean'"):
        digits.mask_pattern("impulse", cls=True)
    base = ModelConfig(arch="vit", d_model=32, n_layers=1, n_heads=4, d_ff=16, pool="mean", patch_size=2)
    masked = build_model(replace(base, prior=PriorConfig(kind="mask", variant="impulse", per_head=True)), digits,
                         generator=torch.Generator().manual_seed(0))
    bias = masked.blocks[0].attn.prior.bias(16)
    assert bias.shape == (4, 16, 16)
    for h in range(4):  # head h is open exactly on the h-th offset of IMPULSE_ORDER
        assert torch.equal(bias[h] > -1, pattern[h])
    shared = replace(base, prior=PriorConfig(kind="mask", variant="impulse"))
    with pytest.raises(ValueError, match="per_head=true"):
        build_model(shared, digits, generator=torch.Generator().manual_seed(0))
    # heads of width r = 16 >= n = 16 positions: the closed form is exact, P W_Q W_Kᵀ Pᵀ ∝ the head's target
    svd = replace(base, d_model=64, qk_init="structured-svd", prior=PriorConfig(variant="impulse"))
    model = build_model(svd, digits, generator=torch.Generator().manual_seed(0))
    from companion.init import position_inputs

    a, p = model.blocks[0].attn, position_inputs(model)
    r = a.d_head
    for h in range(4):  # the position logits of head h peak on its own offset wherever it is in the grid
        w = a.q_proj.weight[h * r:(h + 1) * r].double().T @ a.k_proj.weight[h * r:(h + 1) * r].double()
        logits = p @ w @ p.T
        rows = pattern[h].any(-1)
        assert torch.equal(logits[rows].argmax(-1), pattern[h][rows].int().argmax(-1))


# --- digits --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def digits():
    return ImageTask("digits", patch_size=2)


def test_digits_split_spec_and_normalisation(digits):
    x, y = digits.splits["train"]
    assert x.dtype == torch.uint8 and tuple(x.shape[1:]) == (1, 8, 8) and len(y) == 1438
    assert len(digits.splits["test"][1]) == 359 and digits.n_classes == 10
    assert set(y.tolist()) == set(range(10)) and int(x.max()) == 255
    assert digits.spec.image_shape == (1, 8, 8) and digits.spec.n_outputs == 10
    f = digits._images("train", torch.arange(len(y)))
    assert abs(float(f.mean())) < 1e-5 and abs(float(f.std()) - 1) < 1e-3  # normalised by the train statistics
    again = ImageTask("digits", patch_size=2)
    assert torch.equal(again.splits["test"][0], digits.splits["test"][0])  # the split is task-level


def test_digits_mask_is_the_patch_grid_and_reaches_the_vit(digits):
    assert torch.equal(digits.mask_pattern("default", cls=False), patch_pattern(4, 4, 1, cls=False))
    assert torch.equal(digits.mask_pattern("local:2", cls=True), patch_pattern(4, 4, 2, cls=True))
    cfg = ModelConfig(arch="vit", d_model=16, n_layers=1, n_heads=2, d_ff=16, pool="mean", patch_size=2,
                      prior=PriorConfig(kind="mask", variant="local:1"))
    model = build_model(cfg, digits, generator=torch.Generator().manual_seed(0))
    bias = model.blocks[0].attn.prior.bias(16)
    assert torch.equal(bias[0] > -1, patch_pattern(4, 4, 1, cls=False))
    with torch.no_grad():
        out, maps = model(digits.probe_inputs(), return_attention=True)
    assert out.shape == (16, 10) and maps[0].shape == (16, 2, 16, 16)
    assert float(maps[0][..., ~patch_pattern(4, 4, 1, cls=False)].max()) < 1e-3  # closed keys get nothing


def test_a_patch_size_that_does_not_divide_the_image_is_named():
    with pytest.raises(ValueError, match="patch_size 3 must divide both sides"):
        ImageTask("digits", patch_size=3)
    with pytest.raises(ValueError, match="unknown image dataset 'mnist'; valid: digits, cifar10"):
        make_task(TaskConfig.of("images", dataset="mnist"))


def test_augmentation_is_drawn_from_the_run_generator(digits):
    x = digits._images("train", torch.arange(8))
    a = digits._augment(x, torch.Generator().manual_seed(3))
    b = digits._augment(x, torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.shape == x.shape and not torch.equal(a, x)
    ident = torch.arange(1.0, 65.0).view(1, 1, 8, 8).expand(4, 1, 8, 8)
    out = digits._augment(ident, torch.Generator().manual_seed(0))
    for img in out[:, 0]:  # every output is a shifted (and maybe flipped) window of the zero-padded input
        inner = img[img != 0]
        assert len(inner) >= 49 and set(inner.tolist()) <= set(range(1, 65))


# --- CIFAR, in its python pickle format ----------------------------------------------------------

def _write_cifar(root, dataset="cifar10", per_batch=4):
    if dataset == "cifar10":
        folder, files, key, meta, names = root / "cifar-10-batches-py", \
            [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"], "labels", "batches.meta", "label_names"
    else:
        folder, files, key, meta, names = root / "cifar-100-python", ["train", "test"], "fine_labels", "meta", \
            "fine_label_names"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    written = {}
    for n, name in enumerate(files):
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        labels = [(n + i) % 10 for i in range(per_batch)]
        with open(folder / name, "wb") as f:
            pickle.dump({"data": data, key: labels}, f, protocol=2)
        written[name] = (data, labels)
    with open(folder / meta, "wb") as f:
        pickle.dump({names: [f"class{i}" for i in range(10)]}, f, protocol=2)
    return written


@pytest.mark.parametrize("dataset", ["cifar10", "cifar100"])
def test_cifar_reads_its_own_format_through_torchvision(tmp_path, dataset):
    written = _write_cifar(tmp_path, dataset)
    splits = load_cifar(dataset, str(tmp_path), verify=False)
    x, y = splits["train"]
    first = "data_batch_1" if dataset == "cifar10" else "train"
    assert x.dtype == torch.uint8 and tuple(x.shape[1:]) == (3, 32, 32)
    assert torch.equal(x[0], torch.from_numpy(written[first][0][0].reshape(3, 32, 32)))  # CHW, as stored
    assert y[:4].tolist() == written[first][1]
    assert len(y) == (20 if dataset == "cifar10" else 4) and len(splits["test"][1]) == 4
    task = ImageTask(dataset, root=str(tmp_path), patch_size=4, verify=False, augment=True)
    assert task.spec.image_shape == (3, 32, 32) and task.grid == (8, 8)
    xb, yb = next(task.train_batches(3, torch.Generator().manual_seed(0)))
    assert xb.shape == (3, 3, 32, 32) and xb.dtype == torch.float32


def test_cifar_md5s_are_checked_unless_verify_is_off(tmp_path):
    _write_cifar(tmp_path)
    with pytest.raises(ValueError, match="holds no readable cifar10 .*corrupted"):
        load_cifar("cifar10", str(tmp_path))


def test_a_cifar_pickle_that_would_run_code_is_refused(tmp_path):
    _write_cifar(tmp_path)
    with open(tmp_path / "cifar-10-batches-py" / "test_batch", "wb") as f:
        pickle.dump({"data": print, "labels": []}, f, protocol=2)
    with pytest.raises(ValueError, match=r"test_batch is not a plain CIFAR batch \(it references (__builtin__|builtins).print\)"):
        check_pickles(tmp_path / "cifar-10-batches-py")
    with pytest.raises(ValueError, match="refusing to unpickle"):
        load_cifar("cifar10", str(tmp_path), verify=False)


def test_missing_data_names_where_it_looked_and_how_to_provide_it(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPANION_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=r"dataset 'cifar100' not found; looked in: .*nowhere/cifar-100-python, "
                                         r".*data/cifar-100-python.*task.root=PATH or \$COMPANION_DATA or pass "
                                         r"task.download=true"):
        ImageTask("cifar100")
    with pytest.raises(ValueError, match=r"'imagenet100' not found; looked in: .*imagenet100.*train/<class>"):
        load_image_folder("imagenet100", str(tmp_path))


# --- ImageNet-100, as class folders ---------------------------------------------------------------

def test_imagefolder_reads_class_folders_of_pngs(tmp_path):
    from PIL import Image

    colours = {"n01": (255, 0, 0), "n02": (0, 0, 255)}
    for split in ("train", "val"):
        for cls, rgb in colours.items():
            (tmp_path / "imagenet100" / split / cls).mkdir(parents=True)
            for k in range(2):
                Image.new("RGB", (40, 48), rgb).save(tmp_path / "imagenet100" / split / cls / f"{k}.png")
    splits = load_image_folder("imagenet100", str(tmp_path), image_size=16)
    images, labels = splits["train"]
    assert labels.tolist() == [0, 0, 1, 1] and len(images) == 4
    batch = images[torch.tensor([0, 3])]
    assert batch.shape == (2, 3, 16, 16) and batch.dtype == torch.uint8
    assert batch[0, :, 5, 5].tolist() == [255, 0, 0] and batch[1, :, 5, 5].tolist() == [0, 0, 255]
    task = ImageTask("imagenet100", root=str(tmp_path), patch_size=4, image_size=16, n_train=3)
    assert task.n_train == 3 and task.spec.image_shape == (3, 16, 16) and task.n_classes == 2
    xb, yb = next(task.train_batches(3, torch.Generator().manual_seed(0)))
    assert xb.shape == (3, 3, 16, 16) and sorted(yb.tolist()) in ([0, 0, 1], [0, 1, 1])


# --- TinyStories ---------------------------------------------------------------------------------

def _stories(n, tag):
    return [f"Once upon a time {tag} number {i} met a cat. The cat said hello." for i in range(n)]


def test_tinystories_keeps_its_own_split_and_caps_documents(tmp_path):
    train, valid = _stories(30, "red"), _stories(6, "den")  # valid uses only characters train has
    (tmp_path / "TinyStoriesV2-GPT4-train.txt").write_text(f"\n{SEPARATOR}\n".join(train) + f"\n{SEPARATOR}\n")
    (tmp_path / "TinyStoriesV2-GPT4-valid.txt").write_text(f"\n{SEPARATOR}\n".join(valid))
    assert tinystories_files(str(tmp_path))[0].name == "TinyStoriesV2-GPT4-train.txt"
    assert read_stories(tmp_path / "TinyStoriesV2-GPT4-train.txt", chunk=7) == train  # separators across chunks
    assert read_stories(tmp_path / "TinyStoriesV2-GPT4-train.txt", max_documents=4, chunk=7) == train[:4]
    task = CharCorpusTask(corpus=f"tinystories:{tmp_path}", seq_len=16, n_train=8)
    assert task.decode(task.streams["test"]).split("\n")[:-1] == valid
    assert task.decode(task.streams["train"]).split("\n")[:-1] == train
    capped = CharCorpusTask(corpus=f"tinystories:{tmp_path}", seq_len=16, n_train=8, max_documents=5)
    assert capped.decode(capped.streams["train"]).split("\n")[:-1] == train[:5]
    assert torch.equal(task.mask_pattern("local:4", cls=False), causal_local_pattern(16, 4))
    assert torch.equal(task.mask_pattern("default", cls=False), causal_local_pattern(16, 4))


def test_missing_tinystories_names_the_folders_and_the_files(tmp_path):
    with pytest.raises(ValueError, match=r"TinyStories not found; looked in: .*empty.*TinyStoriesV2-GPT4-train.txt"):
        CharCorpusTask(corpus=f"tinystories:{tmp_path / 'empty'}")


def test_the_paper_vit_builds_on_cifar_geometry_with_every_prior(tmp_path):
    from companion.experiments import get_experiment

    _write_cifar(tmp_path)
    cfgs = get_experiment("vit-cifar10").configs("paper")
    task = ImageTask("cifar10", root=str(tmp_path), patch_size=cfgs["mask"].task.kwargs["patch_size"], verify=False)
    assert task.grid == (16, 16)  # 32 px in 2-pixel patches: 256 tokens
    for method in ("mask", "structured-svd"):
        model = build_model(cfgs[method].model, task, generator=torch.Generator().manual_seed(0))
        assert model.n_positions == 256 and len(model.blocks) == 12
    assert torch.equal(task.mask_pattern("default", cls=False),
                       patch_pattern(16, 16, 1, cls=False))
