"""The higher-order examples (examples/wgan_gp.py, maml_sine.py, newton_cg.py) run on torch and on
tinytensor from the same weights and data in float64: every loss of a few training steps and the
weights after them agree to rtol 1e-8, and each script's main writes its plot.

The programs take the library as `torch` (as tests/compat's do), so the same functions run on
both; the `torch` fixture skips with a reason where torch is missing (fails under
TINYTENSOR_REQUIRE_REFERENCE=1)."""

import contextlib

import maml_sine
import newton_cg
import numpy as np
import pytest
import wgan_gp

import tinytensor as tt

RTOL, ATOL = 1e-8, 1e-12


@contextlib.contextmanager
def float64(*libraries):
    """The libraries' default dtype float64 (the examples' tensors take the default)."""
    before = [lib.get_default_dtype() for lib in libraries]
    for lib in libraries:
        lib.set_default_dtype(lib.float64)
    try:
        yield
    finally:
        for lib, dtype in zip(libraries, before):
            lib.set_default_dtype(dtype)


def numpy(t):
    return t.detach().numpy()


def assert_close(ref, got, what):
    """Same length and values, element by element (a list of numbers or of tensors)."""
    assert len(ref) == len(got), f"{what}: {len(ref)} vs {len(got)} entries"
    for i, (a, b) in enumerate(zip(ref, got)):
        a, b = (numpy(v) if hasattr(v, "detach") else np.asarray(v) for v in (a, b))
        assert np.all(np.isfinite(b)), f"{what}[{i}] is not finite: {b}"
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL, err_msg=f"{what}[{i}]")


# ---- WGAN-GP --------------------------------------------------------------------------------


def test_wgan_gp_trains_as_on_torch(torch):
    """3 generator steps of 5 critic steps each: every loss and every weight after them."""
    with float64(torch, tt):
        runs = [wgan_gp.train(lib, 3, 0, hidden=32, batch=64, lr=1e-3) for lib in (torch, tt)]
    (ref_g, ref_d, ref_history), (gen, critic, history) = runs
    for key in ref_history:
        assert_close(ref_history[key], history[key], key)
    assert ref_history["penalty"][-1] > 1e-3  # the penalty is on, not a vanishing term
    assert_close(list(ref_g.parameters()), list(gen.parameters()), "generator weights")
    assert_close(list(ref_d.parameters()), list(critic.parameters()), "critic weights")


def test_gradient_penalty_differentiates_through_the_critic_gradient(torch):
    """The penalty's gradient with respect to the critic's weights (second derivatives of D):
    the part of WGAN-GP that needs create_graph=True, compared on its own."""
    grads = []
    with float64(torch, tt):
        for lib in (torch, tt):
            rng = np.random.default_rng(0)
            critic = wgan_gp.mlp(lib, [2, 16, 16, 1], rng)
            real = wgan_gp.as_tensor(lib, wgan_gp.eight_gaussians(rng, 32))
            fake = wgan_gp.as_tensor(lib, rng.standard_normal((32, 2)))
            eps = wgan_gp.as_tensor(lib, rng.uniform(size=(32, 1)))
            penalty = wgan_gp.gradient_penalty(lib, critic, real, fake, eps)
            weights = [p for name, p in critic.named_parameters() if name.endswith("weight")]
            grads.append([penalty, *lib.autograd.grad(penalty, weights)])
    assert_close(*grads, "penalty, then its gradient for each weight")
    assert all(np.abs(numpy(g)).max() > 1e-3 for g in grads[1][1:])


# ---- MAML -----------------------------------------------------------------------------------


@pytest.mark.parametrize("inner_steps", [1, 2])
def test_maml_trains_as_on_torch(torch, inner_steps):
    """3 outer steps over 4 tasks (through one or two inner steps), then the held-out scores."""
    with float64(torch, tt):
        runs = [
            maml_sine.train(lib, 3, 0, meta_batch=4, inner_steps=inner_steps) for lib in (torch, tt)
        ]
        scores = [
            maml_sine.evaluate(lib, params, 0, tasks=3)
            for lib, (params, _) in zip((torch, tt), runs)
        ]
    (ref_params, ref_losses), (params, losses) = runs
    assert_close(ref_losses, losses, "meta-loss")
    assert_close(ref_params, params, "θ")
    assert list(scores[1]) == [0, 1, 10]
    assert_close(list(scores[0].values()), list(scores[1].values()), "held-out MSE after 0/1/10")


