"""The private fit end to end on synthetic embeddings with a planted preference direction."""

from __future__ import annotations

import numpy as np
import pytest

from dpprefsyn.artifact import PreferenceModel
from dpprefsyn.dp._validation import normalize_rows
from dpprefsyn.evaluation import label_blind_accuracy
from dpprefsyn.privacy import make_rng
from dpprefsyn.private import FitConfig, fit_from_embeddings

D = 16


def pairs(n: int, seed: int, signal: bool = True):
    """(chosen, rejected) embeddings; with ``signal`` the chosen one is further along ``w``.

    Responses share a prompt part ``base``; their difference is mostly along a fixed unit
    ``w`` (so the top principal direction of the differences is ``w``) plus small noise.
    Without signal both responses are exchangeable and the label carries no information.
    """
    rng = np.random.default_rng(seed)
    w = np.random.default_rng(12345).normal(size=D)
    w /= np.linalg.norm(w)
    base = rng.normal(size=(n, D))
    a = base + 0.3 * rng.normal(size=(n, D))
    b = base + 0.3 * rng.normal(size=(n, D))
    if not signal:
        return a, b
    lift = (1.0 + np.abs(rng.normal(size=(n, 1)))) * w
    return a + lift, b


def public_diffs(m: int = 300) -> np.ndarray:
    """Public candidate differences drawn like the private ones (spends no budget)."""
    c, r = pairs(m, seed=99)
    return c - r


FAST = {"epsilon": 2.0, "n_components": 8, "insecure_seed": 0}
CONFIGS = {
    "default-public": FitConfig(**FAST),
    "dp-pca": FitConfig(**FAST, projection="dp-pca"),
    "spherical": FitConfig(**FAST, projection="dp-pca", clustering="spherical", n_clusters=3),
    "no-projection-fixed-delta": FitConfig(**FAST, projection="none", delta=1e-6),
    "diffprivlib": FitConfig(**FAST, projection="dp-pca", clustering="diffprivlib", n_clusters=3),
}


@pytest.fixture(scope="module")
def train():
    """400 private pairs with the planted direction."""
    return pairs(400, seed=0)


@pytest.fixture(scope="module")
def holdout():
    """2000 held-out pairs from the same distribution."""
    return pairs(2000, seed=1)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_ledger_total_within_configured_epsilon(train, name) -> None:
    """The composed epsilon never exceeds the budget, and the plan uses nearly all of it."""
    cfg = CONFIGS[name]
    model = fit_from_embeddings(*train, cfg, public_differences=public_diffs())
    total = model.privacy_report["total"]["epsilon"]
    assert total <= cfg.epsilon * (1 + 1e-6)
    assert total >= 0.95 * cfg.epsilon
    assert model.privacy_report["budget"]["epsilon"] == cfg.epsilon
    assert model.config["projection_used"] == cfg.projection


def test_public_projection_falls_back_to_none_without_public_data(train) -> None:
    """projection="public" with no public data uses the full embedding and spends no PCA budget."""
    model = fit_from_embeddings(*train, FitConfig(**FAST))
    assert model.config["projection_used"] == "none"
    assert model.projection.shape[0] == train[0].shape[1]
    assert "pca" not in {r["stage"] for r in model.privacy_report["releases"]}


def test_delta_is_one_over_noisy_count_when_unset(train) -> None:
    """delta=None: a Laplace count (its own release) sets delta = 1/n~, and the report says so."""
    n = len(train[0])
    cfg = FitConfig(**FAST, projection="dp-pca")
    report = fit_from_embeddings(*train, cfg).privacy_report
    # The count is the first draw of the seeded noise source: rebuild n~ from it.
    noisy_n = n + make_rng(cfg.insecure_seed).laplace(
        0.0, 1.0 / (cfg.count_epsilon_fraction * cfg.epsilon)
    )
    assert noisy_n != n
    assert report["total"]["delta"] == pytest.approx(1.0 / noisy_n, rel=1e-12)
    assert report["delta_from_noisy_count"] is True
    assert "1/n" in report["delta_note"]
    count = [r for r in report["releases"] if r["stage"] == "count"]
    assert len(count) == 1 and count[0]["mechanism"] == "laplace"
    assert count[0]["epsilon"] == pytest.approx(cfg.count_epsilon_fraction * cfg.epsilon)


