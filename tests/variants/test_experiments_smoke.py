"""Smoke tests of the Pre-LN vs Post-LN and contrastive experiments on tiny settings."""

import sys

import numpy as np

from experiments import contrastive, prenorm_postnorm


def run_main(module, monkeypatch, *argv):
    monkeypatch.setattr(sys, "argv", [module.__name__, *argv])
    return module.main()


def test_prenorm_postnorm_main_writes_table_and_png(tmp_path, monkeypatch):
    result = run_main(prenorm_postnorm, monkeypatch, "--out", str(tmp_path), "--steps", "2",
                      "--layers", "2")  # fmt: skip
    for variant in (result["pre"], result["post"]):
        for key in ("init", "trained"):
            assert variant[key].shape == (2,)
            assert np.all(np.isfinite(variant[key])) and np.all(variant[key] > 0)
        assert np.isfinite(variant["loss"]) and 0.0 <= variant["acc"] <= 1.0
    png = tmp_path / "prenorm_postnorm.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (tmp_path / "prenorm_postnorm.txt").read_text()
    assert "Pre-LN init" in text and "Post-LN trained" in text
    assert len([line for line in text.splitlines() if line.split()[:1] in (["1"], ["2"])]) == 2


def test_contrastive_main_writes_table(tmp_path, monkeypatch):
    result = run_main(contrastive, monkeypatch, "--out", str(tmp_path), "--steps", "5")
    assert set(result["results"]) == {label for label, _, _ in contrastive.RUNS}
    for before, after, final in result["results"].values():
        assert np.isfinite(final)
        for metrics in (before, after):
            assert all(np.isfinite(v) for v in metrics.values())
            assert 0.0 <= metrics["top1"] <= 1.0 and metrics["uniform"] <= 1e-12
    text = (tmp_path / "contrastive.txt").read_text()
    assert "uniformity trained" in text and "mse wd=0.5" in text


def test_collapse_metrics_on_known_configurations():
    # All embeddings equal (any scale): std 0, alignment 0, uniformity log(e^0) = 0.
    same = np.tile([[3.0, 0.0, 0.0, 0.0]], (6, 1))
    assert np.allclose(contrastive.collapse_metrics(same, 0.5 * same), 0.0)
    # The 4 signed basis vectors ±e1, ±e2: pair distances² are 2 (x4) and 4 (x2) among 6 pairs,
    # so uniformity = log((4 e^-4 + 2 e^-8) / 6); per-dim std = mean(sqrt(0.5), sqrt(0.5)).
    u = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    std, alignment, uniformity = contrastive.collapse_metrics(u, -u)
    assert np.isclose(std, np.sqrt(0.5))
    assert np.isclose(alignment, 4.0)
    assert np.isclose(uniformity, np.log((4 * np.exp(-4) + 2 * np.exp(-8)) / 6))
