"""Communication per step, from the layout: which collective each parallel dimension runs, the
bytes each GPU sends for it, the link it runs on and the time at that link's rate.

Per GPU and per step (ga micro-batches), ring collectives over a group of g ranks send
(g - 1) / g of the tensor (reduce-scatter, all-gather) or twice that (all-reduce; Patarasuk &
Yuan 2009):
- ZeRO-3 / FSDP full shard: every sharded parameter, frozen ones included, is all-gathered in
  forward and again in backward for each micro-batch (FSDP reshard_after_forward, DeepSpeed
  stage 3), in the compute dtype; trainable gradients are reduce-scattered per micro-batch.
- ZeRO-2: gradients reduce-scattered per micro-batch, updated 16-bit parameters all-gathered
  once per step; ZeRO-1: the same with one reduce-scatter per step; no ZeRO (DDP): one
  all-reduce of the gradients per step (no_sync over the accumulation).
- Tensor parallel: per layer 2 all-reduces of b x s x h in forward and 2 in backward (Megatron,
  Shoeybi et al. 2019 s.3), 2 more when full recomputation re-runs the forward; sequence
  parallel replaces each by a reduce-scatter + all-gather of the same bytes (Korthikanti
  et al. 2022 s.4.2.2).
- Pipeline: activations (b x s x h, / t with sequence parallelism) sent to the next stage in
  forward and their gradients back in backward, per micro-batch; interleaved (v virtual
  stages) v times per micro-batch (each of a rank's v chunks sends; Narayanan et al. 2021
  s.2.2: "the amount of communication also increases by v").
- Context parallel (ring attention): each rank passes its K and V blocks c - 1 times per layer
  in forward; backward passes K, V and their gradients (2x) (Liu et al. 2023).
- Expert parallel: per MoE layer, tokens all-to-all to their top-k experts and back, forward
  and backward (4 all-to-alls; Lepikhin et al. 2020, GShard s.2).
Links: the group's ranks are numbered with tensor innermost, then context, expert within data,
then data, pipeline outermost (Megatron-LM's default rank order 'tp-cp-ep-dp-pp'); a group
whose ranks stay within one scale-up domain runs on it, else at most the scale-out network's
rate per GPU. Rates: `comm_links` below and hardware/links.py.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ..hardware import links as L
from . import costs as C


@dataclass(frozen=True)
class Link:
    name: str
    gbs: float | None          # GB/s per GPU, one direction
    source: str = ""


@dataclass(frozen=True)
class Network:
    """Where the scale-up domain ends and what the network between domains carries."""
    domain: int                # GPUs in one scale-up (NVLink) domain / one node
    scaleout_gbs: float        # GB/s per GPU between domains
    source: str
    scaleup_gbs: float | None = None   # a stated scale-up rate instead of the device's


@dataclass(frozen=True)
class Transfer:
    """One collective of the step: what, how many bytes per GPU, on which link, how long."""
    what: str
    collective: str
    nbytes: int
    link: Link
    dim: str                   # data | tensor | pipeline | context | expert | host

    @property
    def time_s(self) -> float:
        return C.transfer_time(self.nbytes, self.link.gbs)

    def to_dict(self) -> dict:
        return {"what": self.what, "collective": self.collective, "bytes": int(self.nbytes),
                "link": self.link.name, "link_gbs": self.link.gbs,
                "time_s": round(self.time_s, 6), "dimension": self.dim}


# ---- links -----------------------------------------------------------------------------------

def _system_of(dev):
    from ..hardware import default_db
    for s in default_db().systems:
        if s.gpu == getattr(dev, "id", None):
            return s
    return None


def _scaleout_gbs(system) -> float | None:
    """GB/s per GPU of a system's scale-out ports ('8x 400 Gb/s ...' over its GPUs)."""
    m = re.search(r"(\d+)\s*x\s*(\d+)\s*Gb", str(getattr(system, "scaleout", "") or ""))
    if not m:
        return None
    return int(m.group(1)) * int(m.group(2)) / 8 / max(1, system.gpus_per_node)


