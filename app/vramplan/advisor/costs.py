"""What a change costs: extra compute as a share of the step, bytes it sends between GPUs and
over the host link with their time at the hardware database's link rates, accuracy risk,
whether it changes the job; each figure with its source (`data/costs.toml`).

Shares of a step are against the step's time: the estimate's roofline floor where the
workload counts FLOPs (compute floor / model FLOPs utilisation), else 6N (training), 4N (LoRA)
or 2N (inference) FLOPs per token for transformers (PaLM, Appendix B), else the memory floor
(bytes per step / achievable bandwidth). Communication is taken as not overlapped with
compute: an upper bound.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
RISKS = ("none", "low", "medium", "high")


@functools.lru_cache(maxsize=1)
def table() -> dict:
    return tomllib.loads((DATA / "costs.toml").read_text(encoding="utf-8"))


def entry(cid: str) -> dict:
    return table()["cost"][cid]


@dataclass(frozen=True)
class Cost:
    """The price of one change or of a plan (a sum of changes)."""
    compute_share: float = 0.0
    communication_bytes_per_step: int = 0
    communication_time_s: float = 0.0
    link: str | None = None
    host_bytes_per_step: int = 0
    host_time_s: float = 0.0
    host_link: str | None = None
    accuracy_risk: str = "none"
    changes_job: bool = False
    gpus: int = 1
    step_time_s: float | None = None
    sources: tuple = ()
    notes: tuple = ()
    transfers: tuple = ()         # comm.Transfer.to_dict() of each collective: bytes, link, time
    bubble_share: float = 0.0     # pipeline bubble (p - 1) / m: idle step time, not more FLOPs
    one_off: str = ""             # a cost paid once per job, not per step (compile time)
    uncertain: bool = False       # the saving depends on the stack (costs.toml `uncertain`)

    @property
    def time_share(self) -> float:
        """Communication and host-transfer time as a share of the step."""
        t = self.communication_time_s + self.host_time_s
        if not t:
            return 0.0
        return t / self.step_time_s if self.step_time_s else t

    @property
    def total_step_s(self) -> float | None:
        """Seconds of one step with the change: the step's compute stretched by the extra
        compute, plus the communication and host-transfer time not hidden behind it."""
        if not self.step_time_s:
            return None
        return self.step_time_s * (1 + self.compute_share + self.bubble_share) + \
            self.communication_time_s + self.host_time_s

    @property
    def gpu_seconds(self) -> float | None:
        """GPUs x seconds per step: what adding GPUs costs (None where the step is unknown)."""
        t = self.total_step_s
        return None if t is None else self.gpus * t

    @property
    def score(self) -> float:
        """One number to rank by: compute + time shares + the ranking weights of risk and
        of a change to the job (`[ranking]` of costs.toml, a stated policy)."""
        rk = table()["ranking"]
        return (self.compute_share + self.bubble_share + self.time_share
                + rk["risk_weight"][self.accuracy_risk]
                + (rk["job_change_weight"] if self.changes_job else 0.0)
                + (rk["uncertain_weight"] if self.uncertain else 0.0))

    def __add__(self, other: "Cost") -> "Cost":
        risk = max(self.accuracy_risk, other.accuracy_risk, key=RISKS.index)
        return Cost(self.compute_share + other.compute_share,
                    self.communication_bytes_per_step + other.communication_bytes_per_step,
                    self.communication_time_s + other.communication_time_s,
                    self.link or other.link, self.host_bytes_per_step + other.host_bytes_per_step,
                    self.host_time_s + other.host_time_s, self.host_link or other.host_link,
                    risk, self.changes_job or other.changes_job, max(self.gpus, other.gpus),
                    self.step_time_s or other.step_time_s,
                    tuple(dict.fromkeys(self.sources + other.sources)),
                    tuple(dict.fromkeys(self.notes + other.notes)),
                    self.transfers + other.transfers,
                    self.bubble_share + other.bubble_share,
                    "; ".join(x for x in (self.one_off, other.one_off) if x),
                    self.uncertain or other.uncertain)

    def to_dict(self) -> dict:
        return {"compute_share": round(self.compute_share, 4),
                "bubble_share": round(self.bubble_share, 4),
                "communication_bytes_per_step": int(self.communication_bytes_per_step),
                "communication_time_s": round(self.communication_time_s, 6), "link": self.link,
                "host_bytes_per_step": int(self.host_bytes_per_step),
                "host_time_s": round(self.host_time_s, 6), "host_link": self.host_link,
                "step_time_s": None if self.step_time_s is None else round(self.step_time_s, 6),
                "time_share": round(self.time_share, 4), "accuracy_risk": self.accuracy_risk,
                "gpu_seconds_per_step": None if self.gpu_seconds is None else
                round(self.gpu_seconds, 6),
                "changes_job": self.changes_job, "gpus": self.gpus,
                "score": round(self.score, 4), "notes": list(self.notes),
                "one_off": self.one_off, "uncertain": self.uncertain,
                "transfers": [dict(t) for t in self.transfers]}


def of(cid: str, **kw) -> Cost:
    """The Cost of a costs.toml entry (its compute share, risk and source), with `kw` set."""
    e = entry(cid)
    c = Cost(compute_share=float(e.get("compute_share", 0.0)),
             accuracy_risk=e.get("accuracy_risk", "none"),
             changes_job=cid == "job-change", sources=(f"{cid}: {e['source']}",),
             notes=((e["note"],) if e.get("note") else ()),
             one_off=e.get("one_off", ""), uncertain=bool(e.get("uncertain", False)))
    return replace(c, **kw) if kw else c


# ---- links (their rates: hardware/links.py) ----------------------------------------------------

def transfer_time(nbytes: float, gbs: float | None) -> float:
    return float(nbytes) / (gbs * 1e9) if gbs else 0.0


# ---- the step --------------------------------------------------------------------------------

def _peak_tflops(dev, precision: str) -> float | None:
    tp = getattr(dev, "throughput", None) or {}
    if isinstance(tp, tuple):
        tp = dict(tp)
    want = {"fp32": ("fp32",), "tf32": ("tf32", "fp32")}.get(precision, ("bf16", "fp16"))
    for k in want + ("fp16", "fp32"):
        if tp.get(k):
            return float(tp[k])
    return None


def arch_of(spec):
    """The TransformerArch of a transformer model, else None."""
    return spec.arch if getattr(spec, "is_transformer", False) else None


def model_flops(sc, spec) -> float | None:
    """FLOPs of one step of a transformer plan, all GPUs together (PaLM Appendix B: 6N + 12LHQT
    per token training, 4N for LoRA's frozen base, 2N at inference); None for others."""
    arch = arch_of(spec)
    if arch is None or sc.task in ("serve", "load", "generate"):
        return None
    tokens = int(sc.batch_size) * int(sc.seq_len or 1) * int(sc.gradient_accumulation or 1)
    tokens *= max(1, sc.parallel.data * sc.parallel.context)
    per = {"train": 6, "lora": 4, "qlora": 4}.get(sc.task, 2)
    attn = 12 * arch.total_layers * arch.hidden * int(sc.seq_len or 1) * (per / 6)
    return float((per * arch.param_count() + attn) * tokens)


def step_time(est, spec=None) -> float | None:
    """Seconds of one step of the plan per GPU (see the module doc); None if unknown."""
    bw, sc, dev = est.bandwidth, est.scenario, est.gpu
    mfu = float(table()["step"]["mfu"])
    cf = bw.get("compute_floor_s")
    mem = bw.get("memory_floor_s", bw.get("min_step_time_s"))
    comp = cf / mfu if cf else None
    if comp is None:
        flops = model_flops(sc, spec)
        peak = _peak_tflops(dev, sc.precision_for("default"))
        if flops and peak:
            comp = flops / max(1, sc.parallel.gpus) / (peak * 1e12 * mfu)
    t = max(mem or 0.0, comp or 0.0)
    return t or None


@dataclass
class Sizes:
    """Bytes a change moves, read from the plan's one-GPU estimate: model-state totals and the
    saved activations of a micro-batch."""
    weights: int = 0
    gradients: int = 0
    activations: int = 0
    weight16: int = 0
    extra: dict = field(default_factory=dict)


def sizes_of(est1) -> Sizes:
    """Totals from the estimate of the plan on one GPU (no sharding)."""
    ph = est1.footprint.phases or {"peak": est1.footprint.components}
    get = lambda k: max((int(p.get(k, 0)) for p in ph.values()), default=0)  # noqa: E731
    w = get("weights")
    prec = est1.scenario.precision_for("default")
    w16 = w // 2 if prec in ("fp32", "tf32", "fp16-mixed", "bf16-mixed") else w
    return Sizes(weights=w, gradients=get("gradients"), activations=get("activations"),
                 weight16=w16)
