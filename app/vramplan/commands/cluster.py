"""`vramplan cluster`: how many GPUs, and which layout, for a training job.

    vramplan cluster --model meta-llama/Llama-3.1-70B --seq-len 8192 --global-batch 512 \\
        --gpu nvidia-h100-sxm5-80gb [--max-gpus 1024] [--gpus-per-node 8] [--network-gbs 50]

Prints the Pareto front over GPUs and step time (advisor/cluster.py): per layout its GPUs,
data x tensor x pipeline x context (x expert), ZeRO stage, checkpointing, micro-batch x
accumulation, step time (compute, pipeline bubble, exposed communication), GPU-hours for the
token budget, the memory of the rank that decides the fit. JSON: {"job", "front", "network",
"limit_bytes", "efficiency", "estimates"}. Bad input: `vramplan: error: ...`, exit 2.
"""
from __future__ import annotations

from ..errors import VramplanError
from ..units import format_gbs, format_gib, gib_number
from ._output import add_format_arg, add_margin_arg, add_max_gpus_arg, dump_json, emit, table


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "cluster", help="how many GPUs and which layout a training job needs",
        description="The cluster solver: for a training job (model, global batch, sequence "
                    "length, GPU type) it searches data x tensor x pipeline x context (x "
                    "expert for MoE) parallel layouts, ZeRO stage, activation checkpointing "
                    "and micro-batch / accumulation that keep the global batch, respect head, "
                    "layer and expert divisibility and keep tensor parallelism inside one "
                    "NVLink domain, checks that every rank fits (the estimate's "
                    "memory limit: usable memory less --safety-margin, 0 by default), prices each by step time (compute at a stated "
                    "efficiency, the pipeline bubble, communication on its links) and prints "
                    "the Pareto front: fewest GPUs, fastest step, fewest GPU-hours.")
    p.add_argument("--model", required=True, metavar="ID", help="a transformer of the catalog")
    p.add_argument("--seq-len", type=int, required=True, metavar="N", help="tokens per sequence")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--global-batch", type=int, metavar="SEQS",
                   help="sequences per optimizer step, all GPUs together")
    g.add_argument("--tokens-per-step", type=int, metavar="TOKENS",
                   help="tokens per optimizer step (a multiple of --seq-len)")
    p.add_argument("--gpu", required=True, metavar="ID", help="the GPU type (`vramplan gpus`)")
    p.add_argument("--precision", default="bf16-mixed", help="default bf16-mixed")
    p.add_argument("--optimizer", default="adamw", help="default adamw")
    add_max_gpus_arg(p, 1024)
    p.add_argument("--gpus-per-node", type=int, metavar="N",
                   help="GPUs in one NVLink domain (default: the hwdb system of this GPU, "
                        "else 8)")
    p.add_argument("--network-gbs", type=float, metavar="GB/S",
                   help="network GB/s per GPU between nodes (default: the hwdb system's "
                        "ports, else 50)")
    p.add_argument("--token-budget", type=float, default=1e12, metavar="TOKENS",
                   help="tokens the run trains on, for GPU-hours (default 1e12)")
    add_margin_arg(p, "--safety-margin", "--headroom", dest="safety_margin",
                   default="0 (the limit is usable memory)")
    add_format_arg(p, ("table", "json"))
    p.set_defaults(func=run)


def job_of(a):
    from ..advisor.cluster import Job
    if a.tokens_per_step is not None:
        if a.seq_len < 1 or a.tokens_per_step % a.seq_len:
            raise VramplanError(f"--tokens-per-step {a.tokens_per_step} is not a multiple of "
                                f"--seq-len {a.seq_len}")
        batch = a.tokens_per_step // a.seq_len
    else:
        batch = a.global_batch
    for name, v in (("--seq-len", a.seq_len), ("--global-batch", batch),
                    ("--max-gpus", a.max_gpus)):
        if v is None or v < 1:
            raise VramplanError(f"{name} must be >= 1, got {v}")
    if a.token_budget <= 0:
        raise VramplanError("--token-budget must be > 0")
    from ..hardware import get_gpu
    from ..scenario.rules import memory_limit, read_safety_margin
    margin = read_safety_margin(a.safety_margin) if a.safety_margin is not None else 0
    limit = int(memory_limit(margin, get_gpu(a.gpu).usable_bytes))
    return Job(a.model, a.seq_len, batch, a.gpu, a.precision, a.optimizer, a.max_gpus,
               a.gpus_per_node, a.network_gbs, a.token_budget, limit_bytes=limit)


def run(a) -> int:
    from ..advisor.cluster import solve
    solver, front = solve(job_of(a))
    if a.format == "json":
        emit(dump_json(result(solver, front)))
    else:
        emit(render(solver, front))
    return 0


def result(solver, front) -> dict:
    j, net = solver.job, solver.net
    return {"job": {**j.__dict__, "options": list(j.options)},
            "gpu": solver.dev.id, "limit_bytes": solver.limit,
            "efficiency": solver.eff, "network": net.__dict__,
            "estimates": solver.estimates, "front": [o.to_dict() for o in front]}


def render(solver, front) -> str:
    j = solver.job
    head = (f"{j.model}: {j.global_batch} x {j.seq_len} tokens per step on "
            f"{solver.dev.name}; memory limit {format_gib(solver.limit)} per GPU (usable "
            f"{format_gib(solver.dev.usable_bytes)} - safety margin "
            f"{format_gib(solver.dev.usable_bytes - solver.limit)}); compute at "
            f"{solver.eff:.0%} of dense peak (costs.toml [step]); scale-up domain "
            f"{solver.net.domain} GPUs, {format_gbs(solver.net.scaleout_gbs)} per GPU between "
            f"domains")
    if not front:
        return head + f"\nno layout on up to {j.max_gpus} GPUs fits every rank"
    best = min(front, key=lambda o: o.gpu_hours)
    rows = [[o.gpus, _layout(o.layout), f"{o.step_s:.2f}", f"{o.compute_s:.2f}",
             f"{o.bubble_s:.2f}", f"{o.comm_s:.2f}", f"{o.gpu_hours:,.0f}" +
             (" *" if o is best else ""), gib_number(o.device_used_bytes), o.rank or ""]
            for o in front]
    hdr = ["GPUs", "layout", "step s", "compute", "bubble", "comm", "GPU-h", "used GiB", "rank"]
    foot = (f"GPU-hours for {j.token_budget:.3g} tokens; * fewest GPU-hours. comm: "
            "communication not hidden behind compute (data-parallel collectives overlap, "
            "tensor / context / pipeline / expert ones do not).")
    return "\n".join([head, "", table(rows, hdr, "rlrrrrrrl"), "", foot])


def _layout(lay) -> str:
    s = f"DP{lay.data} TP{lay.tensor} PP{lay.pipeline} CP{lay.context}"
    if lay.expert > 1:
        s += f" EP{lay.expert}"
    return (s + f" ZeRO-{lay.zero} {lay.checkpointing} ckpt, micro {lay.micro} x "
            f"{lay.accumulation}")
