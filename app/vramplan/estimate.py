"""Scenario + GPU -> Estimate: components at the peak, the three peak figures, fit, max batch,
bandwidth. The one function the CLI, sweeps and the UI call (kept well under 10 ms)."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import overhead, timing
from .hardware import traits_of
from .result import MemoryReport
from .errors import ScenarioError
from .units import counted
from .scenario import rules
from .scenario.variants import Variants
from .workloads.base import Footprint
from .workloads.dispatch import footprint as workload_footprint

MAX_BATCH_CAP = 1 << 20


@dataclass
class Estimate(MemoryReport):
    """The analytic MemoryReport (source "estimate"), with the workload's footprint."""

    footprint: Footprint | None = None
    notes: list = field(default_factory=list)
    max_context: int | None = None
    """generate / serve: the longest context that fits (`longest_context`); None otherwise"""
    limit: dict = field(default_factory=dict)
    """the one memory limit (`memory_limit`): usable_bytes, safety_margin, safety_margin_bytes,
    limit_bytes; fits, headroom_bytes and max_batch_size compare device_used with limit_bytes"""
    ranks: list = field(default_factory=list)
    """each distinct rank (pipeline stages): {"rank", "peak_phase", "components",
    "peak_allocated_bytes", "device_used_bytes"}; per_gpu is the worst"""

    def to_dict(self) -> dict:
        """Exactly the JSON of SCENARIO.md, plus peak_phase, phases, notes and source."""
        self.sections = {
            "peak_phase": self.footprint.peak_phase,
            "phases": {k: dict(v) for k, v in self.footprint.phases.items()},
            "notes": list(self.notes)}
        if self.ranks:
            self.sections["ranks"] = list(self.ranks)
        if self.max_context is not None:   # generate / serve (`longest_context`)
            self.sections["max_context"] = int(self.max_context)
        if self.limit:
            self.sections["memory_limit"] = dict(self.limit)
        if self.footprint.serving:  # the engine's start-up check (workloads/transformer/engine)
            self.sections["serving"] = dict(self.footprint.serving)
        if self.footprint.stack:   # the stack named and its mechanisms (workloads/dispatch)
            self.sections["stack"] = dict(self.footprint.stack)
        return super().to_dict()


def _scenario(s, gpu=None):
    """The Scenario of a dict or Scenario; a dict estimated on a `gpu` it does not name gets
    that GPU's default precision (fp16 for bf16 on a GPU without bf16, scenario.rules)."""
    from .scenario import Scenario
    if isinstance(s, Scenario):
        return s
    if isinstance(s, dict):
        sc = Scenario.from_dict(s)
        if gpu is None or s.get("gpu") is not None or s.get("precision") is not None:
            return sc
        from .scenario.rules import default_precision
        p = sc.precision
        if isinstance(p, str) and "bf16" in p and p == default_precision(sc.task) and \
                dict(_device(sc, gpu).capabilities or {}).get("bf16") is False:
            return sc.replace(precision=p.replace("bf16", "fp16"))
        return sc
    raise ScenarioError("scenario", f"expected a Scenario or a dict, got {type(s).__name__}")


def _device(sc, gpu):
    from .hardware import Device, get_gpu
    if isinstance(gpu, Device):
        return gpu
    return get_gpu(gpu or sc.gpu)


def _spec(sc):
    from .catalog import get_model, spec_from_architecture
    if sc.model:
        return get_model(sc.model)
    if sc.architecture:
        return spec_from_architecture(sc.architecture)
    return None


def _figures(sc, dev, spec):
    """(footprint, components, allocated, reserved, device_used) of one scenario."""
    dev = traits_of(dev)
    fp = workload_footprint(sc, spec, dev)
    allocated = fp.peak_allocated_bytes
    reserved = overhead.reserved_bytes(fp, sc)
    slack = reserved - allocated
    used = overhead.device_used_bytes(fp, sc, dev, reserved)
    comps = {k: 0 for k in ("weights", "gradients", "optimizer_states", "activations",
                            "kv_cache", "temporary")}
    comps.update(fp.components)
    comps["cuda_context"] = used["cuda_context"]
    comps["allocator_slack"] = slack
    for k, v in used.items():
        if k not in ("cuda_context", "total") and v:
            comps[k] = v
    return fp, comps, allocated, reserved, used["total"]


def _ranks(fp: Footprint, sc, dev) -> list[dict]:
    """Each distinct rank's figures (a footprint with `ranks`: pipeline stages), in stage
    order; `fits` compares the rank's device used with the one memory limit."""
    out = []
    for name, r in fp.ranks.items():
        reserved = overhead.reserved_bytes(r, sc)
        used = overhead.device_used_bytes(r, sc, traits_of(dev), reserved)
        out.append({"rank": name, "peak_phase": r.peak_phase, "components": dict(r.components),
                    "peak_allocated_bytes": r.peak_allocated_bytes,
                    "peak_reserved_bytes": int(reserved),
                    "device_used_bytes": int(used["total"]),
                    "fits": _fits(int(used["total"]), dev, sc)})
    return out


