"""The reward curve of a run (a fine-tuning run's loss curve) as a PNG (matplotlib, no display
needed)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: a server has no display

import matplotlib.pyplot as plt

from bot.runs.cards import is_fine_tuning


def reward_curve_png(points: Sequence[dict[str, Any]], title: str) -> bytes:
    """train/reward and val/reward against the step."""
    train = [(p["step"], p["train"]) for p in points if p.get("train") is not None]
    val = [(p["step"], p["val"]) for p in points if p.get("val") is not None]
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
        buffer = io.BytesIO()
        figure.tight_layout()
        figure.savefig(buffer, format="png")
        return buffer.getvalue()
    finally:
        plt.close(figure)


def loss_curve_png(points: Sequence[dict[str, Any]], title: str) -> bytes:
    """A fine-tuning run's loss/train against the step, and its held-out rows' reference
    similarity (0 to 1) on an axis of its own."""
    loss = [(p["step"], p["loss"]) for p in points if p.get("loss") is not None]
    similarity = [(p["step"], p["similarity"]) for p in points if p.get("similarity") is not None]
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
        buffer = io.BytesIO()
        figure.tight_layout()
        figure.savefig(buffer, format="png")
        return buffer.getvalue()
    finally:
        plt.close(figure)


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
            train = [(p["step"], p[train_field]) for p in points if p.get(train_field) is not None]
            val = [(p["step"], p[val_field]) for p in points if p.get(val_field) is not None]
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
        buffer = io.BytesIO()
        figure.tight_layout()
        figure.savefig(buffer, format="png")
        return buffer.getvalue()
    finally:
        plt.close(figure)
