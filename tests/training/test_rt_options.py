"""Fitting the option selector (training/rt_options.py; issue 25 item 6): numpy only, no episodes."""

from __future__ import annotations

import numpy as np

from training.rt_options import fit_ridge, fit_sites, greedy_family


def _problem(n: int = 400, f: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three variants: the default (gain 0), one better where feature 0 is high, one where it is low."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, f))
    gains = np.stack([np.zeros(n), 0.02 * x[:, 0], -0.02 * x[:, 0]], axis=1)
    return x, gains


def test_ridge_picks_the_variant_the_features_say() -> None:
    x, gains = _problem()
    selector = fit_ridge(x, gains, ridge=1e-3)
    test, _ = _problem(seed=1)
    pick = np.argmax(selector.predict(test), axis=1)
    expected = np.where(test[:, 0] > 0, 1, 2)
    assert np.mean(pick == expected) > 0.95


def test_a_threshold_keeps_the_default_unless_the_gain_is_larger() -> None:
    x, gains = _problem()
    selector = fit_ridge(x, gains, ridge=1e-3, threshold=0.03)  # gains above 0.03 need |x0| > 1.5
    test, _ = _problem(seed=1)
    pick = np.argmax(selector.predict(test), axis=1)
    assert np.all(pick[np.abs(test[:, 0]) < 1.3] == 0)
    assert np.all(pick[test[:, 0] > 1.7] == 1)
    assert np.all(pick[test[:, 0] < -1.7] == 2)


def test_infinite_ridge_is_the_best_variant_on_average() -> None:
    x, gains = _problem()
    gains[:, 2] += 0.05  # variant 2 better on average, whatever the patient
    selector = fit_ridge(x, gains, ridge=np.inf)
    assert set(np.argmax(selector.predict(_problem(seed=2)[0]), axis=1)) == {2}


def test_sites_are_fitted_apart_on_gains_over_column_zero() -> None:
    x, gains = _problem()
    scores = 0.7 + gains  # the default's score in column 0; the fit takes gains against it
    other = np.stack([np.full(len(x), 0.9), np.full(len(x), 0.8), np.full(len(x), 0.95)], axis=1)
    sites = fit_sites({(1, 2): (x, scores), (1, 1): (x, other)}, ridge=1e-3)
    test = _problem(seed=3)[0]
    first = np.argmax(sites.selectors[(1, 2)].predict(test), axis=1)
    assert np.mean(first == np.where(test[:, 0] > 0, 1, 2)) > 0.95
    assert set(np.argmax(sites.selectors[(1, 1)].predict(test), axis=1)) == {2}


def test_greedy_family_starts_at_the_default_and_adds_the_complementary_variants() -> None:
    # per patient the best of variants 1 and 2 alternates; 3 is never best; 0 is the default
    scores = np.array([[0.5, 0.9, 0.1, 0.6], [0.5, 0.1, 0.9, 0.6]] * 5)
    assert greedy_family([scores], 3) == [0, 1, 2] or greedy_family([scores], 3) == [0, 2, 1]
    assert greedy_family([scores], 1) == [0]


def test_clipping_predicts_beyond_the_training_range_as_at_its_edge() -> None:
    """``clip``: a patient beyond the training features' range gets the prediction at the range's
    edge (no linear extrapolation); inside the range the fit is the unclipped one."""
    x, gains = _problem()
    clipped = fit_ridge(x, gains, ridge=1e-3, clip=True)
    plain = fit_ridge(x, gains, ridge=1e-3)
    np.testing.assert_allclose(clipped.predict(x), plain.predict(x), rtol=0, atol=1e-12)
    far = x[:3].copy()
    far[:, 0] = x[:, 0].max() + 10.0
    edge = far.copy()
    edge[:, 0] = x[:, 0].max()
    np.testing.assert_allclose(clipped.predict(far), clipped.predict(edge), rtol=0, atol=1e-12)
    assert not np.allclose(plain.predict(far), plain.predict(edge))
    low = x[:3].copy()
    low[:, 0] = x[:, 0].min() - 10.0
    at_min = low.copy()
    at_min[:, 0] = x[:, 0].min()
    np.testing.assert_allclose(clipped.predict(low), clipped.predict(at_min), rtol=0, atol=1e-12)


def test_settings_can_differ_by_site() -> None:
    """``ridge``/``threshold``/``clip`` by site key: an infinite ridge makes that site's selector the
    training mean gains (plus the threshold on the default) for every patient; the other site stays
    contextual and unclipped."""
    x, gains = _problem()
    gains[:, 1] += 0.01
    scores = 0.7 + gains
    sites = fit_sites(
        {(1, 2): (x, scores), (2, 1): (x, scores)},
        ridge={(1, 2): np.inf, (2, 1): 1e-3},
        threshold={(1, 2): 0.005, (2, 1): 0.0},
        clip={(1, 2): True, (2, 1): False},
    )
    test = _problem(seed=4)[0]
    expected = gains.mean(axis=0) + np.array([0.005, 0.0, 0.0])
    np.testing.assert_allclose(sites.selectors[(1, 2)].predict(test), np.tile(expected, (len(test), 1)))
    assert sites.selectors[(1, 2)].low is not None and sites.selectors[(2, 1)].low is None
    pick = np.argmax(sites.selectors[(2, 1)].predict(test), axis=1)
    assert np.mean(pick == np.where(test[:, 0] > -0.25, 1, 2)) > 0.95  # 0.02 x + 0.01 > -0.02 x