def memory_limit(sc, dev) -> int:
    """The one memory limit: the GPU's usable memory less the scenario's `safety_margin`
    (default 0: scenario.rules.DEFAULT_SAFETY_MARGIN); the verdict, max batch and the
    advisor's plans and room to grow compare device used with it."""
    return int(rules.memory_limit(getattr(sc, "safety_margin", None), dev.usable_bytes))


def limit_section(sc, dev) -> dict:
    """The estimate's `memory_limit` section: the limit and how it is made."""
    margin = getattr(sc, "safety_margin", None)
    return {"usable_bytes": int(dev.usable_bytes),
            "safety_margin": rules.DEFAULT_SAFETY_MARGIN if margin is None else margin,
            "safety_margin_default": margin is None,
            "safety_margin_bytes": int(rules.margin_bytes(margin, dev.usable_bytes)),
            "limit_bytes": memory_limit(sc, dev)}


def _fits(used: int, dev, sc=None) -> bool:
    """device used within the limit (`memory_limit` with the scenario's margin)."""
    return used <= (memory_limit(sc, dev) if sc is not None else dev.usable_bytes)


def estimate(scenario, gpu=None, *, with_max_batch: bool = True) -> Estimate:
    """Estimate one scenario on one GPU (default: the scenario's `gpu`)."""
    sc = _scenario(scenario, gpu)
    dev = _device(sc, gpu)
    spec = _spec(sc)
    fp, comps, alloc, reserved, used = _figures(sc, dev, spec)
    # a serving engine that would refuse to start does not fit, whatever its memory
    fits = _fits(used, dev, sc) and fp.serving.get("engine_starts", True)
    if fp.batch_capacity is not None:
        mb = fp.batch_capacity if fits else 0
    else:
        mb = max_batch_size(sc, dev, spec=spec) if with_max_batch else 0
    mb, mb_notes = _unbounded(mb, sc, dev, spec)
    bw, bw_notes = _bandwidth(fp, dev)
    ctx_max, ctx_notes = longest_context(sc, dev, spec, fp) if with_max_batch else (None, [])
    notes = list(fp.notes) + bw_notes + mb_notes + ctx_notes + [
        "components sum to peak_allocated_bytes except cuda_context, allocator_slack and other "
        "non-torch keys: reserved = allocated + allocator_slack; device_used = reserved + "
        "cuda_context + nccl/cuda_graphs/paged states"]
    return Estimate(scenario=sc, gpu=dev, footprint=fp, components=comps,
                    peak_allocated_bytes=alloc, peak_reserved_bytes=reserved,
                    device_used_bytes=used, fits=fits,
                    headroom_bytes=int(memory_limit(sc, dev) - used), max_batch_size=mb,
                    bandwidth=bw, notes=notes, source="estimate", limit=limit_section(sc, dev),
                    ranks=_ranks(fp, sc, dev),
                    max_context=ctx_max)


def batch_variants(sc) -> Variants:
    """The scenario at the batches the max-batch search may probe (1 .. MAX_BATCH_CAP): the
    pass at both ends, the field alone between them where that is what the pass gives
    (`scenario.variants`; a serve plan's max_num_seqs follows the batch: each re-resolved)."""
    return Variants(sc, "batch_size", (1, MAX_BATCH_CAP), grow=True, lazy=True)


def max_batch_size(scenario, gpu=None, *, spec=None) -> int:
    """Largest batch whose device_used fits the GPU (0 if batch 1 does not), capped at
    MAX_BATCH_CAP. Memory is monotone in the batch, so the answer is the b with fits(b) and
    not fits(b + 1), found by `largest_fitting` over the same estimate."""
    sc = _scenario(scenario, gpu)
    dev = _device(sc, gpu)
    spec = spec if spec is not None else _spec(sc)
    used: dict[int, int | None] = {}
    variants = batch_variants(sc)

    def used_at(b: int) -> int | None:
        if b not in used:
            s2 = variants.scenario(b)
            used[b] = None if s2 is None else _figures(s2, dev, spec)[4]
        return used[b]

    def fits(b: int) -> bool:
        u = used_at(b)
        return u is not None and _fits(u, dev, sc)

    return largest_fitting(fits, used_at, memory_limit(sc, dev), MAX_BATCH_CAP)


MAX_CONTEXT_CAP = 1 << 24


