"""The cluster solver: how many GPUs, and which layout, for a training job.

A job is a model, a global batch (sequences per step), a sequence length and a GPU type
(optional: the most GPUs, GPUs per scale-up domain, the network rate per GPU). The solver
searches data x tensor x pipeline x context (x expert for MoE) x interleaved chunks x ZeRO
stage x checkpointing x micro-batch / accumulation layouts that keep the global batch (data x micro-batch x
accumulation = global batch), respect divisibility (attention and KV heads by TP, layers by
PP, experts by EP, the sequence by 2 x CP for the load-balanced ring) and topology (TP
inside one scale-up domain), and fit every rank (`estimate`'s worst rank, under the limit).

Price of a layout (`price`): step time = compute x (1 + (p - 1) / (v m)) (the 1F1B bubble,
interleaved over v chunks: Narayanan et al. 2021 s.2.2, m micro-batches, p stages) + the communication not hidden behind compute
(comm.py: its bytes, links and times); compute = model FLOPs (PaLM Appendix B: 6N + 12LHS
per token; MoE: active parameters) x the recomputation's extra forward work / (GPUs x dense
peak x efficiency), efficiency from costs.toml [step] (its source). GPU-hours for a token
budget = GPUs x step time x budget / tokens per step.

Every layout is a scenario with its parallel keys set (parallel.expert, .virtual_stages), so
the estimate holds each rank's expert states, dispatch buffers and in-flight chunks itself.

Search: the layouts are priced arithmetically (no estimate), those whose sharded model
states alone exceed the limit are dropped, then GPU counts are walked from the fewest up;
within a count, layouts in order of step time (priced lazily, `_by_step`) are estimated
until one fits, and only a layout faster than every smaller count's is worth estimating.
Before a layout is estimated, its stage shape's floor (micro-batch 1, full recomputation:
the least memory of the shape, `Bounds`) is; a floor more than 3% over the limit rules out
the whole shape, at this data degree and every other, unpriced. The answer is the Pareto
front over GPUs and step time (it holds the fewest-GPU-hours layout).

Every layout gets the job's `options` (default the chunked cross-entropy: torchtitan's
ChunkedLossWrapper, the same loss without whole fp32 logits) and, with TP, sequence
parallelism and the vocab-parallel loss (Megatron-LM's default with TP; torchtitan
loss_parallel): kernels and layouts that keep the job.
"""
from __future__ import annotations

import heapq
from dataclasses import replace

from ..errors import ScenarioError, VramplanError
from ..estimate import estimate
from ..parallel import bubble_share
from ..scenario.variants import with_field
from . import comm
from . import costs as C
from .cluster_parts import Bounds, Job, Layout, Option, _Lite, where

__all__ = ["Job", "Layout", "Option", "Solver", "solve", "where", "MICRO", "TP", "CP"]

CKPT_EXTRA = {"none": 0.0, "full": 1 / 3}       # extra compute of a step (costs.toml)
MICRO = (1, 2, 4, 8, 16)
CKPTS = ("none", "selective", "full")     # most memory first
TP = (1, 2, 4, 8, 16, 32, 64, 72)
CP = (1, 2, 4, 8, 16, 32)
MAX_PP = 32
VIRTUAL = (2, 4)        # interleaved chunks per stage searched (Megatron's runs use 2-8)
MAX_ESTIMATES = 3000