def test_fixed_delta_spends_no_count(train) -> None:
    """A configured delta is used as is; no count is released."""
    report = fit_from_embeddings(*train, CONFIGS["no-projection-fixed-delta"]).privacy_report
    assert report["total"]["delta"] == 1e-6
    assert report["delta_from_noisy_count"] is False
    assert "count" not in {r["stage"] for r in report["releases"]}


@pytest.fixture(scope="module")
def paper_model(train):
    """Fit the research configuration once; one epoch and 8 components keep it to a few seconds."""
    cfg = FitConfig.paper(epochs=1, n_components=8, insecure_seed=0)
    return cfg, fit_from_embeddings(*train, cfg)


def test_paper_config_runs(paper_model) -> None:
    """DP-PCA, diffprivlib k-means and per-cluster DP-SGD all run and are all accounted for."""
    cfg, model = paper_model
    report = model.privacy_report
    assert report["total"]["epsilon"] <= cfg.epsilon * (1 + 1e-6)
    kinds = {(r["stage"], r["mechanism"]) for r in report["releases"]}
    assert kinds == {
        ("count", "laplace"),
        ("pca", "gaussian"),
        ("cluster", "pure"),
        ("histogram", "gaussian"),
        ("reward", "subsampled_gaussian"),
    }
    sgd = [r for r in report["releases"] if r["mechanism"] == "subsampled_gaussian"]
    assert len(sgd) == len(report["kept_clusters"])
    groups = {r["group"] for r in sgd}
    assert len(groups) == 1 and next(iter(groups)).startswith("reward-clusters")
    assert model.thetas.shape == (5, 8)
    assert model.cluster_weights.sum() == pytest.approx(1.0)
    assert model.projection.shape == (8, D)
    assert np.isfinite(model.thetas).all()


def test_accuracy_high_at_large_epsilon(train, holdout) -> None:
    """With a planted direction and a huge budget, held-out label-blind accuracy is high."""
    cfg = FitConfig(epsilon=1e3, projection="dp-pca", n_components=8, insecure_seed=0)
    model = fit_from_embeddings(*train, cfg)
    result = label_blind_accuracy(model, *holdout)
    assert result.n == len(holdout[0])
    assert result.accuracy > 0.95


def test_accuracy_near_half_without_signal(holdout) -> None:
    """When chosen and rejected are exchangeable, no budget can buy accuracy."""
    cfg = FitConfig(epsilon=1e3, projection="dp-pca", n_components=8, insecure_seed=0)
    model = fit_from_embeddings(*pairs(400, seed=2, signal=False), cfg)
    acc = label_blind_accuracy(model, *pairs(2000, seed=3, signal=False)).accuracy
    assert abs(acc - 0.5) < 0.05


def test_fixed_seed_repeats_exactly(train) -> None:
    """The same insecure_seed reproduces every array and the report; another seed does not."""
    cfg = CONFIGS["spherical"]
    a = fit_from_embeddings(*train, cfg)
    b = fit_from_embeddings(*train, cfg)
    np.testing.assert_array_equal(a.thetas, b.thetas)
    np.testing.assert_array_equal(a.projection, b.projection)
    np.testing.assert_array_equal(a.centers, b.centers)
    assert a.privacy_report == b.privacy_report
    assert "insecure" in a.privacy_report["noise_source"]
    other = fit_from_embeddings(*train, FitConfig(**{**cfg.to_dict(), "insecure_seed": 1}))
    assert not np.allclose(other.thetas, a.thetas)


def test_no_seed_draws_fresh_noise(train) -> None:
    """Without a seed the noise comes from the OS: two fits differ and the report says so."""
    cfg = FitConfig(epsilon=2.0, projection="none", delta=1e-6)
    a, b = (fit_from_embeddings(*train, cfg) for _ in range(2))
    assert not np.array_equal(a.thetas, b.thetas)
    assert "CSPRNG" in a.privacy_report["noise_source"]


