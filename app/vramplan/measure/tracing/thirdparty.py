"""Third-party modules traced as people run them: torchvision, timm, diffusers, a user factory.

`job_for_source(source, scenario)` returns the zero-argument builder the runner calls inside
the fake mode (so parameters are fake tensors; nothing is downloaded). `source` is a dict:

  {"hf": {config.json}}                  transformers (hf.py) or, with `_class_name`, diffusers
  {"torchvision": "resnet50", "kwargs": {...}}   torchvision.models.get_model(weights=None)
  {"timm": "convnext_tiny", "kwargs": {...}}     timm.create_model(pretrained=False)
  {"diffusers": {config with _class_name}}       UNet2DConditionModel, DiT / PixArt / SD3 / Flux
                                                 transformers, AutoencoderKL (decode), and the
                                                 CLIP text encoder (transformers CLIPTextModel)
  {"module": "package.module:factory"}           factory() -> (module, inputs[, loss_fn])

Vision classifiers train with cross-entropy on `num_classes` labels; segmentation nets
(torchvision `fcn_*`, `deeplabv3_*`, `lraspp_*`) with per-pixel cross-entropy on `out`.
Diffusion modules run `forward` (one inference call, as a pipeline step does); `train` runs
the denoiser with an MSE loss on its output.

torchvision's CUDA-built PyPI wheel imports with the CPU torch through
`libs.ensure_torchvision` (its C++ ops are declared, `nms` gets a Python CPU kernel). Detectors
keep data-dependent numbers of proposals: they run on real CPU tensors (mode 'cpu').
"""
from __future__ import annotations

import importlib

import torch
import torch.nn.functional as F

from ...errors import ScenarioError, VramplanError
from .hf import hf_job, transformers
from .jobs import Job
from .libs import ensure_torchvision, require  # noqa: F401 (re-exported)

def _size(scn, default=224) -> tuple[int, int]:
    r = scn.resolution or default
    if isinstance(r, int):
        return r, r
    return int(r[-2]), int(r[-1])


def _train(scn) -> bool:
    if scn.task not in ("train", "forward"):
        raise ScenarioError("task", f"a third-party module is traced for train or forward; "
                                    f"not '{scn.task}'")
    return scn.task == "train"


def _job(model, inputs, loss, fwd, scn, note):
    train = _train(scn)
    prec = scn.precision_for("default")
    return Job(model, inputs, loss if train else fwd, scn.task, prec,
               scn.optimizer if train else "none", notes=[note])


def _vision_job(make, name, kwargs, scn, lib):
    train = _train(scn)
    classes = int(kwargs.get("num_classes", 1000))
    seg = any(name.startswith(p) for p in ("fcn_", "deeplabv3_", "lraspp_"))

    def build():
        model = make()
        if train and scn.checkpointing != "none":
            if not hasattr(model, "set_grad_checkpointing"):
                raise ScenarioError("checkpointing", f"{lib} {name} offers no checkpointing")
            model.set_grad_checkpointing(True)
        b, (h, w) = int(scn.batch_size), _size(scn)
        x = torch.randn(b, 3, h, w)
        if seg:
            y = torch.randint(0, classes, (b, h, w))
            loss = lambda net, x, y: F.cross_entropy(net(x)["out"], y)  # noqa: E731
            fwd = lambda net, x, y: net(x)["out"]  # noqa: E731
        else:
            y = torch.randint(0, classes, (b,))
            loss = lambda net, x, y: F.cross_entropy(net(x), y)  # noqa: E731
            fwd = lambda net, x, y: net(x)  # noqa: E731
        return _job(model, (x, y), loss, fwd, scn, f"{lib} {name} built with random weights")
    build.precision = scn.precision_for("default")
    return build


DETECTION = ("fasterrcnn_", "retinanet_", "fcos_", "maskrcnn_", "keypointrcnn_", "ssd")