def test_maml_outer_gradient_goes_through_the_inner_step(torch):
    """First-order MAML (the inner gradient detached) gives a different outer gradient: the
    second-order term -α ∇²L_support ∇L_query is there, and it matches torch's."""
    outer = {}
    with float64(torch, tt):
        for lib in (torch, tt):
            rng = np.random.default_rng(0)
            params = maml_sine.init_params(lib, rng)
            task = maml_sine.sample_task(rng)
            support, query = (
                [maml_sine.as_tensor(lib, a) for a in maml_sine.sample_points(rng, task, 10)]
                for _ in range(2)
            )
            for second_order in (True, False):
                fast = maml_sine.adapt(lib, params, *support, 0.01, 1, create_graph=second_order)
                if not second_order:  # first-order MAML: θ' = θ - α·(a constant)
                    fast = [p - (p.detach() - f.detach()) for p, f in zip(params, fast)]
                loss = lib.nn.functional.mse_loss(maml_sine.forward(lib, fast, query[0]), query[1])
                outer[lib.__name__, second_order] = lib.autograd.grad(loss, params)
    for second_order in (True, False):
        assert_close(
            outer["torch", second_order],
            outer["tinytensor", second_order],
            f"outer gradient, second order {second_order}",
        )
    pairs = zip(outer["tinytensor", True], outer["tinytensor", False])
    difference = max(np.abs(numpy(a) - numpy(b)).max() for a, b in pairs)
    assert difference > 1e-4


# ---- Newton-CG ------------------------------------------------------------------------------


def test_newton_cg_trains_as_on_torch(torch):
    """5 Newton-CG steps (each a CG solve of up to 20 Hessian-vector products) and 20 steps of
    gradient descent: losses, damping, CG's product counts and the weights."""
    with float64(torch, tt):
        ref, got = (newton_cg.train(lib, 5, 0, gd_steps=20) for lib in (torch, tt))
    assert got["newton"]["passes"] == ref["newton"]["passes"]  # CG stopped at the same point
    for key in ("loss", "damping"):
        assert_close(ref["newton"][key], got["newton"][key], f"Newton-CG {key}")
    assert_close(ref["gd"], got["gd"], "gradient descent loss")
    assert_close(
        [ref["theta_newton"], ref["theta_gd"]],
        [got["theta_newton"], got["theta_gd"]],
        "θ after Newton-CG, after gradient descent",
    )


def test_hessian_vector_product_matches_torch_functional_hvp(torch):
    """The example's Hv (the gradient of g·v through g's graph) equals torch's
    autograd.functional.hvp, and tinytensor's own hvp."""
    results = {}
    with float64(torch, tt):
        for lib in (torch, tt):
            rng = np.random.default_rng(0)
            x, y = (newton_cg.as_tensor(lib, a) for a in newton_cg.make_data(rng, 32))
            theta = newton_cg.as_tensor(lib, newton_cg.init_theta(rng)).requires_grad_(True)
            v = newton_cg.as_tensor(lib, rng.standard_normal(theta.shape))
            loss = newton_cg.loss_fn(lib, theta, x, y)
            (g,) = lib.autograd.grad(loss, theta, create_graph=True)
            (hv,) = lib.autograd.grad((g * v).sum(), theta, retain_graph=True)
            _, functional = lib.autograd.functional.hvp(
                lambda t, lib=lib, x=x, y=y: newton_cg.loss_fn(lib, t, x, y), theta.detach(), v
            )
            results[lib.__name__] = [hv, functional]
    assert_close(results["torch"], results["tinytensor"], "Hv (double backward, functional.hvp)")
    assert_close([results["tinytensor"][0]], [results["tinytensor"][1]], "Hv vs functional.hvp")


def test_newton_cg_beats_gradient_descent_per_unit_of_work():
    """What the plot shows, on the default problem: after 20 Newton steps the loss is lower than
    gradient descent's after as many gradient-sized passes."""
    with float64(tt):
        result = newton_cg.train(tt, 20, 0)
    newton, gd = result["newton"], result["gd"]
    assert len(gd) == newton["passes"][-1]
    assert gd[-1] < 0.9 * result["initial"]  # gradient descent did make progress
    assert newton["loss"][-1] < 0.1 * gd[-1]


# ---- the scripts as a user runs them --------------------------------------------------------


@pytest.mark.parametrize(
    "module, flags, plot, printed",
    [
        (
            wgan_gp,
            ["--steps", "4", "--hidden", "16", "--batch", "32", "--log-every", "2"],
            "samples.png",
            "W estimate",
        ),
        (
            maml_sine,
            ["--steps", "4", "--meta-batch", "2", "--eval-tasks", "2", "--log-every", "2"],
            "adaptation.png",
            "meta-test MSE",
        ),
        (newton_cg, ["--steps", "3"], "loss.png", "Newton-CG"),
    ],
    ids=["wgan_gp", "maml_sine", "newton_cg"],
)
def test_main_writes_its_plot(module, flags, plot, printed, tmp_path, capsys):
    out = tmp_path / "run"
    before = tt.get_default_dtype()
    try:
        module.main([*flags, "--out", str(out)])
    finally:
        tt.set_default_dtype(before)  # newton_cg's main runs in float64
    text = capsys.readouterr().out
    assert printed in text and f"wrote {out / plot}" in text
    data = (out / plot).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
