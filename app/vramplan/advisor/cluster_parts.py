"""The cluster solver's data: the job (`Job`), a layout (`Layout`), a priced layout
(`Option`), where a published layout falls against the front (`where`) and the attributes
comm.transfers reads without a Scenario (`_Lite`). The search is cluster.py's."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..parallel import ParallelConfig

@dataclass(frozen=True)
class Job:
    model: str
    seq_len: int
    global_batch: int                   # sequences per step
    gpu: str
    precision: str = "bf16-mixed"
    optimizer: str = "adamw"
    max_gpus: int = 1024
    gpus_per_node: int | None = None    # GPUs in one scale-up domain (default: hwdb system)
    network_gbs: float | None = None    # GB/s per GPU between domains (default: hwdb system)
    token_budget: float = 1e12          # tokens the run trains on, for GPU-hours
    headroom: float = 0.05              # share of usable memory left free (limit_bytes wins)
    options: tuple = ("chunked-loss",)  # job-keeping kernels every layout gets (module doc)
    task: str = "train"                 # train | lora | qlora
    base: dict | None = None            # a scenario whose other keys the layouts keep
    limit_bytes: int | None = None      # bytes a GPU may use (instead of the headroom's)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len


@dataclass(frozen=True)
class Layout:
    data: int
    tensor: int
    pipeline: int
    context: int
    expert: int
    zero: int
    checkpointing: str
    micro: int
    accumulation: int
    virtual: int = 1                    # interleaved 1F1B chunks per pipeline rank

    @property
    def gpus(self) -> int:
        return self.data * self.tensor * self.pipeline * self.context

    def text(self) -> str:
        parts = [f"{self.gpus} x GPU:", f"TP {self.tensor}", f"PP {self.pipeline}",
                 f"CP {self.context}", f"DP {self.data}"]
        if self.expert > 1:
            parts.append(f"EP {self.expert}")
        if self.virtual > 1:
            parts.append(f"interleaved {self.virtual} chunks per stage")
        parts += [f"ZeRO-{self.zero}", f"checkpointing {self.checkpointing}",
                  f"micro-batch {self.micro} x {self.accumulation}"]
        return " ".join(parts[:1]) + " " + ", ".join(parts[1:])

    def to_dict(self) -> dict:
        return {**self.__dict__, "gpus": self.gpus}


@dataclass
class Option:
    """A priced layout; `estimate` and `fits` once checked."""
    layout: Layout
    compute_s: float
    bubble_s: float
    comm_s: float
    transfers: list
    step_s: float = 0.0
    gpu_hours: float = 0.0
    estimate: object = None
    device_used_bytes: int | None = None
    fits: bool | None = None
    rank: str | None = None
    notes: list = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return self.layout.gpus

    def to_dict(self) -> dict:
        return {"layout": self.layout.to_dict(), "text": self.layout.text(),
                "gpus": self.gpus, "step_time_s": round(self.step_s, 4),
                "compute_s": round(self.compute_s, 4), "bubble_s": round(self.bubble_s, 4),
                "exposed_communication_s": round(self.comm_s, 4),
                "gpu_hours": round(self.gpu_hours, 1), "fits": self.fits,
                "device_used_bytes": self.device_used_bytes, "deciding_rank": self.rank,
                "transfers": [t.to_dict() for t in self.transfers], "notes": self.notes}


class Bounds:
    """Lower bounds on a layout's device used less its model states (`rest`: activations,
    buffers, workspace), from layouts already estimated. Layouts that differ only in the data
    degree hold the same rest per rank. Within one stage shape (`group`: TP, PP, CP, EP, ZeRO
    stage, chunks and min(p, n) for n sequences per data rank), 1F1B holds min(p, n / m)
    micro-batches of m sequences in flight: min(m p, n) sequences, which does not fall as m
    grows; more recomputation (none, selective, full) holds less; and interleaving holds at
    least 1F1B's in-flight blocks on every stage (parallel.interleaved_inflight). So the rest
    of a layout with at most this micro-batch and at least this recomputation, of this
    layout's chunks or 1F1B's, bounds this layout's (tests/test_solver_bounds.py); the floor,
    micro-batch 1 with full recomputation, bounds its whole stage shape."""

    ORDER = ("none", "selective", "full")

    def __init__(self):
        self.rest: dict = {}

    @staticmethod
    def group(lay: Layout, virtual: int | None = None) -> tuple:
        n = lay.micro * lay.accumulation
        return (lay.tensor, lay.pipeline, lay.context, lay.expert, lay.zero,
                lay.virtual if virtual is None else virtual, min(lay.pipeline, n))

    @staticmethod
    def floor(lay: Layout) -> Layout:
        return Layout(lay.data, lay.tensor, lay.pipeline, lay.context, lay.expert, lay.zero,
                      "full", 1, lay.micro * lay.accumulation, lay.virtual)

    def record(self, lay: Layout, rest: float) -> None:
        book = self.rest.setdefault(self.group(lay), {})
        k = (lay.micro, self.ORDER.index(lay.checkpointing))
        book[k] = min(rest, book.get(k, rest))

    def floor_rest(self, lay: Layout) -> float | None:
        """`lower` of the layout's floor: the floors of its chunks' and of 1F1B's shape."""
        got = self.rest.get(self.group(lay))
        out = got.get((1, 2)) if got else None
        if lay.virtual != 1:
            got = self.rest.get(self.group(lay, 1))
            one = got.get((1, 2)) if got else None
            out = one if out is None else out if one is None else max(out, one)
        return out

    def lower(self, lay: Layout) -> float | None:
        """The largest rest known to bound this layout's, or None."""
        m, ck = lay.micro, self.ORDER.index(lay.checkpointing)
        got = [r for v in {1, lay.virtual} for (m2, ck2), r in
               self.rest.get(self.group(lay, v), {}).items() if m2 <= m and ck2 >= ck]
        return max(got, default=None)


def where(opt: Option, front: list[Option]) -> str:
    """Where a layout falls against the front: on it, or how far from the front's fastest
    step on as many GPUs or fewer (a layout the estimate says does not fit is off it)."""
    if opt.fits is False:
        return "off the front: the estimate says a rank does not fit"
    peers = [f for f in front if f.gpus <= opt.gpus]
    if not peers:
        return "fewer GPUs than any layout on the front"
    best = min(peers, key=lambda f: f.step_s)
    if opt.step_s <= best.step_s * 1.0001:
        return "on the front"
    return (f"{opt.step_s / best.step_s - 1:+.0%} step time vs the front's {best.gpus}-GPU "
            f"layout ({best.layout.text()})")


class _Lite:
    """The attributes comm.transfers reads, without building a Scenario (the search prices
    thousands of layouts)."""
    serving = None

    def __init__(self, job: Job, lay: Layout, lora=None):
        self.task, self.lora = job.task, lora
        self.parallel = ParallelConfig(lay.gpus, lay.data, lay.tensor, lay.pipeline,
                                       lay.context, lay.zero, lay.expert, lay.virtual)
        self.gradient_accumulation = lay.accumulation
        self.batch_size = lay.micro
        self.seq_len = job.seq_len
        self.checkpointing = lay.checkpointing
        self.options = ("sequence-parallel",) if lay.tensor > 1 else ()
        self._prec = job.precision

    def precision_for(self, _component: str) -> str:
        return self._prec