def _detection_job(tv, name, kw, scn):
    """A torchvision detector's training step: images at the scenario's resolution (the
    transform's min/max size set to it, so nothing is resized), `boxes_per_image` random boxes
    per image. Proposal counts depend on data (NMS): it runs in mode 'cpu' (real tensors)."""
    _train(scn)
    n = int(kw.pop("boxes_per_image", 8))
    b, (h, w) = int(scn.batch_size), _size(scn, 512)
    kw.setdefault("weights_backbone", None)
    kw.update(min_size=min(h, w), max_size=max(h, w))

    def build():
        from torch._guards import active_fake_mode
        if active_fake_mode() is not None:
            raise VramplanError(f"torchvision {name}: detection keeps data-dependent numbers of "
                                "proposals (NMS), which fake tensors cannot hold; trace it "
                                "with mode 'cpu' at a small size")
        with torch.random.fork_rng(devices=[]):   # the same weights every run: they decide
            torch.manual_seed(0)                   # which proposals survive NMS, so the bytes
            model = tv.models.get_model(name, weights=None, **kw)
        g = torch.Generator().manual_seed(0)
        xy = torch.rand(b, n, 2, generator=g) * torch.tensor([w / 2, h / 2])
        wh = 16 + torch.rand(b, n, 2, generator=g) * torch.tensor([w / 2 - 16, h / 2 - 16])
        boxes = torch.cat([xy, xy + wh], -1)
        labels = torch.randint(1, int(kw.get("num_classes", 91)), (b, n), generator=g)
        x = torch.randn(b, 3, h, w, generator=g)

        def loss(net, x, boxes, labels):
            t = [{"boxes": boxes[i], "labels": labels[i]} for i in range(x.shape[0])]
            return sum(net(list(x), t).values())

        def fwd(net, x, boxes, labels):
            return net(list(x))
        return _job(model, (x, boxes, labels), loss, fwd, scn,
                    f"torchvision {name} with random weights, {n} random boxes per image")
    build.precision = scn.precision_for("default")
    return build


def torchvision_job(name: str, kwargs: dict, scn):
    tv = require("torchvision")
    kw = {k: v for k, v in kwargs.items() if k not in ("weights", "weights_backbone")}
    if name not in tv.models.list_models():
        raise VramplanError(f"torchvision {tv.__version__} has no model '{name}'")
    if name.startswith(DETECTION):
        return _detection_job(tv, name, kw, scn)
    if name.startswith(("fcn_", "deeplabv3_", "lraspp_")):
        kw.setdefault("weights_backbone", None)
        kw.setdefault("aux_loss", False)
    return _vision_job(lambda: _on_meta(lambda: tv.models.get_model(name, weights=None, **kw)),
                       name, kw, scn, "torchvision")


def timm_job(name: str, kwargs: dict, scn):
    timm = require("timm")
    if not timm.list_models(name):
        raise VramplanError(f"timm {timm.__version__} has no model '{name}'")
    return _vision_job(lambda: _on_meta(lambda: timm.create_model(name, pretrained=False,
                                                                  **kwargs)),
                       name, kwargs, scn, "timm")


def _on_meta(make):
    """Under a fake mode: build on the meta device outside it (timm's and torchvision's
    constructors call `.item()` on tensors, e.g. the stochastic-depth rates of ConvNeXt, which
    a fake tensor cannot answer),
    then give every parameter and buffer a fake storage of its shape (tied ones stay tied).
    Values are not used."""
    from torch._guards import active_fake_mode
    if active_fake_mode() is None:
        return make()
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily(), torch.device("meta"):
        model = make()
    memo = {}
    for mod in model.modules():
        for table, param in ((mod._parameters, True), (mod._buffers, False)):
            for n, t in list(table.items()):
                if t is None:
                    continue
                if id(t) not in memo:
                    e = torch.empty(t.shape, dtype=t.dtype, device="cpu")
                    memo[id(t)] = torch.nn.Parameter(e, t.requires_grad) if param else e
                table[n] = memo[id(t)]
    return model


# -- diffusers ---------------------------------------------------------------------------

DIFFUSERS_CLASSES = ("UNet2DConditionModel", "DiTTransformer2DModel", "Transformer2DModel",
                     "PixArtTransformer2DModel", "SD3Transformer2DModel",
                     "FluxTransformer2DModel", "AutoencoderKL", "CLIPTextModel")