class Solver:
    """The job's fixed facts (model, GPU, links, totals) and the search over layouts."""

    def __init__(self, job: Job, scaleup_gbs: float | None = None):
        from ..catalog import get_model
        from ..hardware import get_gpu
        self.job = job
        self.dev = get_gpu(job.gpu)
        self.spec = get_model(job.model)
        self.arch = C.arch_of(self.spec)
        if self.arch is None:
            raise VramplanError(f"model: the cluster solver plans transformer training; "
                                f"{job.model!r} is a {self.spec.family} model")
        if job.global_batch < 1 or job.seq_len < 1 or job.max_gpus < 1:
            raise VramplanError("global batch, seq_len and the most GPUs must be >= 1")
        if job.task not in ("train", "lora", "qlora"):
            raise VramplanError(f"task: the cluster solver plans training, not {job.task!r}")
        if not 0 <= job.headroom < 1:
            raise VramplanError(f"headroom: {job.headroom} is not a share in [0, 1)")
        self.limit = int(job.limit_bytes if job.limit_bytes is not None else
                         self.dev.usable_bytes * (1 - job.headroom))
        net = comm.network(self.dev, job.gpus_per_node, job.network_gbs)
        self.net = replace(net, scaleup_gbs=scaleup_gbs) if scaleup_gbs else net
        one = self.scenario(Layout(1, 1, 1, 1, 1, 0, "none", 1, 1))
        comps = estimate(one, self.dev, with_max_batch=False).components
        self.states = {k: int(comps.get(k, 0)) for k in
                       ("weights", "gradients", "optimizer_states")}
        self.model = comm.model_bytes(one, self.spec, C.Sizes())
        self.lora = one.lora
        peak = C._peak_tflops(self.dev, "bf16" if job.precision.startswith("bf16") else
                              job.precision.split("-")[0])
        if not peak:
            raise VramplanError(f"gpu: no dense throughput for {self.dev.id} in the hardware "
                                "database; the solver cannot time a step")
        self.eff = float(C.table()["step"]["mfu"])
        self.rate = peak * 1e12 * self.eff
        self.estimates = 0
        self._flops: dict = {}
        self._comm: dict = {}      # (transfers, seconds) by what they read (`_transfers`)
        self.bounds = Bounds()     # device used less model states, by stage shape
        self._done: dict = {}      # (estimate, why refused) by layout
        self._templates: dict = {}  # a floor's scenario by its layout less the micro-batch
        self._same: dict = {}      # checkpointing -> the template path gave the pass's scenario
        self._states: dict = {}    # states_bound by (d, t, p, c, e, zero)
        self._busies: dict = {}    # busy by (gpus, checkpointing, pp, micro-batches, chunks)
        self._chunks: dict = {}    # _virtuals by (pp, micro-batches)

    # ---- the layout as a scenario -------------------------------------------------------
    def scenario(self, lay: Layout):
        from ..scenario import Scenario
        j = self.job
        d = {**(j.base or {}), "model": j.model, "task": j.task, "batch_size": lay.micro,
             "seq_len": j.seq_len, "precision": j.precision, "optimizer": j.optimizer,
             "gradient_accumulation": lay.accumulation, "checkpointing": lay.checkpointing,
             "gpu": self.dev.id, "parallel": {"gpus": lay.gpus, "data": lay.data,
                                              "tensor": lay.tensor, "pipeline": lay.pipeline,
                                              "context": lay.context, "zero": lay.zero,
                                              "expert": lay.expert,
                                              "virtual_stages": lay.virtual}}
        d.pop("offload", None)
        opts = set(j.options) | ({"sequence-parallel", "loss-parallel"} if lay.tensor > 1
                                 else set())
        if opts:
            d["options"] = sorted(opts)
        return Scenario.from_dict(d)

    def _scenario(self, lay: Layout):
        """`scenario(lay)` from its floor's scenario (one pass per data x tensor x pipeline x
        context x expert x ZeRO x chunks) with the micro-batch, the accumulation and the
        checkpointing changed alone (scenario.variants.with_field: none is derived from for
        training). Checked against the pass once per checkpointing mode; the pass wherever
        that differs or the floor is refused (tests/test_solver_bounds.py)."""
        tk = (lay.data, lay.tensor, lay.pipeline, lay.context, lay.expert, lay.zero,
              lay.virtual)
        if tk not in self._templates:
            try:
                self._templates[tk] = self.scenario(Bounds.floor(lay))
            except ScenarioError:
                self._templates[tk] = None
        sc = self._templates[tk]
        if sc is None or self._same.get(lay.checkpointing) is False:
            return self.scenario(lay)
        for k, v in (("batch_size", lay.micro), ("gradient_accumulation", lay.accumulation),
                     ("checkpointing", lay.checkpointing)):
            sc = with_field(sc, k, v)
        if lay.checkpointing not in self._same:
            slow = self.scenario(lay)
            self._same[lay.checkpointing] = slow == sc
            return slow
        return sc

    # ---- price --------------------------------------------------------------------------
    def flops(self, ckpt: str) -> float:
        if ckpt not in self._flops:
            self._flops[ckpt] = self._model_flops(ckpt)
        return self._flops[ckpt]

    def _model_flops(self, ckpt: str) -> float:
        a, s = self.arch, self.job.seq_len
        n = a.active_param_count()
        k = 6 if self.job.task == "train" else 4       # LoRA: no frozen weight gradients
        per_token = k * n + 2 * k * a.total_layers * a.hidden * s
        extra = CKPT_EXTRA.get(ckpt)
        if extra is None:                   # selective: the attention core's forward again
            extra = 4 * s / (3 * (24 * a.hidden + 4 * s))
        return per_token * self.job.tokens_per_step * (1 + extra)

    def busy(self, lay: Layout) -> tuple[float, float]:
        """(compute, pipeline bubble) seconds of a step: bubble (p - 1) / (v m) of compute
        (parallel.bubble_share)."""
        compute = self.flops(lay.checkpointing) / (lay.gpus * self.rate)
        return compute, compute * bubble_share(lay.pipeline, lay.accumulation, lay.virtual)

    def price(self, lay: Layout, busy: tuple[float, float] | None = None) -> Option:
        compute, bubble = busy or self.busy(lay)
        data_ts, data = self._transfers(lay, True)
        other_ts, other = self._transfers(lay, False)
        exposed = other + max(0.0, data - compute)       # comm.exposed_time
        step = compute + bubble + exposed
        hours = lay.gpus * step * self.job.token_budget / self.job.tokens_per_step / 3600
        return Option(lay, compute, bubble, exposed, data_ts + other_ts, step, hours)

    def _transfers(self, lay: Layout, data: bool) -> tuple[list, float]:
        """(transfers, their seconds): the ZeRO / DDP ones (`data`) cached by what they read
        (data, tensor, pipeline, context, ZeRO stage, accumulation), the others by the layout
        less its ZeRO stage and micro-batch (comm.data_transfers / layout_transfers: tensor,
        pipeline, context and expert bytes go as micro-batch x accumulation, the sequences
        of a data rank, which the data degree fixes)."""
        if data:
            key = (True, lay.data, lay.tensor, lay.pipeline, lay.context, lay.zero,
                   lay.accumulation)
        else:
            key = (False, lay.data, lay.tensor, lay.pipeline, lay.context, lay.expert,
                   lay.checkpointing == "full", lay.virtual)  # m x a: the data rank's batch
        got = self._comm.get(key)
        if got is None:
            sc = _Lite(self.job, lay, self.lora)
            ts = (comm.data_transfers(sc, self.dev, self.net, self.model) if data else
                  comm.layout_transfers(sc, self.spec, self.dev, self.net, expert=lay.expert))
            got = self._comm[key] = (ts, sum(x.time_s for x in ts))
        return got

    # ---- memory ---------------------------------------------------------------------------
    def states_bound(self, lay: Layout) -> float:
        """Model-state bytes per rank (a lower bound on device used): each component / TP x
        PP, / the ZeRO shard group where the stage shards it, else its routed experts / EP
        (the estimate's rule: training.py _zero_count). Cached by the dimensions it reads."""
        key = (lay.data, lay.tensor, lay.pipeline, lay.context, lay.expert, lay.zero)
        got = self._states.get(key)
        if got is None:
            got = self._states[key] = self._states_bound(lay)
        return got

    def _states_bound(self, lay: Layout) -> float:
        shard = lay.data * lay.context
        div = {"weights": 3, "gradients": 2, "optimizer_states": 1}
        ef = self._expert_share()
        out = 0.0
        for k, v in self.states.items():
            v = v / (lay.tensor * lay.pipeline)
            if lay.zero >= div[k]:
                v /= shard
            elif lay.expert > 1:
                v *= 1 - ef * (1 - 1 / lay.expert)
            out += v
        return out

    def _expert_share(self) -> float:
        a = self.arch
        if not a.is_moe:
            return 0.0
        routed = a.moe_layers * a.num_experts * a._mlp(a.moe_ffn, bias=False)
        return routed / a.param_count()

    def predicted_over(self, lay: Layout) -> bool:
        """A layout of the same stage shape with at most this micro-batch and at least this
        recomputation already estimated (`Bounds`), plus this layout's model states, is more
        than 3% over the limit: not estimated."""
        rest = self.bounds.lower(lay)
        return rest is not None and rest + self.states_bound(lay) > 1.03 * self.limit

    def group_over(self, lay: Layout) -> bool:
        """`predicted_over` of the layout's floor (micro-batch 1, full recomputation): no
        layout of the stage shape is worth pricing or estimating."""
        rest = self.bounds.floor_rest(lay)      # (the floor's model states are lay's)
        return rest is not None and rest + self.states_bound(lay) > 1.03 * self.limit

    def floor_over(self, lay: Layout) -> bool:
        """`group_over`, estimating the floor first where no bound on it is known: one
        estimate for a stage shape instead of one per micro-batch x checkpointing."""
        floor = Bounds.floor(lay)
        if floor != lay and self.bounds.floor_rest(lay) is None:
            self._estimate(floor)
        return self.group_over(lay)

    def _estimate(self, lay: Layout):
        """(estimate, None), or (None, why) where the scenario pass refuses the layout; each
        layout estimated once, and recorded as a bound for its stage shape (`Bounds`)."""
        if lay not in self._done:
            self.estimates += 1
            try:
                est = estimate(self._scenario(lay), self.dev, with_max_batch=False)
            except ScenarioError as exc:
                self._done[lay] = (None, str(exc))
            else:
                self._done[lay] = (est, None)
                self.bounds.record(lay, int(est.device_used_bytes) - self.states_bound(lay))
        return self._done[lay]

    def check(self, opt: Option) -> bool:
        """Estimate the layout (its scenario sets parallel.expert: the estimate's own expert
        states, dispatch buffers and all-to-all bytes), unless a bound says it cannot fit."""
        if self.predicted_over(opt.layout) or self.floor_over(opt.layout):
            opt.fits = False
            return False
        est, why = self._estimate(opt.layout)
        if est is None:
            opt.fits, opt.notes = False, [why]
            return False
        used = int(est.device_used_bytes)
        ranks = est.to_dict().get("ranks") or []
        worst = max(ranks, key=lambda r: r.get("device_used_bytes", 0), default=None)
        opt.estimate, opt.device_used_bytes = est, used
        opt.rank = worst.get("rank") if worst else "every rank alike"
        opt.fits = used <= self.limit
        return opt.fits

    # ---- the search -----------------------------------------------------------------------
    def structures(self) -> dict[int, list[tuple]]:
        """(data, tensor, pipeline, context, expert) by GPU count, divisibility and topology
        respected (module doc)."""
        a, j = self.arch, self.job
        tps = [t for t in TP if t <= self.net.domain and a.heads % t == 0 and
               (a.kv_heads % t == 0 or t % a.kv_heads == 0)]
        cps = [c for c in CP if c == 1 or (j.seq_len % (2 * c) == 0 and j.seq_len // c >= 1024)]
        pps = [p for p in range(1, min(MAX_PP, a.total_layers) + 1) if a.total_layers % p == 0]
        dps = [d for d in range(1, min(j.global_batch, j.max_gpus) + 1) if j.global_batch % d == 0]
        out: dict[int, list[tuple]] = {}
        for t in tps:
            for c in cps:
                for p in pps:
                    for d in dps:
                        n = t * c * p * d
                        if n > j.max_gpus:
                            break
                        for e in self._experts(d * c):
                            out.setdefault(n, []).append((d, t, p, c, e))
        return out

    def _experts(self, group: int) -> list[int]:
        a = self.arch
        if not a.is_moe:
            return [1]
        return [e for e in range(1, min(group, a.num_experts) + 1)
                if a.num_experts % e == 0 and group % e == 0]

    def _candidates(self, struct: tuple, best: float):
        """(Layout fields, busy) of the structure's layouts (micro-batch x chunks x ZeRO stage
        x checkpointing, keeping the global batch) worth pricing: model states under the limit
        (checked per ZeRO stage), the stage shape's floor not over it (`group_over`, per ZeRO
        stage and chunks), compute + bubble under `best`."""
        d, t, p, c, e = struct
        per, n = self.job.global_batch // d, d * t * p * c
        zs = tuple(z for z in ((1, 2, 3) if d * c > 1 else (0,))
                   if self.states_bound(Layout(d, t, p, c, e, z, "full", 1, per)) <= self.limit)
        over: dict = {}
        for m in (m for m in MICRO if zs and per % m == 0):
            a = per // m
            for v in self._virtuals(p, a):
                for z in zs:
                    if (z, v) not in over:
                        over[z, v] = self.group_over(Layout(d, t, p, c, e, z, "full", 1, per, v))
                    if over[z, v]:
                        continue
                    for ck in CKPTS:
                        busy = self._busies.get((n, ck, p, a, v))
                        if busy is None:
                            lay = Layout(d, t, p, c, e, z, ck, m, a, v)
                            busy = self._busies[n, ck, p, a, v] = self.busy(lay)
                        if busy[0] + busy[1] < best:
                            yield (d, t, p, c, e, z, ck, m, a, v), busy

    def _virtuals(self, p: int, m: int) -> tuple[int, ...]:
        """Interleaved chunks per stage the rules allow (scenario/parallel_keys.py: v divides
        the layers per stage, micro-batches a multiple of pp): 1 and VIRTUAL's."""
        got = self._chunks.get((p, m))
        if got is None:
            per_stage = self.arch.total_layers // p
            got = self._chunks[p, m] = (1,) + tuple(
                v for v in VIRTUAL if p > 1 and m % p == 0 and per_stage % v == 0)
        return got

    def solve(self) -> list[Option]:
        """The Pareto front over GPUs and step time, fewest GPUs first (module doc)."""
        front: list[Option] = []
        best = float("inf")
        floor = self.flops("none") / self.rate
        for n, structs in sorted(self.structures().items()):
            if floor / n >= best:
                continue
            for opt in self._by_step(structs, best):
                if opt.step_s >= best or self.estimates >= MAX_ESTIMATES:
                    break
                if self.check(opt):
                    front.append(opt)
                    best = opt.step_s
                    break
        return front

    def _by_step(self, structs: list[tuple], best: float):
        """The layouts of one GPU count in order of step time (ties: enumeration order),
        priced lazily: compute + bubble (`busy`) bounds a step from below, so a layout is
        priced (its communication) only once the next cheapest priced one is not faster than
        that bound. Same order as pricing all and sorting, with a fraction of the pricing."""
        cands = []
        for s in structs:
            for fields, busy in self._candidates(s, best):
                cands.append((busy[0] + busy[1], len(cands), fields, busy))
        cands.sort()                    # (bound, enumeration order): unique
        heap: list = []
        i = 0
        while heap or i < len(cands):
            while i < len(cands) and (not heap or cands[i][0] <= heap[0][0]):
                _, k, fields, busy = cands[i]
                i += 1
                lay = Layout(*fields)
                if self.group_over(lay):        # a floor estimated since: not worth pricing
                    continue
                opt = self.price(lay, busy)
                heapq.heappush(heap, (opt.step_s, k, opt))
            if heap:
                yield heapq.heappop(heap)[2]

    def evaluate(self, lay: Layout) -> Option:
        """A given layout (a published one): priced and estimated."""
        opt = self.price(lay)
        self.check(opt)
        return opt


def solve(job: Job, **kw) -> tuple[Solver, list[Option]]:
    s = Solver(job, **kw)
    return s, s.solve()
