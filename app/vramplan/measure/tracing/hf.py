"""Hugging Face `transformers` models built from a `config.json` dict, as people run them.

`hf_job(config, scenario)` returns the zero-argument builder the runner calls inside the fake
mode: `AutoConfig.for_model(model_type, **config)` then `AutoModelFor<Head>.from_config`, so
the parameters are fake tensors and no weight is downloaded. The head follows the family the
catalog's reader gives the config (`catalog.hf_config.arch_from_config`: the analytic estimate
reads the same config the same way):

  decoder          AutoModelForCausalLM, loss = `model(input_ids, labels=input_ids).loss`
  encoder          AutoModelForSequenceClassification (`num_labels`, default 2): the
                   BertForSequenceClassification head vramplan's own encoder trace builds
  encoder-decoder  AutoModelForSeq2SeqLM, `target_len` decoder tokens as labels (Whisper:
                   log-mel input_features of its 2 x max_source_positions frames)
  vision configs   AutoModelForImageClassification (vit, deit, beit, swin, convnext, resnet,
                   ...), pixel_values at the scenario's resolution

Attention: scenario `eager` -> "eager"; `sdpa` and `flash` -> "sdpa" (on CUDA the SDPA call
picks the flash kernel; the CUDA emulation keeps dropout inside the fused kernel). Full
checkpointing is `gradient_checkpointing_enable(use_reentrant=False)`, recomputing in the kernel
emulation (`recompute.context_fn`). MoE experts run with
transformers' `grouped_mm` implementation where the model offers it: the eager expert loop
indexes tokens by `nonzero()`, whose size depends on data a fake tensor does not have
(Llama 4 refuses the setting: its Llama4TextExperts are one bmm over every expert and token).
gpt-oss has no SDPA path (attention sinks): transformers builds it eager, and the CUDA
emulation runs the flash kernel with sinks its model card names (`linear_mixers.FlashSinks`);
Mamba2 and Gated DeltaNet layers run their CUDA kernels' emulation (`linear_mixers.py`).
A VLM with `images` runs whole (vlm.py: Qwen2-VL / 2.5-VL / 3-VL, Gemma 3): pixel values
through its tower, the features spliced in at the image tokens; the data-dependent integer
inputs (grid, token ids, M-RoPE positions, window order) are fake-tensor constants.

The config is plain data (parsed by `vramplan.safejson` at the edges); remote code is never
run (`trust_remote_code` is not passed; a `model_type` transformers does not know is refused).
torch and transformers are imported when this module is imported: import it lazily.
"""
from __future__ import annotations

import copy

import torch

from ...errors import ScenarioError, VramplanError
from .jobs import Job
from .lora import apply_lora
from .libs import ensure_torchvision, require

VISION_TYPES = ("vit", "deit", "beit", "swin", "swinv2", "convnext", "convnextv2", "resnet",
                "regnet", "efficientnet", "mobilenet_v2", "dinov2", "levit", "poolformer",
                "vit_hybrid", "dit", "data2vec-vision")
"""model_type values built with AutoModelForImageClassification"""
VISION_TOWERS = ("siglip_vision_model", "clip_vision_model")
"""a VLM's vision tower on its own (AutoModel: SiglipVisionModel, CLIPVisionModel), run
forward on pixel_values: its last hidden state is what the VLM's projector reads"""
BACKBONES = ("dinov2", "dinov2_with_registers", "dinov3_vit")
"""self-supervised backbones published without a classifier (facebook/dinov2-base's
architectures: ["Dinov2Model"]): a config without num_labels / id2label is built as the tower
(AutoModel: Dinov2Model, DINOv3ViTModel), one with them as the classifier"""


def transformers():
    ensure_torchvision()
    tf = require("transformers")
    tf.logging.set_verbosity_error()
    return tf


def _check(config) -> str:
    if not isinstance(config, dict):
        raise VramplanError(f"a Hugging Face config must be a JSON object, got "
                            f"{type(config).__name__}")
    mt = config.get("model_type")
    if not isinstance(mt, str) or not mt:
        raise VramplanError("config.json has no 'model_type' (a transformers config names its "
                            "model type; a diffusers config its '_class_name')")
    return mt


def hf_config(config: dict):
    """The transformers `PretrainedConfig` of a config.json dict (never remote code)."""
    mt = _check(config)
    tf = transformers()
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    if mt not in CONFIG_MAPPING:
        raise VramplanError(f"config.json: model_type '{mt}' is not in transformers "
                            f"{tf.__version__} (custom model code is never run: no "
                            f"trust_remote_code)")
    rest = {k: copy.deepcopy(v) for k, v in config.items()   # transformers rewrites nested
            if k not in ("model_type", "auto_map", "transformers_version", "architectures")}
    try:
        return tf.AutoConfig.for_model(mt, **rest)
    except (TypeError, ValueError, KeyError) as exc:
        raise VramplanError(f"config.json: transformers refuses this {mt} config: "
                            f"{str(exc).splitlines()[0][:200]}") from None