def test_no_exact_count_leaks(train) -> None:
    """Released cluster counts are noisy: none equals the exact size of its cluster."""
    cfg = CONFIGS["spherical"]
    model = fit_from_embeddings(*train, cfg)
    # Rebuild the private assignment from released centres (what the fit did internally).
    chosen, rejected = train
    z = normalize_rows(normalize_rows(chosen - rejected) @ model.projection.T)
    labels = np.abs(z @ model.centers.T).argmax(axis=1)
    exact = np.bincount(labels, minlength=cfg.n_clusters)
    noisy = np.asarray(model.privacy_report["noisy_cluster_counts"])
    assert noisy.shape == exact.shape
    assert np.all(noisy != exact)
    assert np.all(noisy != np.round(noisy))  # not integers at all
    assert np.abs(noisy - exact).max() < 100  # but they are counts of these clusters
    single = fit_from_embeddings(*train, CONFIGS["no-projection-fixed-delta"])
    (count,) = single.privacy_report["noisy_cluster_counts"]
    assert count != len(chosen)


def test_model_saves_and_loads(tmp_path, train, holdout) -> None:
    """A saved model loads with identical arrays, report and scores."""
    model = fit_from_embeddings(*train, CONFIGS["spherical"])
    model.save(tmp_path / "model")
    loaded = PreferenceModel.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.scores(holdout[0]), model.scores(holdout[0]))
    np.testing.assert_array_equal(loaded.centers, model.centers)
    np.testing.assert_array_equal(loaded.cluster_weights, model.cluster_weights)
    assert loaded.privacy_report == model.privacy_report
    assert loaded.config["projection_used"] == "dp-pca"
    with pytest.raises(FileNotFoundError):
        PreferenceModel.load(tmp_path / "missing")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0.0},
        {"delta": 1.0},
        {"projection": "pca"},
        {"clustering": "kmeans"},
        {"reward": "sgd"},
        {"budget_split": {"pca": 0.5, "typo": 0.5}},
        {"budget_split": {"pca": -0.1}},
        {"count_epsilon_fraction": 0.5},
        {"n_components": 0},
    ],
)
def test_bad_config_rejected(kwargs) -> None:
    """FitConfig validates its fields when built."""
    with pytest.raises(ValueError):
        FitConfig(**kwargs)


def test_bad_inputs_rejected(train) -> None:
    """Mismatched shapes, NaN rows and a budget split missing a running stage are errors."""
    chosen, rejected = train
    with pytest.raises(ValueError, match="shape"):
        fit_from_embeddings(chosen, rejected[:-1], FitConfig(**FAST))
    bad = chosen.copy()
    bad[5, 0] = np.nan
    with pytest.raises(ValueError, match="record 5"):
        fit_from_embeddings(bad, rejected, FitConfig(**FAST))
    no_pca_share = FitConfig(**FAST, projection="dp-pca", budget_split={"reward": 1.0})
    with pytest.raises(ValueError, match="budget_split"):
        fit_from_embeddings(chosen, rejected, no_pca_share)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("seed", "secure"), [(None, True), (0, False)])
def test_diffprivlib_noise_is_secure_unless_seeded(train, monkeypatch, seed, secure) -> None:
    """Without a seed diffprivlib gets ``random_state=None``: its secure mode (SystemRandom)."""
    import secrets

    from diffprivlib.utils import check_random_state

    from dpprefsyn.private import fit as fit_module

    seen = []
    original = fit_module.DiffprivlibKMeans.fit

    def spy(self, *args, **kwargs):
        seen.append(self.random_state)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(fit_module.DiffprivlibKMeans, "fit", spy)
    cfg = FitConfig(
        epsilon=4.0,
        projection="none",
        clustering="diffprivlib",
        n_clusters=2,
        insecure_seed=seed,
    )
    fit_from_embeddings(*train, cfg)
    assert (seen[0] is None) is secure
    # What diffprivlib's KMeans.fit and then each of its mechanisms make of the argument.
    noise_source = check_random_state(check_random_state(seen[0]), secure=True)
    assert isinstance(noise_source, secrets.SystemRandom) is secure
