"""Measurement: what a plan really takes, to check the estimate and feed it back as data.

`trace`        trace(scenario) / trace_module(module, ...): the model as a real torch module, two
               steps under fake tensors on the CPU, live bytes counted (no GPU needed)
`live`         probe() / monitor() through NVML; measure(scenario), bandwidth(), max_batch(),
               leak_check() on a CUDA device; `live.distributed` per rank under torchrun
`calibration`  measured / estimated ratios per GPU and software, stored (SQLite) and applied
`buildable`    the Scenario and ModelSpec every measurement builds from (shared by the above)
`tracing`      the torch code (modules, jobs, runner, counter, allocator model, CUDA kernel
               emulation, FSDP2 sharding): imported only inside the measuring functions

Trace and live return `vramplan.result.MemoryReport`s (source "trace" / "measure"), the estimate's
shape. Importing this package, `trace`, `live` or `calibration` imports neither torch nor pynvml.

    from vramplan.measure import trace, live, calibration
"""
