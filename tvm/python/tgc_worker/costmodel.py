"""Warm start of MetaSchedule's XGBoost cost model across tasks, runs and jobs.

MetaSchedule's XGB model answers with uniform random scores until it holds
`num_warmup_samples` (100) measurements, so a task tuned with a budget of a few dozen
trials never leaves warm-up: its evolutionary search mutates blindly. The model's features
(per-store loop-nest features) are not tied to one workload, so a model trained on the
tasks tuned before predicts usefully from the first round of a new one.

The file is `XGBModel.save`'s tar (booster + every measured feature group, keyed by
workload hash). One file per target and toolchain; `tgc tune` keeps it next to the cache.
Saving merges under an exclusive lock: groups the file gained from another job since this
task loaded it are kept, then the newest groups win up to `max_samples` measurements, and
the file is replaced atomically (write to a temporary file, rename).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections import OrderedDict
from contextlib import contextmanager

from .errors import one_line


@contextmanager
def _locked(path: str):
    """An exclusive advisory lock on `path + '.lock'` for the merge-and-replace step."""
    with open(path + ".lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def load_into(model, path: str) -> dict:
    """Load `path` into the XGBModel `model` if it exists. Returns what happened, for the
    task's result: {"loaded": bool, "samples": int, "error": str | None}. A damaged file
    is reported and ignored (the model starts cold; the next save replaces the file)."""
    if not os.path.exists(path):
        return {"loaded": False, "samples": 0, "error": None}
    try:
        model.load(path)
    except Exception as e:  # noqa: BLE001 - tar, numpy or xgboost errors on a bad file
        model.data, model.data_size, model.booster = OrderedDict(), 0, None
        return {"loaded": False, "samples": 0, "error": f"{path}: unreadable cost model: {one_line(e)}"}
    return {"loaded": True, "samples": int(model.data_size), "error": None}


def _trim(data: OrderedDict, max_samples: int) -> OrderedDict:
    """The newest groups (last in order) holding at most max_samples measurements (at least
    the newest group)."""
    kept, total = [], 0
    for key in reversed(list(data.keys())):
        n = len(data[key].costs)
        if kept and total + n > max_samples:
            break
        kept.append(key)
        total += n
    return OrderedDict((k, data[k]) for k in reversed(kept))


def save_merged(model, path: str, max_samples: int) -> dict:
    """Merge the model's data with what `path` holds now, trim, retrain if anything was
    merged in, and replace `path` atomically. Returns {"saved": bool, "samples": int,
    "error": str | None}; a failure to save never fails the task."""
    from tvm.s_tir.meta_schedule.cost_model import XGBModel

    if model.booster is None or not model.data:
        return {"saved": False, "samples": 0, "error": None}
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with _locked(path):
            merged = OrderedDict()
            if os.path.exists(path):
                disk = XGBModel(num_tuning_cores=1)
                if load_into(disk, path)["loaded"]:
                    for k, g in disk.data.items():
                        if k not in model.data:
                            merged[k] = g
            gained = bool(merged)
            for k, g in model.data.items():
                merged[k] = g
            trimmed = _trim(merged, max_samples)
            model.data = trimmed
            model.data_size = sum(len(g.costs) for g in trimmed.values())
            if gained or len(trimmed) != len(merged):
                _retrain(model)
            fd, tmp = tempfile.mkstemp(prefix=".tgc-cost-model-", dir=os.path.dirname(os.path.abspath(path)))
            os.close(fd)
            try:
                model.save(tmp)
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        return {"saved": True, "samples": int(model.data_size), "error": None}
    except Exception as e:  # noqa: BLE001
        return {"saved": False, "samples": 0, "error": f"{path}: cost model not saved: {one_line(e)}"}


def _retrain(model) -> None:
    """Train the booster on everything the model holds (XGBModel.update's step 5)."""
    import itertools

    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        xs = list(itertools.chain.from_iterable(g.features for g in model.data.values()))
        ys = np.concatenate(
            [
                np.divide(g.min_cost, g.costs, out=np.zeros_like(g.costs), where=g.costs != 0)
                for g in model.data.values()
            ],
            axis=0,
        )
    model._train(xs=xs, ys=ys)  # noqa: SLF001 - the one training entry point XGBModel has
    model.last_train_size = model.data_size
