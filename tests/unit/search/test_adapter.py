"""The query adapter: pure training and scoring on small real-shaped data."""

from __future__ import annotations

import numpy as np

from shared.search import adapter
from shared.search.adapter import adapt, held_back_top1, train_adapter
from shared.search.tool_vectors import Run

DIM = 16


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def _catalogue(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {f"t:{i}": v for i, v in enumerate(_unit(rng.normal(size=(6, DIM))))}


def _asked(description: np.ndarray, slant: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """How a tenant asks for a tool: its description pulled toward a shared slant."""
    return _unit(0.4 * description + 0.9 * slant + 0.05 * rng.normal(size=DIM))


def test_no_runs_is_the_identity_and_leaves_the_query_alone() -> None:
    rng = np.random.default_rng(0)
    descriptions = _catalogue(rng)
    matrix = train_adapter(descriptions, [])
    assert np.array_equal(matrix, np.eye(DIM, dtype=np.float32))
    query = _unit(rng.normal(size=DIM))
    assert np.allclose(adapt(matrix, query), query)
    assert np.array_equal(adapt(None, query), query)


def test_the_adapter_learns_how_the_tenant_asks_and_scores_better_held_back() -> None:
    # Every request carries the tenant's slant, which sits closer to another tool than
    # to the one asked for: raw cosine picks wrong; trained on earlier runs, the adapter
    # maps later requests back to their tools.
    rng = np.random.default_rng(1)
    descriptions = _catalogue(rng)
    names = list(descriptions)
    slant = _unit(descriptions["t:5"] + 0.3 * rng.normal(size=DIM))
    runs = [
        Run(order=i, vector=_asked(descriptions[names[i % 5]], slant, rng), tools=(names[i % 5],))
        for i in range(40)
    ]
    train, held = runs[:30], runs[30:]
    before = held_back_top1(held, descriptions=descriptions, matrix=None)
    matrix = train_adapter(descriptions, train)
    after = held_back_top1(held, descriptions=descriptions, matrix=matrix)
    assert after > before
    assert after >= 0.8


def test_large_catalogues_are_sampled_to_the_bounds() -> None:
    # Above MAX_NEGATIVES tools a step sees a sample that keeps every tool its pairs name.
    y = np.array([3, 2500, 7])
    d = np.arange(3000, dtype=np.float32)[:, None]
    x = np.zeros((3, 1), np.float32)
    _, labels, sampled = adapter._batch(x, y, d, rng=np.random.default_rng(0))
    assert len(sampled) == adapter.MAX_NEGATIVES
    assert [int(sampled[i, 0]) for i in labels] == [3, 2500, 7]


def test_the_written_out_gradient_and_adam_step_are_torchs() -> None:
    # The adapter trains in numpy so the learning worker never loads torch; its gradient
    # and update are the ones torch's autograd and Adam give for the same loss.
    import torch

    rng = np.random.default_rng(2)
    x = _unit(rng.normal(size=(9, DIM)))
    d = _unit(rng.normal(size=(6, DIM)))
    y = np.array([0, 1, 2, 3, 4, 5, 0, 1, 2])
    identity = np.eye(DIM, dtype=np.float32)
    w = (identity + 0.1 * rng.normal(size=(DIM, DIM))).astype(np.float32)
    tau, decay = adapter.TAU, 0.5

    tw = torch.tensor(w, requires_grad=True)
    q = torch.nn.functional.normalize(torch.tensor(x) @ tw.T, dim=1)
    loss = torch.nn.functional.cross_entropy(q @ torch.tensor(d).T / tau, torch.tensor(y))
    loss = loss + decay * ((tw - torch.eye(DIM)) ** 2).sum()
    optimiser = torch.optim.Adam([tw], lr=adapter.LEARNING_RATE)
    loss.backward()
    assert tw.grad is not None

    grad = adapter._gradient(w, x, y, d, tau=tau, decay=decay, identity=identity)
    assert np.allclose(grad, tw.grad.numpy(), atol=1e-5)
    adam = adapter._Adam(w.shape)
    for _ in range(2):  # the second step uses the moments of the first
        optimiser.step()
        adam.step(w, grad)
        assert np.allclose(w, tw.detach().numpy(), atol=1e-6)
