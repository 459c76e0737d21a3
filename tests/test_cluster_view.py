"""The page's 'GPUs needed' view (issue 20.10): the cluster solver's front for a training plan
that does not fit, each layout applied with one click and fitting when re-estimated."""
import pytest

pytest.importorskip("ipywidgets")

PRETRAIN = {"model": "meta-llama/Llama-3.1-70B", "task": "train", "batch_size": 1,
            "seq_len": 8192, "precision": "bf16-mixed", "gpu": "nvidia-h100-sxm5-80gb"}


def test_gpus_needed_view_lists_the_front_and_applies_a_layout(new_app):
    app = new_app(lazy_chart=False)
    app.state.apply(PRETRAIN)
    assert not app.estimate.fits
    view = app.cluster
    assert view.layout.display == "" and view.front
    assert "GPUs needed" in view.card.children[0].value
    assert "GPU-hours per billion tokens" in view.value
    gpus = [o.gpus for o in view.front]
    assert gpus == sorted(gpus) and gpus[0] <= 32            # the done-when: <= 32
    view.buttons[0].click()
    assert app.scenario.parallel.gpus == gpus[0] and app.estimate.fits
    assert app.scenario.batch_size * app.scenario.gradient_accumulation * \
        app.scenario.parallel.data == 1                        # the same global batch


def test_gpus_needed_view_is_hidden_for_a_plan_that_fits_or_does_not_train(new_app):
    app = new_app(lazy_chart=False)
    app.state.apply({"model": "gpt2", "task": "train", "gpu": "nvidia-h100-sxm5-80gb"})
    assert app.estimate.fits and app.cluster.layout.display == "none"
    app.state.apply({**PRETRAIN, "task": "generate"})
    assert app.cluster.layout.display == "none"