def _diffusers_inputs(cls: str, c: dict, b: int, h: int, w: int, text_len: int):
    """The call a pipeline makes to one module: (kwargs for forward, output getter)."""
    lat = (h // 8, w // 8)
    t = torch.full((b,), 500.0)
    if cls == "UNet2DConditionModel":
        kw = {"sample": torch.randn(b, c.get("in_channels", 4), *lat), "timestep": t,
              "encoder_hidden_states": torch.randn(b, text_len, c.get("cross_attention_dim", 768))}
        if c.get("addition_embed_type") == "text_time":
            kw["added_cond_kwargs"] = {
                "text_embeds": torch.randn(b, c["projection_class_embeddings_input_dim"]
                                           - 6 * c.get("addition_time_embed_dim", 256)),
                "time_ids": torch.randn(b, 6)}
        return kw
    if cls in ("DiTTransformer2DModel", "Transformer2DModel"):
        return {"hidden_states": torch.randn(b, c.get("in_channels", 4), *lat), "timestep": t,
                "class_labels": torch.randint(0, c.get("num_embeds_ada_norm", 1000), (b,))}
    if cls == "PixArtTransformer2DModel":
        return {"hidden_states": torch.randn(b, c.get("in_channels", 4), *lat), "timestep": t,
                "encoder_hidden_states": torch.randn(b, text_len, c.get("caption_channels", 4096)),
                "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}}
    if cls == "SD3Transformer2DModel":
        return {"hidden_states": torch.randn(b, c.get("in_channels", 16), *lat), "timestep": t,
                "encoder_hidden_states": torch.randn(b, text_len, c.get("joint_attention_dim", 4096)),
                "pooled_projections": torch.randn(b, c.get("pooled_projection_dim", 2048))}
    if cls == "FluxTransformer2DModel":
        n = (h // 16) * (w // 16)
        kw = {"hidden_states": torch.randn(b, n, c.get("in_channels", 64)),
              "encoder_hidden_states": torch.randn(b, text_len, c.get("joint_attention_dim", 4096)),
              "pooled_projections": torch.randn(b, c.get("pooled_projection_dim", 768)),
              "timestep": t / 1000, "img_ids": torch.zeros(n, 3), "txt_ids": torch.zeros(text_len, 3)}
        if c.get("guidance_embeds"):
            kw["guidance"] = torch.full((b,), 3.5)
        return kw
    if cls == "AutoencoderKL":
        return {"z": torch.randn(b, c.get("latent_channels", 4), *lat)}
    return {"input_ids": torch.randint(0, c.get("vocab_size", 49408), (b, text_len))}


def _eager_attention(model) -> None:
    """attention 'eager': diffusers' plain AttnProcessor (the b x heads x s x s scores in
    memory) instead of its default AttnProcessor2_0 (SDPA on torch 2).
    `ModelMixin.set_default_attn_processor` sets it where every processor has the plain
    form, and raises ValueError otherwise (e.g. FLUX's FluxAttnProcessor2_0): then the
    model's own processors are traced and the scenario says eager, refused by name."""
    try:
        model.set_default_attn_processor()
    except (AttributeError, ValueError) as exc:
        raise ScenarioError("attention", f"'eager': {type(model).__name__} has no plain "
                            f"(non-SDPA) attention processor in diffusers ({exc})") from None


def diffusers_job(config: dict, scn):
    """A diffusers module (or the CLIP text encoder) from its config dict, one pipeline call."""
    cls = config.get("_class_name") if isinstance(config, dict) else None
    if cls not in DIFFUSERS_CLASSES:
        raise VramplanError(f"diffusers config: '_class_name' must be one of "
                            f"{', '.join(DIFFUSERS_CLASSES)}; got {str(cls)[:60]!r}")
    train = _train(scn)
    if cls == "CLIPTextModel":
        require("transformers")
    else:
        require("diffusers")
    cfg = {k: v for k, v in config.items() if not k.startswith("_")}
    b, (h, w) = int(scn.batch_size), _size(scn, 512)
    text_len = int(scn.text_len or 77)
    if train and cls in ("AutoencoderKL", "CLIPTextModel"):
        raise ScenarioError("task", f"{cls} is traced for forward (pipelines train the denoiser)")

    def build():
        if cls == "CLIPTextModel":
            tf = transformers()
            c = tf.CLIPTextConfig(**cfg)
            c._attn_implementation = "eager" if scn.attention == "eager" else "sdpa"
            model = tf.CLIPTextModel(c)
        else:
            import diffusers
            model = getattr(diffusers, cls).from_config(cfg)
            if scn.attention == "eager":
                _eager_attention(model)
        if train and scn.checkpointing == "full":
            model.enable_gradient_checkpointing()
        kw = _diffusers_inputs(cls, cfg, b, h, w, text_len)
        names = list(kw)
        vals = tuple(kw[k] for k in names if isinstance(kw[k], torch.Tensor))
        extra = {k: v for k, v in kw.items() if not isinstance(v, torch.Tensor)}
        tnames = [k for k in names if isinstance(kw[k], torch.Tensor)]

        def call(net, *xs):
            a = dict(zip(tnames, xs), **extra)
            if cls == "AutoencoderKL":
                return net.decode(a["z"]).sample
            out = net(**a, return_dict=False) if cls != "CLIPTextModel" else net(**a)
            return out[0] if isinstance(out, tuple) else out.last_hidden_state

        def loss(net, *xs):
            out = call(net, *xs)
            return F.mse_loss(out.float(), torch.zeros_like(out, dtype=torch.float32))
        return _job(model, vals, loss, call, scn, f"diffusers {cls} built from its config "
                                                  "(no weights)")
    build.precision = scn.precision_for("default")
    return build


# -- a user module -----------------------------------------------------------------------

def load_factory(spec: str):
    """`package.module:factory` -> the factory (imports the user's module: CLI only)."""
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise VramplanError(f"--module takes 'package.module:factory', got '{str(spec)[:80]}'")
    mod, name = spec.split(":")
    try:
        m = importlib.import_module(mod)
    except ImportError as exc:
        raise VramplanError(f"--module: cannot import '{mod[:80]}': {exc}") from None
    f = getattr(m, name, None)
    if not callable(f):
        raise VramplanError(f"--module: '{mod}' has no callable '{name[:80]}'")
    return f


def module_parts(spec: str, factory=None):
    """Call the factory of `spec`: (module, inputs tuple, loss_fn or None)."""
    out = (factory or load_factory(spec))()
    if isinstance(out, torch.nn.Module) or not isinstance(out, (tuple, list)) \
            or len(out) not in (2, 3) or not isinstance(out[0], torch.nn.Module):
        raise VramplanError(f"--module: {spec} must return (module, example_inputs) or "
                            "(module, example_inputs, loss_fn)")
    inputs = tuple(out[1]) if isinstance(out[1], (tuple, list)) else (out[1],)
    return out[0], inputs, out[2] if len(out) == 3 else None


def factory_job(spec: str, task: str | None = None, precision: str = "fp32",
                optimizer: str = "adamw"):
    """The builder for a user factory: called inside the fake mode, so its module and inputs
    are fake (nothing is allocated); train runs `loss_fn(module(*inputs))`."""
    factory = load_factory(spec)

    def build():
        model, inputs, loss_fn = module_parts(spec, factory)
        t = task or ("train" if loss_fn is not None else "forward")
        if t == "train" and loss_fn is None:
            raise VramplanError(f"--module {spec}: train needs a loss_fn (the factory's third "
                                "value); or --task forward")
        if t not in ("train", "forward"):
            raise VramplanError(f"--module: task train or forward, not '{t}'")
        if t == "train":
            lf = lambda net, *xs: loss_fn(net(*xs))  # noqa: E731
        else:
            lf = lambda net, *xs: net(*xs)  # noqa: E731
        return Job(model, inputs, lf, t, precision, optimizer if t == "train" else "none",
                   notes=[f"user module {spec}"])
    build.precision = precision
    return build


def job_for_source(source: dict, scn):
    """The builder for one traced run of `source` (see the module docstring) under `scn`."""
    if not isinstance(source, dict) or len(source.keys() - {"kwargs"}) != 1:
        raise VramplanError("trace source: one of 'hf', 'torchvision', 'timm', 'diffusers'")
    if "hf" in source:
        cfg = source["hf"]
        if isinstance(cfg, dict) and "_class_name" in cfg and "model_type" not in cfg:
            return diffusers_job(cfg, scn)
        return hf_job(cfg, scn)
    if "diffusers" in source:
        return diffusers_job(source["diffusers"], scn)
    kw = dict(source.get("kwargs") or {})
    if "torchvision" in source:
        return torchvision_job(source["torchvision"], kw, scn)
    if "timm" in source:
        return timm_job(source["timm"], kw, scn)
    raise VramplanError(f"trace source: unknown kind {sorted(source)}")
