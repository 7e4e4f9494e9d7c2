"""The reward curve of a run (a fine-tuning run's loss curve) as a PNG (matplotlib, no display
needed)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: a server has no display

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from bot.runs.display.cards import is_fine_tuning


def reward_curve_png(points: Sequence[dict[str, Any]], title: str) -> bytes:
    """train/reward and val/reward against the step."""
    train = _series(points, "train")
    val = _series(points, "val")
    figure, axes = plt.subplots(figsize=(7, 4), dpi=100)
    try:
        if train:
            axes.plot(*zip(*train, strict=True), label="train/reward", color="#457b9d")
        if val:
            axes.plot(*zip(*val, strict=True), label="val/reward", color="#e63946", marker="o")
        axes.set_xlabel("step")
        axes.set_ylabel("reward")
        axes.set_title(title[:80])
        axes.grid(alpha=0.3)
        if train or val:
            axes.legend(loc="best")
        return _png(figure)
    finally:
        plt.close(figure)


def loss_curve_png(points: Sequence[dict[str, Any]], title: str) -> bytes:
    """A fine-tuning run's loss/train against the step, and its held-out rows' reference
    similarity (0 to 1) on an axis of its own."""
    loss = _series(points, "loss")
    similarity = _series(points, "similarity")
    figure, axes = plt.subplots(figsize=(7, 4), dpi=100)
    try:
        if loss:
            axes.plot(*zip(*loss, strict=True), label="loss/train", color="#457b9d")
        axes.set_xlabel("step")
        axes.set_ylabel("loss")
        axes.set_title(title[:80])
        axes.grid(alpha=0.3)
        if similarity:
            right = axes.twinx()
            right.plot(
                *zip(*similarity, strict=True),
                label="val/reference_similarity",
                color="#e63946",
                marker="o",
            )
            right.set_ylabel("reference similarity")
            right.set_ylim(0, 1)
            right.legend(loc="upper right")
        if loss:
            axes.legend(loc="upper left")
        return _png(figure)
    finally:
        plt.close(figure)


def _series(points: Sequence[dict[str, Any]], field: str) -> list[tuple[Any, Any]]:
    """(step, value) of the points that have `field`."""
    return [(p["step"], p[field]) for p in points if p.get(field) is not None]


def _png(figure: Figure) -> bytes:
    """The figure, laid out, as PNG bytes."""
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


COMPARED_COLORS = ("#457b9d", "#e63946")


def compared_curves_png(
    curves: Sequence[tuple[str, Sequence[dict[str, Any]]]], title: str
) -> bytes:
    """Several runs' reward curves on one plot: each run one color, train/reward a line and
    val/reward dashed with markers; fine-tuning runs' loss/train and reference similarity."""
    fine_tuning = all(is_fine_tuning(points) for _, points in curves)
    train_field, val_field = ("loss", "similarity") if fine_tuning else ("train", "val")
    figure, axes = plt.subplots(figsize=(8, 4.5), dpi=100)
    try:
        for index, (label, points) in enumerate(curves):
            color = COMPARED_COLORS[index % len(COMPARED_COLORS)]
            train = _series(points, train_field)
            val = _series(points, val_field)
            if train:
                axes.plot(*zip(*train, strict=True), label=f"{label} {train_field}", color=color)
            if val:
                axes.plot(
                    *zip(*val, strict=True),
                    label=f"{label} {val_field}",
                    color=color,
                    linestyle="--",
                    marker="o",
                )
        axes.set_xlabel("step")
        axes.set_ylabel("loss, reference similarity" if fine_tuning else "reward")
        axes.set_title(title[:80])
        axes.grid(alpha=0.3)
        if axes.lines:
            axes.legend(loc="best")
        return _png(figure)
    finally:
        plt.close(figure)
