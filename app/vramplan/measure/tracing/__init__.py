"""Tracing: build a model as a real `torch.nn.Module` and count its memory without a GPU.

`transformer`  decoder / encoder modules built from a catalog `TransformerArch`
`vision`       ViT, ResNet, U-Net modules built from their config keys
`lora`         PEFT-like LoRA adapters on the targeted Linears
`recompute`    activation checkpointing with the kernel emulation inside the recomputation
`jobs`         a Scenario (or any module) -> the Job one traced run does
`emulation`    small TorchFunctionModes that make CPU kernels allocate as CUDA kernels do
`counter`      a TorchDispatchMode that counts live storages (allocated / freed) over time
`allocator`    the CUDA caching allocator replayed over the allocation log (reserved bytes)
`runner`       runs two steps of a Job under FakeTensorMode (or real tensors) and counts
`sharded`      rank 0 of a ZeRO-2/3 plan: FSDP2 on a fake process group, in this process
`tensor_parallel`  DTensor tensor / sequence / loss parallel (Megatron-style SP linears, embedding)
`pipeline`     one pipeline stage's slice and its 1F1B schedule, emulated in this process
`plan`         rank 0 of a tensor / pipeline / FSDP x TP plan (the three above combined)

These modules import torch at import time: only the measuring functions import them, inside
the functions (`vramplan.measure.trace` and `vramplan.measure.live` are the public faces).
"""
