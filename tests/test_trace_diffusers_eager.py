"""attention 'eager' in a diffusers trace runs diffusers' plain AttnProcessor (the scores in
memory), not its default AttnProcessor2_0 (SDPA on torch 2): the branch was a no-op, so a
trace said eager and ran SDPA. A model with no plain processor is refused naming the key."""
import pytest

pytest.importorskip("torch")

from vramplan.errors import ScenarioError, UnavailableError  # noqa: E402


def _diffusers():
    from vramplan.measure.tracing.thirdparty import require
    try:
        return require("diffusers")
    except UnavailableError as exc:
        pytest.skip(str(exc))


def test_eager_sets_the_plain_processor():
    diffusers = _diffusers()
    from vramplan.measure.tracing.thirdparty import _eager_attention
    m = diffusers.UNet2DConditionModel(
        block_out_channels=(32, 64), layers_per_block=1, sample_size=8, attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32)
    assert {type(p).__name__ for p in m.attn_processors.values()} == {"AttnProcessor2_0"}
    _eager_attention(m)
    assert {type(p).__name__ for p in m.attn_processors.values()} == {"AttnProcessor"}


def test_a_model_without_a_plain_processor_is_refused_by_key():
    diffusers = _diffusers()
    from vramplan.measure.tracing.thirdparty import _eager_attention
    m = diffusers.FluxTransformer2DModel(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
        attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
        pooled_projection_dim=32, axes_dims_rope=(4, 6, 6))
    with pytest.raises(ScenarioError) as err:
        _eager_attention(m)
    assert err.value.key == "attention" and "FluxTransformer2DModel" in str(err.value)
