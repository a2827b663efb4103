"""Minari dataset directories (`<dir>/data/main_data.hdf5` + `metadata.json`), written and read
through Minari's own storage: offline datasets (`data.dataset`) and demonstrations
(`data.demos`). Nothing here makes a remote call."""

from __future__ import annotations

import os
import re
import shutil
import warnings
from pathlib import Path

import numpy as np


def minari_id(name: str) -> str:
    """A Minari dataset id for a directory name: `prefrl/<name>-v0` unless it has a version."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "dataset"
    return f"prefrl/{name}" if re.search(r"-v\d+$", name) else f"prefrl/{name}-v0"


def check_free(path: str | Path, what: str = "a dataset", replace: bool | None = None) -> None:
    """Refuse an --out that already holds something, or with `replace` one that holds anything
    but a dataset (checked again when writing; call it early too, before minutes of work).
    `replace` False: replacing could have been asked for, and the refusal says how; None: not."""
    path = Path(path)
    if path.exists() and (path.is_file() or any(path.iterdir())):
        if not (path / "data").exists():
            raise FileExistsError(f"{path.resolve()} already holds other files; choose another "
                                  "--out")  # fmt: skip
        if not replace:
            how = "" if replace is None else ", or replace them (--force; in Python, replace=True)"
            raise FileExistsError(f"{path.resolve()} already holds {what}; choose another "
                                  f"--out{how}")  # fmt: skip


def write_minari(path: str | Path, episodes, obs_dim: int, action_dim: int, env_id: str,
                 meta: dict, what: str = "a dataset", replace: bool | None = None) -> Path:  # fmt: skip
    """Write `episodes` (dicts of Minari's per-episode arrays: observations T+1 rows, actions,
    rewards, terminations, truncations T rows, infos T+1 rows) to a new directory at `path`,
    refused if one is there (with `replace`, if anything but a dataset is there). Written under a
    temporary name and renamed when complete, so an interrupted write never leaves something
    that looks like a dataset, and a replaced one stays until the new one is whole."""
    import gymnasium as gym
    import minari
    from minari.data_collector.episode_buffer import EpisodeBuffer
    from minari.dataset.minari_storage import MinariStorage

    path = Path(path).resolve()  # Minari joins a relative path onto itself
    check_free(path, what, replace)
    partial = path.with_name(f".{path.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)  # left by an earlier interrupted write
    data = partial / "data"
    data.mkdir(parents=True)
    try:
        env_spec = gym.spec(env_id)
    except gym.error.Error:
        env_spec = None  # dmc:..., robopianist:..., toy:...: not Gymnasium ids
    storage = MinariStorage.new(
        data,
        observation_space=gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32),
        action_space=gym.spaces.Box(-1.0, 1.0, (action_dim,), np.float32),
        env_spec=env_spec,
    )
    storage.update_metadata({"dataset_id": minari_id(path.name),
                             "minari_version": minari.__version__, **meta})  # fmt: skip
    storage.update_episodes(
        EpisodeBuffer(
            observations=e["observations"],
            actions=e["actions"],
            rewards=np.asarray(e["rewards"], np.float64),
            terminations=e["terminations"],
            truncations=e["truncations"],
            infos=e["infos"],
        )
        for e in episodes
    )
    if path.exists() and any(path.iterdir()):  # (a dataset, to replace: checked above)
        old = path.with_name(f".{path.name}.replaced")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
        os.replace(partial, path)
        shutil.rmtree(old)
        return path
    if path.exists():
        path.rmdir()  # empty
    os.replace(partial, path)
    return path


def read_minari(path: str | Path, make_hint: str) -> tuple[str, dict, dict, list[dict]]:
    """(env id, prefrl's own metadata without it, all metadata, episodes) of a Minari dataset
    directory (the one holding `data/`, or `data/` itself); `make_hint` says how to make one,
    for the error when `path` is none."""
    from minari.dataset.minari_storage import MinariStorage

    path = Path(path).resolve()
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; {make_hint}")
    data = path / "data" if (path / "data").is_dir() else path
    if not (data / "metadata.json").exists():
        raise FileNotFoundError(
            f"{path} is not a Minari dataset (no data/metadata.json); {make_hint}"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        storage = MinariStorage.read(data)
    episodes = list(storage.get_episodes(range(storage.total_episodes)))
    for e in episodes:
        for key in ("observations", "actions"):
            if not isinstance(e[key], np.ndarray):
                raise TypeError(
                    f"{path}: {key} are not flat arrays (dict or tuple spaces are not supported)"
                )
    check_finite(path, episodes)
    meta = storage.metadata
    ours = dict(meta.get("prefrl", {}))
    env_id = ours.pop("env", None) or getattr(meta.get("env_spec"), "id", None)
    if env_id is None:
        raise ValueError(
            f"{path}: the data names no environment (neither prefrl.env nor env_spec in its "
            "metadata), so it cannot be used on one"
        )
    return env_id, ours, meta, episodes


def first_non_finite(values) -> tuple[int, ...] | None:
    """The index of the first NaN or inf in `values`, or None (also for arrays of no floats)."""
    values = np.asarray(values)
    if values.dtype.kind not in "fc":
        return None
    bad = np.argwhere(~np.isfinite(values))
    return tuple(int(i) for i in bad[0]) if len(bad) else None


def check_finite(path: Path, episodes: list[dict]) -> None:
    """Refuse data holding NaN or inf, naming the episode (as the file does), the field and the
    index: caught where the data is opened, not later as a learner's NaN loss."""
    for e in episodes:
        infos = {f"infos/{k}": v for k, v in (e.get("infos") or {}).items()
                 if isinstance(v, np.ndarray)}  # fmt: skip
        fields = {k: e[k] for k in ("observations", "actions", "rewards")} | infos
        for key, values in fields.items():
            at = first_non_finite(values)
            if at is not None:
                count = int(np.sum(~np.isfinite(values)))
                raise ValueError(
                    f"{path}: episode_{e['id']}/{key}[{', '.join(map(str, at))}] is "
                    f"{values[at]} ({count} value(s) of that field there are NaN or inf); "
                    "every value must be finite: fix or drop that episode"
                )