def network(dev, gpus_per_node: int | None = None, network_gbs: float | None = None) -> Network:
    """The scale-up domain and the per-GPU network rate: given, else the hwdb system built
    from this GPU (systems.toml: its GPU count is one NVLink domain, its scale-out ports), else
    the stated defaults of hardware/links.py."""
    sysm = _system_of(dev)
    src = []
    dom = gpus_per_node
    if dom is None and sysm is not None:
        dom, _ = sysm.gpu_count, src.append(f"scale-up domain of {sysm.id} (hwdb systems.toml)")
    if dom is None:
        dom, _ = L.GPUS_PER_NODE, src.append(L.GPUS_PER_NODE_SOURCE)
    out = network_gbs
    if out is None and sysm is not None:
        out = _scaleout_gbs(sysm)
        if out:
            src.append(f"{sysm.scaleout} over {sysm.gpus_per_node} GPUs ({sysm.id})")
    if out is None:
        out, _ = L.SCALEOUT_GBS_PER_GPU, src.append(L.SCALEOUT_SOURCE)
    return Network(int(dom), float(out), "; ".join(src) or "given")


def host_link(dev) -> Link:
    """The GPU's link to its host (PCIe generation x lanes, or NVLink-C2C)."""
    gbs, name = L.host_link(dev)
    source = L.C2C_SOURCE if name == "NVLink-C2C" else L.PCIE_SOURCE
    return Link(name or "host link (unknown rate)", gbs, source)


def peer_capable(dev) -> bool:
    """Whether the cards can do PCIe peer-to-peer (GeForce cannot: hardware/links.py)."""
    marks = L.NO_P2P_NAMES
    return not any(m.lower() in str(getattr(dev, "name", "")).lower() for m in marks)


def _bridged(name: str) -> int | None:
    if "bridge" not in name.lower():
        return None
    nums = [int(x) for x in re.findall(r"(\d+)(?:-way| GPUs|- or)", name)]
    return max(nums) if nums else 2


def intra_link(dev, n: int, scaleup_gbs: float | None = None) -> Link:
    """The link a group of n GPUs within one node uses: the scale-up link (a bridge joins only
    as many GPUs as it names), else PCIe peer to peer, else (GeForce) through host memory."""
    ic = getattr(dev, "interconnect", None) or {}
    up, name = ic.get("scaleup_gbs_per_direction"), str(ic.get("scaleup", ""))
    if scaleup_gbs:
        up, name = scaleup_gbs, f"{name or 'scale-up link'} at {scaleup_gbs:g} GB/s (stated)"
    bridge = _bridged(name)
    if up and (bridge is None or n <= bridge):
        return Link(name.split("(")[0].strip() or "scale-up link", float(up),
                    "hwdb interconnect.scaleup_gbs_per_direction")
    pcie = host_link(dev)
    if pcie.gbs is None:
        return Link("unknown link", None, "no link rate in the hardware database")
    if peer_capable(dev):
        return Link(f"{pcie.name} (peer to peer)", pcie.gbs, pcie.source)
    share = L.HOST_STAGED_SHARE
    return Link(f"{pcie.name} through host memory (no peer-to-peer on this card)",
                pcie.gbs * share, f"{L.NO_P2P_SOURCE}; {L.HOST_STAGED_SOURCE}")


@functools.lru_cache(maxsize=4096)
def group_link(dev, net: Network, size: int, span: int) -> Link | None:
    """The link of a group of `size` ranks spread over `span` consecutive ranks."""
    if size <= 1:
        return None
    inner = intra_link(dev, min(size, net.domain), net.scaleup_gbs)
    if span <= net.domain:
        return inner
    gbs = min(inner.gbs, net.scaleout_gbs) if inner.gbs else net.scaleout_gbs
    return Link(f"{inner.name} within a node, {net.scaleout_gbs:g} GB/s per GPU between "
                "nodes", gbs, f"{inner.source}; {net.source}")


def peer_link(dev, n: int) -> tuple[float | None, str | None]:
    """(GB/s, name) of a ring over n GPUs of this kind (data-parallel group of n)."""
    lk = group_link(dev, network(dev), n, n)
    return (lk.gbs, lk.name) if lk else (None, None)


# ---- what the layout moves -------------------------------------------------------------------