def kind_of(config: dict) -> str:
    """decoder / encoder / encoder-decoder (the catalog's reading of the config) or vision."""
    mt = _check(config)
    if mt in BACKBONES and "num_labels" not in config and "id2label" not in config:
        return "tower"
    if mt in VISION_TYPES:
        return "vision"
    if mt in VISION_TOWERS:
        return "tower"
    if isinstance(config.get("vision_config"), dict):   # a VLM (catalog/nested.py): its
        return "decoder"                                 # text decoder takes the tokens
    from ...catalog.hf_config import arch_from_config
    return arch_from_config(config).kind


def _size(scn, config) -> tuple[int, int]:
    r = scn.resolution or config.get("image_size") or 224
    if isinstance(r, int):
        return r, r
    return int(r[-2]), int(r[-1])


def build_model(config: dict, kind: str, attention: str = "sdpa", grouped: bool = True):
    """The transformers module for `config` with its task head (inside a fake mode: fake)."""
    tf = transformers()
    c = hf_config(config)
    c._attn_implementation = "eager" if attention == "eager" else "sdpa"
    if getattr(c, "use_cache", None) is not None:
        c.use_cache = False
    if kind == "encoder-decoder" and getattr(c, "decoder_start_token_id", None) is None:
        c.decoder_start_token_id = getattr(c, "pad_token_id", None) or 0   # T5: pad (0)
    if kind == "encoder-decoder" and getattr(c, "pad_token_id", None) is None:
        c.pad_token_id = 0
    if grouped and (getattr(c, "num_local_experts", None) or getattr(c, "num_experts", None)
                    or getattr(c, "n_routed_experts", None)):
        c._experts_implementation = "grouped_mm"
    auto = {"decoder": tf.AutoModelForCausalLM, "encoder": tf.AutoModelForSequenceClassification,
            "encoder-decoder": tf.AutoModelForSeq2SeqLM,
            "vision": tf.AutoModelForImageClassification, "tower": tf.AutoModel}[kind]
    if kind == "encoder-decoder" and config.get("model_type") == "whisper":
        auto = tf.AutoModelForSpeechSeq2Seq   # WhisperForConditionalGeneration
    if kind == "decoder" and isinstance(config.get("vision_config"), dict):
        auto = tf.AutoModelForImageTextToText   # a VLM: its towers built, fed text tokens
    if kind == "tower" or isinstance(config.get("vision_config"), dict) or \
            config.get("model_type") in BACKBONES:
        # SiglipPreTrainedModel._init_weights' lecun_normal_ and Dinov2PreTrainedModel's
        # trunc_normal_ read values (also in a VLM)
        from transformers.initialization import no_init_weights   # (data-dependent under
        with no_init_weights():                                  # fake tensors): no init
            model = auto.from_config(c, dtype=torch.get_default_dtype())
        model.tie_weights()   # no_init_weights skips post_init's tying (Gemma 3: tied)
        return model
    try:
        try:
            return auto.from_config(c, dtype=torch.get_default_dtype())  # the runner's dtype
        except ValueError as exc:
            if grouped and "experts implementation" in str(exc):   # Llama 4: its experts
                return build_model(config, kind, attention, grouped=False)   # are one bmm
            if c._attn_implementation != "sdpa" or "attention implementation" not in str(exc):
                raise
            c._attn_implementation = "eager"   # e.g. Gemma-2 (logit soft-capping): eager only
            return auto.from_config(c, dtype=torch.get_default_dtype())
    except ValueError as exc:
        raise VramplanError(f"config.json: transformers has no {auto.__name__[12:]} for "
                            f"model_type '{c.model_type}': {str(exc).splitlines()[0][:160]}") \
            from None


def _whisper_features(config: dict, scn, b: int):
    """Whisper's log-mel input: `num_mel_bins` x 2 max_source_positions frames (its two
    convolutions, the second with stride 2, give max_source_positions encoder positions;
    WhisperEncoder.forward refuses any other length), so seq_len must be those positions."""
    positions = int(config.get("max_source_positions") or 1500)
    if int(scn.seq_len or positions) != positions:
        raise ScenarioError("seq_len", f"Whisper's encoder takes exactly {positions} positions "
                                       f"(30 s of audio, {2 * positions} mel frames); "
                                       f"seq_len {scn.seq_len} cannot be traced")
    return torch.randn(b, int(config.get("num_mel_bins") or 80), 2 * positions)