def longest_context(sc, dev, spec, fp) -> tuple[int | None, list[str]]:
    """The longest context that fits, and its note. serve: the engine's figure (the longest
    request its KV pool holds, `serving.longest_context_tokens`). generate (decoders): the
    longest prompt (seq_len) whose plan fits with its batch_size and new_tokens, every layer
    kind's cache included (workloads/transformer/layer_types.py), by `largest_fitting` over
    seq_len; a length the scenario refuses (beyond the model's positions) does not fit.
    (None, []) for other tasks."""
    if sc.task == "serve" and fp.serving:
        n = fp.serving.get("longest_context_tokens")
        return n, [f"max_context: the KV pool holds one request of at most {n:,} tokens"]
    if sc.task != "generate" or spec is None or getattr(spec, "family", None) != "decoder":
        return None, []
    used: dict[int, int | None] = {}
    # the pass at 1 and the cap (refused beyond the model's positions), then at each probe
    # outside the verified range; the field alone between two values the pass gave so
    variants = Variants(sc, "seq_len", (1, MAX_CONTEXT_CAP), grow=True, lazy=True)

    def used_at(s: int) -> int | None:
        if s not in used:
            s2 = variants.scenario(s)
            try:
                used[s] = None if s2 is None else _figures(s2, dev, spec)[4]
            except ScenarioError:
                used[s] = None
        return used[s]

    def fits(s: int) -> bool:
        u = used_at(s)
        return u is not None and _fits(u, dev, sc)   # the one limit (safety margin)

    n = largest_fitting(fits, used_at, memory_limit(sc, dev), MAX_CONTEXT_CAP)
    return n, [f"max_context: the longest prompt that fits at batch_size {sc.batch_size} with "
               f"{counted(sc.new_tokens or 0, 'new token')} is {counted(n, 'token')} (seq_len "
               "searched; the model's positions cap it)"]


def largest_fitting(fits, used_at, limit: int, cap: int) -> int:
    """Largest b in [1, cap] with fits(b) (0 if not fits(1)), for a predicate true up to some
    b and false after; used_at(b) is the memory fits compares with `limit` (None: refused).

    A secant search: each probe is where the line through the last two fitting points meets
    `limit` (doubling while memory stays flat) until the answer is bracketed, then
    interpolation inside the bracket, bisecting after any step that failed to halve it.
    Memory is close to affine in the batch, so it usually takes four probes (1, 2, the
    guess, the guess + 1) where a doubling search and bisection take about twenty."""
    if not fits(1):
        return 0
    lo, b = 1, 2
    while True:
        b = min(b, cap)
        if not fits(b):
            hi = b
            break
        prev, lo = lo, b
        if lo >= cap:
            return cap
        u0, u1 = used_at(prev), used_at(lo)
        b = lo * 2
        if u1 > u0:
            b = max(lo + 1, lo + (limit - u1) * (lo - prev) // (u1 - u0))
    bisect = False
    while hi - lo > 1:
        u0, u1 = used_at(lo), used_at(hi)
        if bisect or u1 is None or u1 <= u0:
            g = (lo + hi) // 2
        else:
            g = min(max(lo + (limit - u0) * (hi - lo) // (u1 - u0), lo + 1), hi - 1)
        width = hi - lo
        if fits(g):
            lo = g
        else:
            hi = g
        bisect = 2 * (hi - lo) > width
    return lo


def _unbounded(mb, sc, dev, spec):
    """A search that reached MAX_BATCH_CAP found no limit: max_batch_size is None (JSON null)
    and a note says whether memory grows with the batch at all."""
    if mb is None or mb < MAX_BATCH_CAP:
        return mb, []
    variants = batch_variants(sc)
    one, two = variants.scenario(1), variants.scenario(2)
    try:
        flat = one is not None and two is not None and \
            _figures(one, dev, spec)[4] == _figures(two, dev, spec)[4]
    except ScenarioError:
        flat = False
    if flat:
        return None, [f"memory does not grow with batch_size for task '{sc.task}': no batch "
                      "limit from memory (max_batch_size null)"]
    return None, [f"every batch up to the search cap {MAX_BATCH_CAP:,} fits: no batch limit "
                  "from memory found (max_batch_size null)"]


def _bandwidth(fp: Footprint, dev) -> tuple[dict, list[str]]:
    """Bytes moved and the time / rate they bound, and the notes that go with them.

    From the footprint: bytes_per_step, tokens_per_step, bytes_per_token (= bytes_per_step /
    tokens_per_step where given), flops_per_step + compute_dtype (the compute floor), and the
    workload's own keys. Added here: datasheet_bandwidth_gbs, achievable_bandwidth_gbs and the
    roofline of `vramplan.timing` (memory_floor_s, compute_floor_s, min_step_time_s = the larger
    floor, min_step_time_datasheet_s, bound, arithmetic_intensity, ridge_intensity,
    attainable_tflops, needed_bandwidth_gbs, max_tokens_per_s and the per-floor token rates;
    documented in timing.py and docs/accuracy.md)."""
    return bandwidth_on(fp.bandwidth, dev)


def bandwidth_on(bandwidth: dict, dev) -> tuple[dict, list[str]]:
    """A footprint's bandwidth dict (bytes / FLOPs per step) on `dev`: its datasheet and
    achievable bandwidth and the roofline (`_bandwidth`; the page's GPU comparison prices one
    plan's step on every GPU with it)."""
    bw = dict(bandwidth)
    peak = float(dev.bandwidth_gbs) * 1e9
    ach = peak * float(dev.achievable_bandwidth_fraction or 0.9)
    bw["datasheet_bandwidth_gbs"] = round(peak / 1e9, 1)
    bw["achievable_bandwidth_gbs"] = round(ach / 1e9, 1)
    return timing.roofline(bw, dev)