SIXTEEN = ("bf16-mixed", "fp16-mixed", "bf16", "fp16")


def _grad_bytes_per_param(prec: str) -> int:
    """Gradients are reduced in fp32 under mixed precision (torchtitan's default
    mixed_precision_reduce = float32; Megatron-LM accumulate_allreduce_grads_in_fp32), in the
    parameter dtype otherwise."""
    return 2 if prec in ("bf16", "fp16") else 4


def trainable_params(sc, arch) -> int:
    """Parameters that get gradients: all for training, the adapters for LoRA / QLoRA."""
    if sc.task == "train":
        return arch.param_count()
    from ..workloads.transformer.lora import lora_modules
    targets = sc.lora.targets if sc.lora else ("q_proj", "v_proj")
    rank = int(sc.lora.rank) if sc.lora else 8
    _, mats = lora_modules(arch, targets)
    return sum((i + o) * rank for i, o in mats) * arch.total_layers


def model_bytes(sc, spec, sizes) -> tuple[int, int]:
    """(bytes of every parameter in the compute dtype: what ZeRO-3 gathers, bytes of the
    trainable gradients as reduced), whole model, from the architecture where there is one
    (a quantised base is gathered as stored: the one-GPU estimate's weights)."""
    prec = sc.precision_for("default")
    arch = C.arch_of(spec)
    if arch is None:
        return int(sizes.weight16), int(sizes.gradients)
    n = arch.param_count()
    pb = 2 if prec in SIXTEEN else 4 if prec in ("fp32", "tf32") else None
    params = n * pb if pb else int(sizes.weights)
    if sc.task not in ("train", "lora", "qlora"):
        return params, 0
    return params, trainable_params(sc, arch) * _grad_bytes_per_param(prec)


def _data(sc, params, grads, dev, net) -> list[Transfer]:
    p, ga = sc.parallel, int(sc.gradient_accumulation or 1)
    g, mp = p.shard_group, max(1, p.tensor * p.pipeline)
    if g <= 1 or sc.task not in ("train", "lora", "qlora"):
        return []
    lk = group_link(dev, net, g, p.tensor * p.context * p.data)
    share = (g - 1) / g
    prec = sc.precision_for("default")
    updated = grads // _grad_bytes_per_param(prec) * (2 if prec in SIXTEEN else 4)
    if p.zero >= 3:
        return [Transfer("ZeRO-3 / FSDP all-gather of every parameter (frozen ones included) in "
                         "forward and again in backward, per micro-batch", "all-gather",
                         int(2 * share * params / mp * ga), lk, "data"),
                Transfer("reduce-scatter of the trainable gradients per micro-batch",
                         "reduce-scatter", int(share * grads / mp * ga), lk, "data")]
    if p.zero >= 1:
        n = ga if p.zero == 2 else 1
        what = "per micro-batch" if p.zero == 2 else "once per step"
        return [Transfer(f"ZeRO-{p.zero} reduce-scatter of the gradients {what}",
                         "reduce-scatter", int(share * grads / mp * n), lk, "data"),
                Transfer("all-gather of the updated parameters once per step", "all-gather",
                         int(share * updated / mp), lk, "data")]
    return [Transfer("data-parallel all-reduce of the gradients once per step", "all-reduce",
                     int(2 * share * grads / mp), lk, "data")]


def _act_bytes(sc, arch) -> tuple[float, int, float]:
    """(tokens of one micro-batch on one rank, bytes per element, layers per stage)."""
    p = sc.parallel
    pb = 4 if sc.precision_for("default") in ("fp32", "tf32") else 2
    tokens = int(sc.batch_size) * int(sc.seq_len or 1) / max(1, p.context)
    if sc.task == "serve" and sc.serving is not None:
        tokens = sc.serving.max_num_seqs             # one decode step
    return tokens, pb, arch.total_layers / max(1, p.pipeline)


def transfers(sc, spec, dev, sizes, net: Network | None = None, expert: int | None = None,
              model: tuple[int, int] | None = None) -> list[Transfer]:
    """Every collective of one step of the plan's layout, per GPU (module doc); `model`:
    (parameter, gradient) bytes if already known (model_bytes); `expert`: the layout's
    parallel.expert unless given."""
    net = net or network(dev)
    params, grads = model or model_bytes(sc, spec, sizes)
    return _data(sc, params, grads, dev, net) + layout_transfers(sc, spec, dev, net, expert)


