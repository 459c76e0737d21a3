"""Tracing: build a model as a real `torch.nn.Module` and count its memory without a GPU.

`models`     compact module builders for the catalog families (decoder, encoder, ViT, ResNet, U-Net)
`emulation`  small TorchFunctionModes that make CPU kernels allocate as CUDA kernels do
`counter`    a TorchDispatchMode that counts live storages (allocated / freed) over time
`runner`     runs two steps of a scenario (or any module) under FakeTensorMode and reports
`sharded`    rank 0 of a ZeRO-2/3 plan: FSDP2 on a fake process group, in this process

Nothing here imports torch at import time; `vramplan.trace` is the public face.
"""