def _inputs_and_losses(kind: str, config: dict, scn, model, b: int, vocab: int,
                       labels: int) -> tuple:
    """(random inputs, the training loss, the forward) of a model kind: images and labels,
    source and target ids, ids and class labels, or ids (a decoder's labels are its ids)."""
    if kind == "vision":
        h, w = _size(scn, config)
        classes = int(getattr(model.config, "num_labels", 2))
        inputs = (torch.randn(b, int(config.get("num_channels", 3)), h, w),
                  torch.randint(0, classes, (b,)))
        loss = lambda net, x, y: net(pixel_values=x, labels=y).loss  # noqa: E731
        fwd = lambda net, x, y: net(pixel_values=x).logits  # noqa: E731
    elif kind == "tower":
        h, w = _size(scn, config)
        inputs = (torch.randn(b, int(config.get("num_channels", 3)), h, w),)
        loss = None
        fwd = lambda net, x: net(pixel_values=x).last_hidden_state  # noqa: E731
    elif kind == "encoder-decoder" and config.get("model_type") == "whisper":
        inputs = (_whisper_features(config, scn, b),
                  torch.randint(0, vocab, (b, int(scn.target_len or 448))))
        loss = lambda net, x, y: net(input_features=x, labels=y).loss  # noqa: E731
        fwd = lambda net, x, y: net(input_features=x, decoder_input_ids=y).logits  # noqa: E731
    elif kind == "encoder-decoder":
        t = int(scn.target_len or scn.seq_len)
        inputs = (torch.randint(0, vocab, (b, int(scn.seq_len))),
                  torch.randint(0, vocab, (b, t)))
        loss = lambda net, x, y: net(input_ids=x, labels=y).loss  # noqa: E731
        fwd = lambda net, x, y: net(input_ids=x, decoder_input_ids=y).logits  # noqa: E731
    elif kind == "encoder":
        inputs = (torch.randint(0, vocab, (b, int(scn.seq_len))),
                  torch.randint(0, labels, (b,)))
        loss = lambda net, x, y: net(input_ids=x, labels=y).loss  # noqa: E731
        fwd = lambda net, x, y: net(input_ids=x).logits  # noqa: E731
    else:
        inputs = (torch.randint(0, vocab, (b, int(scn.seq_len))),)
        loss = lambda net, x: net(input_ids=x, labels=x).loss  # noqa: E731
        fwd = lambda net, x: net(input_ids=x).logits  # noqa: E731
    return inputs, loss, fwd


def hf_job(config: dict, scn):
    """The builder of one traced run of `config` under scenario `scn` (its task, batch,
    seq_len / target_len / resolution, precision, optimizer, attention, checkpointing, LoRA)."""
    kind = kind_of(config)
    task = scn.task
    if task not in ("train", "lora", "forward", "generate") or (
            task == "generate" and kind != "decoder"):
        raise ScenarioError("task", f"a Hugging Face model is traced for train, lora or "
                                    f"forward (generate: decoders); not '{task}'")
    if kind == "tower" and task != "forward":
        raise ScenarioError("task", f"a vision tower on its own ({config['model_type']}) has "
                                    f"no loss of its own: traced for forward, not '{task}'")
    if scn.checkpointing == "selective":
        raise ScenarioError("checkpointing", "transformers models offer none or full "
                                             "(gradient_checkpointing_enable); not selective")
    images = int(getattr(scn, "images", None) or 0)
    if images:
        from . import vlm
        vlm.check(config, scn)
    train = task in ("train", "lora")
    prec = scn.precision_for("default")
    b = int(scn.batch_size)
    vocab = int(config.get("vocab_size") or 1000)
    labels = int(config.get("num_labels") or 2)

    def build() -> Job:
        model = build_model(config, kind, scn.attention or "sdpa")
        if train and scn.checkpointing == "full":
            from .recompute import context_fn   # the recomputation in the kernel emulation too
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={
                "use_reentrant": False, "context_fn": context_fn})
        if task == "lora":
            lora = scn.lora
            for p in model.parameters():
                p.requires_grad_(False)
            if apply_lora(model, lora.rank, lora.alpha, lora.targets) == 0:
                raise ScenarioError("lora", f"no Linear named {', '.join(lora.targets)} in the "
                                            "traced model")
        gen = ({"hf": True, "new_tokens": int(scn.new_tokens)} if task == "generate"
               else None)
        if images:   # a VLM with its images: the whole model (vlm.py)
            inputs, names = vlm.inputs(config, scn, model)
            loss, fwd = vlm.calls(names)
            if gen:
                gen["prefill"] = vlm.prefill_kwargs(inputs, names)
        else:
            inputs, loss, fwd = _inputs_and_losses(kind, config, scn, model, b, vocab, labels)
        return Job(model, inputs, loss if train else fwd, task, prec,
                   scn.optimizer if train else "none", generate=gen,
                   context=vlm.constants if images else None, notes=[
                       f"transformers {transformers().__version__} "
                       f"{type(model).__name__} built from its config (no weights)"])
    build.precision = prec
    return build


def generate_steps(counter, model, ids, new_tokens: int, amp_ctx, prefill: dict | None = None):
    """Prefill and `new_tokens` decode steps as `model.generate` runs them (greedy, no_grad):
    the model builds its own cache (transformers 5.23 `DynamicCache(config=...)`: per-layer
    sliding-window, linear-attention and Mamba layers as the config says), each step appends
    to it; the logits of the last position only (`logits_to_keep=1`). `prefill`: a VLM's
    images and their kwargs, given to the prefill (vlm.prefill_kwargs)."""
    counter.phase = "prefill"
    with torch.no_grad(), amp_ctx():
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1, **(prefill or {}))
        cache, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        del out
        counter.phase = "decode"
        for _ in range(new_tokens):
            out = model(input_ids=nxt, past_key_values=cache, use_cache=True)
            nxt = out.logits[:, -1:].argmax(-1)
            del out
    del cache, nxt
