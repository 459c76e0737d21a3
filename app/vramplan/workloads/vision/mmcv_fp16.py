"""mmcv's fp16 hook under DDP (mmdetection v2.0, mmsegmentation v0.x): the bytes that stay fp32.

What the source does (mmdetection v2.0, May 2020, on PyTorch 1.3-1.5):
* `mmdet/apis/train.py` `train_detector` wraps the fp32 model in `MMDistributedDataParallel` (a
  `torch.nn.parallel.DistributedDataParallel`, mmcv 0.5 `mmcv/parallel/distributed.py`) and only
  then registers `Fp16OptimizerHook`, whose `before_run` (`mmdet/core/fp16/hooks.py`; the same in
  mmcv 1.1 `mmcv/runner/hooks/optimizer.py`, used by mmsegmentation) deep-copies the optimizer's
  param groups (the fp32 master) and calls `wrap_fp16_model` -> `model.half()`.
* DDP's reducer (torch 1.x `Reducer::initialize_buckets`) sized its flat gradient buckets with the
  parameters' dtype at construction: fp32, 4 bytes per trainable parameter, held for the run.
  `model.half()` replaces `param.data`; `Variable::set_data` resets a parameter's gradient
  accumulator when the dtype changes, so the reducer's hooks (on the old accumulators) never fire:
  DDP reduces nothing and its buckets stay allocated in fp32 (not the fp16 the gradients are).
  Checked on torch 2.13 with gloo: after `.half()` the comm hook is never called, the bucket dtype
  stays float32.
* That is why the hook takes `distributed=True`: `allreduce_grads(fp32_weights, coalesce=True,
  bucket_size_mb=-1)` (`_allreduce_coalesced`) flattens every fp32 gradient into one tensor
  (`_flatten_dense_tensors`, 4 bytes per trainable parameter) at the step, freed before
  `optimizer.step()`.
* `auto_fp16(apply_to=('img',))` on `BaseDetector.forward` (`mmdet/core/fp16/decorators.py`): the
  pipeline's fp32 image stays referenced by the caller while `new_kwargs` holds its fp16 cast for
  the whole forward (`footprint.build` keeps both).

Checked and not changing the peak: BatchNorm stays fp16 in and out (`patch_norm_fp32` patches
the forward only for GroupNorm or torch < 1.3, so cuDNN batch norm takes the fp16 input with fp32
weights and saves the fp16 input); the anchor assigner's IoU (`bbox_overlaps`) runs on fp32
anchors and ground truth in both precisions; `SingleRoIExtractor.forward`'s
`force_fp32(apply_to=('feats',), out_fp16=True)` fp32 copies of the four FPN maps live only
inside that call (RoIAlign saves the rois, not the features), after the RPN loss's IoU peak.
"""
from __future__ import annotations

MASTER_GRAD_BYTES = 4      # fp32: the dtype DDP's buckets and the hook's flat copy are made in

NOTE = ("mmcv fp16 hook under DDP: DDP wrapped the fp32 model before Fp16OptimizerHook cast it "
        "to fp16, so its gradient buckets stay fp32 (4 B per trainable parameter) and never fire; "
        "the hook's allreduce_grads flattens the fp32 gradients into one more fp32 copy at the "
        "step (workloads/vision/mmcv_fp16.py)")


def applies(framework: str, master_bytes: int, ddp: bool) -> bool:
    """The mmcv fp16 hook (an fp32 master copy kept by the hook) on a DDP run."""
    return framework == "mmcv" and master_bytes > 0 and ddp


def bucket_bytes(trainable: int) -> int:
    """DDP's idle buckets: the fp32 size of every trainable parameter."""
    return MASTER_GRAD_BYTES * trainable


def step_flat_bytes(trainable: int) -> int:
    """`_allreduce_coalesced` with bucket_size_mb=-1: one flat fp32 copy of all gradients."""
    return MASTER_GRAD_BYTES * trainable
