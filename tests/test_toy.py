"""The toy task of the smoke experiment: exact labels, split, mask patterns, errors."""

import pytest
import torch

from companion.config import TaskConfig
from companion.tasks import TASKS, Task, make_task


def test_labels_are_exact_and_split_is_fixed():
    task = make_task(TaskConfig.of("toy", n_train=40))
    assert isinstance(task, Task) and "toy" in TASKS
    (xtr, ytr), (xte, yte) = task.splits["train"], task.splits["test"]
    assert len(xtr) == 40 and len(xte) == 24
    x = torch.cat([xtr, xte])
    assert len({tuple(r) for r in x.tolist()}) == 64  # every input of {±1}^6 exactly once
    y = torch.cat([ytr, yte])
    assert torch.equal(y, (2 * x[:, 0] - 1).float() * (2 * x[:, 1] - 1).float())
    again = make_task(TaskConfig.of("toy", n_train=40))
    assert torch.equal(again.splits["train"][0], xtr)
    other = make_task(TaskConfig.of("toy", n_train=40, data_seed=1))
    assert not torch.equal(other.splits["train"][0], xtr)


def test_epoch_batches_cover_the_training_set_in_generator_order():
    task = make_task(TaskConfig.of("toy"))
    batches = list(task.train_batches(16, torch.Generator().manual_seed(0)))
    assert [len(b[0]) for b in batches] == [16, 16, 16]
    seen = torch.cat([b[0] for b in batches])
    assert sorted(map(tuple, seen.tolist())) == sorted(map(tuple, task.splits["train"][0].tolist()))
    again = list(task.train_batches(16, torch.Generator().manual_seed(0)))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again))


def test_mask_patterns():
    task = make_task(TaskConfig.of("toy"))
    p = task.mask_pattern("default", cls=True)
    expected = torch.eye(7, dtype=torch.bool)
    expected[0, 1] = expected[0, 2] = expected[1, 2] = expected[2, 1] = True
    assert torch.equal(p, expected)
    q = task.mask_pattern("default", cls=False)
    assert q.shape == (6, 6) and q[0, 1] and q[1, 0] and q.sum() == 8
    assert torch.equal(task.mask_pattern("diagonal", cls=True), torch.eye(7, dtype=torch.bool))
    with pytest.raises(ValueError, match="valid: default, diagonal"):
        task.mask_pattern("band", cls=True)


def test_bad_task_names_and_parameters():
    with pytest.raises(ValueError, match="unknown task 'nope'; valid: .*toy"):
        make_task(TaskConfig.of("nope"))
    with pytest.raises(ValueError, match="rejected its parameters"):
        make_task(TaskConfig.of("toy", width=3))
    with pytest.raises(ValueError, match="n_train must be in"):
        make_task(TaskConfig.of("toy", n_train=64))