def data_transfers(sc, dev, net: Network, model: tuple[int, int]) -> list[Transfer]:
    """The data-parallel (ZeRO / DDP) collectives of `transfers`: they read the data, tensor,
    pipeline and context degrees, the ZeRO stage and the accumulation only."""
    return _data(sc, *model, dev, net)


def layout_transfers(sc, spec, dev, net: Network, expert: int | None = None) -> list[Transfer]:
    """The tensor, pipeline, context and expert collectives of `transfers` (not the ZeRO
    stage's)."""
    out: list[Transfer] = []
    arch = C.arch_of(spec)
    if arch is None:
        return out
    p, ga = sc.parallel, int(sc.gradient_accumulation or 1)
    expert = getattr(p, "expert", 1) if expert is None else expert
    v = getattr(p, "virtual_stages", 1)   # interleaved: each micro-batch crosses v x the stages
    training = sc.task in ("train", "lora", "qlora")
    tokens, pb, layers = _act_bytes(sc, arch)
    act = tokens * arch.hidden * pb
    sp = "sequence-parallel" in sc.options
    t, c = p.tensor, p.context
    if t > 1:
        n = (4 + (2 if sc.checkpointing == "full" else 0)) if training else 2
        what = ("reduce-scatter + all-gather" if sp else "all-reduce") + \
            f" of the activations, {n} per layer"
        out.append(Transfer(f"tensor parallel: {what}", "all-reduce", int(
            n * layers * 2 * (t - 1) / t * act * ga), group_link(dev, net, t, t), "tensor"))
    if p.pipeline > 1:
        span = 2 * t * c * p.data
        out.append(Transfer("pipeline: activations to the next stage" +
                            (" and their gradients back" if training else "") +
                            ", per micro-batch" + (f", {v} chunks per rank" if v > 1 else ""),
                            "send/recv",
                            int((2 if training else 1) * act / (t if sp else 1) * ga * v),
                            group_link(dev, net, 2, span), "pipeline"))
    if c > 1:
        kv = 2 * max(1, arch.kv_heads // t) * arch.head_dim * pb
        out.append(Transfer("context parallel: K and V blocks around the ring, every layer" +
                            (" (backward: K, V and their gradients)" if training else ""),
                            "send/recv", int((3 if training else 1) * layers * tokens * kv *
                                             (c - 1) * ga), group_link(dev, net, c, t * c),
                            "context"))
    if expert > 1 and arch.is_moe:
        moe = arch.moe_layers / max(1, p.pipeline)
        n = 4 if training else 2
        out.append(Transfer(f"expert parallel: tokens all-to-all to their {arch.experts_per_token}"
                            " experts and back" + (", forward and backward" if training else ""),
                            "all-to-all", int(n * moe * tokens * arch.experts_per_token *
                                              arch.hidden * pb * (expert - 1) / expert * ga),
                            group_link(dev, net, expert, t * c * expert), "expert"))
    return out


def total(ts: list[Transfer]) -> tuple[int, float, str | None]:
    """(bytes, seconds, the link that takes the most time) of a list of transfers (each
    transfer names its own link)."""
    busy = max((x for x in ts if x.link and x.nbytes), key=lambda x: (x.time_s, x.nbytes),
               default=None)
    return (int(sum(x.nbytes for x in ts)), float(sum(x.time_s for x in ts)),
            busy.link.name if busy else None)


def exposed_time(ts: list[Transfer], compute_s: float) -> float:
    """Communication time not hidden behind compute: the data-parallel collectives overlap
    the forward and backward (DDP gradient buckets, Li et al. 2020, arXiv:2006.15704 s.3.2.3;
    FSDP prefetches the next all-gather), the tensor, context, pipeline and expert ones sit
    on the critical path (an upper bound for them)."""
    data = sum(x.time_s for x in ts if x.dim == "data")
    rest = sum(x.time_s for x in ts if x.dim != "data")
    return rest + max(0.0, data - compute_s)
