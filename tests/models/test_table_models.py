"""The sequential model family, the regression losses (central differences), the table tasks, and the classifier's
and regressor's metrics against scikit-learn's."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as sk

from minitrain.autograd.gradcheck import gradcheck
from minitrain.autograd.losses import huber_loss, mse_loss
from minitrain.autograd.tensor import Tensor
from minitrain.common.errors import DataError
from minitrain.evaluation.table_metrics import binary_auc, classification_metrics, regression_metrics, roc_auc_ovr
from minitrain.models.registry import build_model, parameter_shapes
from minitrain.models.sequential import SequentialModel, resolve_widths
from minitrain.optim import build_optimizer
from minitrain.training.tasks import Classification, Regression, task_train_step

SPEC_LAYERS = [  # the spec's §3.2 example
    {"linear": {"in_features": 784, "out_features": 256, "bias": True}}, {"activation": "relu"}, {"dropout": 0.2},
    {"linear": {"in_features": 256, "out_features": 128}}, {"activation": "relu"}, {"dropout": 0.2},
    {"linear": {"in_features": 128, "out_features": 10}}, {"activation": "softmax"},
]


# --- the model -------------------------------------------------------------------------------------------------


def test_the_spec_example_builds_with_its_names_and_folds_the_softmax():
    model = build_model({"type": "sequential", "layers": SPEC_LAYERS}, rng=0)
    names = [name for name, _ in model.named_parameters()]
    assert names == ["layers.0.weight", "layers.0.bias", "layers.3.weight", "layers.3.bias", "layers.6.weight",
                     "layers.6.bias"]
    assert model.num_parameters() == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10
    assert [(n, s) for n, s in parameter_shapes(model.config)] == [(n, p.shape) for n, p in model.named_parameters()]
    assert model.softmax_folded and len(model.layers) == 7 and "softmax folded into the loss" in repr(model)
    out = model(np.zeros((3, 784), np.float32))
    assert out.shape == (3, 10)  # logits: the softmax is the loss's


def test_widths_are_filled_in_from_the_data_and_checked():
    layers = resolve_widths([{"linear": {"out_features": 8}}, {"layer_norm": {}}, {"linear": {"out_features": 3}}], 5)
    assert layers[0]["linear"]["in_features"] == 5 and layers[1]["layer_norm"]["dim"] == 8
    assert layers[2]["linear"]["in_features"] == 8
    with pytest.raises(DataError) as info:
        resolve_widths([{"linear": {"in_features": 4, "out_features": 8}}], 5)
    assert info.value.key == ("model", "layers", 0, "linear", "in_features")
    assert "is 4, but the data (its number of features) gives 5" in info.value.detail
    with pytest.raises(DataError, match=r"layers\[2\]\.linear\.in_features: is 7, but the layer before it"):
        resolve_widths([{"linear": {"out_features": 8}}, {"activation": "tanh"},
                        {"linear": {"in_features": 7, "out_features": 2}}], 5)
    with pytest.raises(DataError, match="softmax can only be the last layer"):
        resolve_widths([{"activation": "softmax"}, {"linear": {"out_features": 2}}], 5)


def test_an_embedding_and_flatten_read_integer_columns():
    layers = resolve_widths([{"embedding": {"num_embeddings": 4, "embedding_dim": 3}}, {"flatten": {}},
                             {"linear": {"out_features": 2}}], 5)
    assert layers[2]["linear"]["in_features"] == 15  # 5 columns of 3-vectors
    model = SequentialModel(layers, rng=1)
    assert model(np.array([[0, 1, 2, 3, 0]])).shape == (1, 2)


def test_a_model_and_its_saved_config_rebuild_the_same_outputs():
    model = build_model({"type": "sequential", "layers": resolve_widths(SPEC_LAYERS[:4], None)}, rng=3)
    again = build_model(model.config, rng=99)
    again.load_state_dict(model.state_dict())
    x = np.random.default_rng(0).standard_normal((2, 784)).astype(np.float32)
    np.testing.assert_array_equal(model.eval()(x).data, again.eval()(x).data)


# --- losses -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("loss", [mse_loss, lambda p, t: huber_loss(p, t, 0.7)])
def test_regression_losses_match_central_differences(loss):
    rng = np.random.default_rng(0)
    prediction = Tensor(rng.standard_normal((6, 2)), requires_grad=True, dtype=np.float64)
    target = rng.standard_normal((6, 2)) * 2  # some errors beyond delta, some within
    assert gradcheck(lambda p: loss(p, target), [prediction])


def test_losses_agree_with_their_definitions():
    p, t = np.array([[0.0], [3.0], [-1.0]]), np.array([[0.5], [0.0], [-1.0]])
    assert mse_loss(Tensor(p, dtype=np.float64), t).item() == pytest.approx((0.25 + 9) / 3)
    # huber with delta 1: 0.5·0.25 and 1·(3 − 0.5)
    assert huber_loss(Tensor(p, dtype=np.float64), t, 1.0).item() == pytest.approx((0.125 + 2.5) / 3)


# --- metrics against scikit-learn ---------------------------------------------------------------------------------


def random_classifier_output(seed: int, n: int = 200, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    logits = rng.standard_normal((n, k)) + 1.5 * np.eye(k)[y]  # better than chance, not perfect
    return y, logits


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_classification_metrics_match_scikit_learn(seed):
    y, logits = random_classifier_output(seed)
    wanted = ("accuracy", "precision", "recall", "f1", "auc_roc", "confusion_matrix")
    ours = classification_metrics(y, logits, wanted)
    predicted = logits.argmax(axis=1)
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert ours["accuracy"] == pytest.approx(sk.accuracy_score(y, predicted), abs=1e-12)
    for name, fn in (("precision", sk.precision_score), ("recall", sk.recall_score), ("f1", sk.f1_score)):
        assert ours[name] == pytest.approx(fn(y, predicted, average="macro", zero_division=0), abs=1e-12)
        np.testing.assert_allclose(ours["per_class"][name], fn(y, predicted, average=None, zero_division=0),
                                   atol=1e-12)
    assert ours["auc_roc"] == pytest.approx(sk.roc_auc_score(y, probabilities, multi_class="ovr"), abs=1e-12)
    assert ours["confusion_matrix"] == sk.confusion_matrix(y, predicted).tolist()
    assert ours["loss"] == pytest.approx(sk.log_loss(y, probabilities), abs=1e-10)


def test_zero_division_and_binary_auc_with_ties_match_scikit_learn():
    y = np.array([0, 0, 1, 1, 1, 2])
    logits = np.eye(3)[[0, 0, 0, 1, 1, 0]] * 2.0  # class 2 is never predicted: precision 0 for it
    ours = classification_metrics(y, logits, ("precision", "recall", "f1"))
    predicted = logits.argmax(axis=1)
    assert ours["precision"] == pytest.approx(sk.precision_score(y, predicted, average="macro", zero_division=0))
    assert ours["f1"] == pytest.approx(sk.f1_score(y, predicted, average="macro", zero_division=0))
    labels = np.array([0, 1, 1, 0, 1, 0, 1])
    scores = np.array([0.1, 0.4, 0.4, 0.4, 0.9, 0.2, 0.2])  # ties across the classes
    assert binary_auc(labels == 1, scores) == pytest.approx(sk.roc_auc_score(labels, scores))
    two = np.stack([1 - scores, scores], axis=1)
    assert roc_auc_ovr(labels, two) == pytest.approx(sk.roc_auc_score(labels, scores))


def test_regression_metrics_match_scikit_learn():
    rng = np.random.default_rng(4)
    target = rng.standard_normal((50, 2))
    prediction = target + 0.3 * rng.standard_normal((50, 2))
    ours = regression_metrics(target, prediction, ("mse", "mae", "r2"))
    assert ours["mse"] == pytest.approx(sk.mean_squared_error(target, prediction), abs=1e-12)
    assert ours["mae"] == pytest.approx(sk.mean_absolute_error(target, prediction), abs=1e-12)
    assert ours["r2"] == pytest.approx(sk.r2_score(target, prediction), abs=1e-12)
    constant = np.ones((4, 1))
    assert regression_metrics(constant, constant + 1, ("r2",))["r2"] == sk.r2_score(constant, constant + 1)


# --- the tasks in the training step --------------------------------------------------------------------------------


def batches_of(x, y, size):
    from minitrain.data.tables import TableBatch

    return [TableBatch(x[i : i + size], y[i : i + size]) for i in range(0, len(x), size)]


@pytest.mark.parametrize("task", [Classification(), Regression("mse"), Regression("huber", 0.5)])
def test_accumulated_micro_batches_give_the_gradient_of_one_batch(task):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((12, 5))
    y = rng.integers(0, 3, 12) if task.name == "classification" else rng.standard_normal((12, 3))
    grads = []
    for size in (12, 5):  # one batch, then micro-batches of 5, 5 and 2 rows
        model = build_model({"type": "sequential", "layers": resolve_widths(
            [{"linear": {"out_features": 4}}, {"activation": "tanh"}, {"linear": {"out_features": 3}}], 5)},
            rng=7, dtype=np.float64)
        model.pack_parameters()
        optimizer = build_optimizer("sgd", model.trainable_parameters(), buffer=model.buffer, lr=0.1)
        loss, _ = task_train_step(model, optimizer, batches_of(x, y, size), None, task)
        grads.append((loss, model.buffer.grad.copy()))
    assert grads[0][0] == pytest.approx(grads[1][0], rel=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-10, atol=1e-12)


def test_a_classifier_learns_a_separable_table():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((200, 2)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    model = build_model({"type": "sequential", "layers": resolve_widths(
        [{"linear": {"out_features": 8}}, {"activation": "relu"}, {"linear": {"out_features": 2}},
         {"activation": "softmax"}], 2)}, rng=0)
    model.pack_parameters()
    optimizer = build_optimizer("adamw", model.trainable_parameters(), buffer=model.buffer, lr=0.05)
    task = Classification()
    before = task.measure(model, batches_of(x, y, 64), ("accuracy",))
    for _ in range(100):
        task_train_step(model, optimizer, batches_of(x, y, 200), None, task)
        optimizer.step()
    after = task.measure(model, batches_of(x, y, 64), ("accuracy",))
    assert after["loss"] < before["loss"] / 3 and after["accuracy"] > 0.95
