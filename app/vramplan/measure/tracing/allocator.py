"""Replay an allocation log through a model of PyTorch's CUDA caching allocator -> reserved bytes.

The model follows c10/cuda/CUDACachingAllocator.cpp (default settings, one stream):
- requests are rounded up to 512 B;
- requests <= 1 MiB come from the small pool, whose segments are 2 MiB;
- larger requests come from the large pool: segments of 20 MiB for requests < 10 MiB, otherwise
  the request rounded up to 2 MiB;
- a request takes the best-fitting (smallest) free block of its pool and splits it when the
  remainder is >= 512 B (small pool) or > 1 MiB (large pool);
- a freed block merges with free neighbours in its segment; segments are never returned (no
  empty_cache), so reserved only grows.
Not modelled: expandable segments, several streams, garbage collection thresholds, OOM retries
(which free cached segments), `max_split_size_mb`.
"""
from __future__ import annotations

import bisect

MiB = 1 << 20
SMALL, SMALL_SEG, LARGE_SEG, MIN_LARGE_ALLOC, ROUND_LARGE = MiB, 2 * MiB, 20 * MiB, 10 * MiB, 2 * MiB


def _segment_size(size: int) -> int:
    if size <= SMALL:
        return SMALL_SEG
    if size < MIN_LARGE_ALLOC:
        return LARGE_SEG
    return (size + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE


class CachingAllocatorModel:
    def __init__(self):
        self.free = {True: [], False: []}   # pool(small?) -> sorted [(size, seg, offset)]
        self.blocks = {}                    # (seg, offset) -> [size, allocated, small]
        self.segments = []                  # segment sizes
        self.offsets = []                   # per segment: sorted block offsets
        self.live = {}                      # key -> (seg, offset)
        self.reserved = self.peak_reserved = 0
        self.allocated = self.peak_allocated = 0

    def malloc(self, key, size: int) -> None:
        size = max(512, (size + 511) // 512 * 512)
        small = size <= SMALL
        fl = self.free[small]
        i = bisect.bisect_left(fl, (size, -1, -1))
        if i < len(fl):
            bsize, seg, off = fl.pop(i)
        else:
            bsize, seg, off = _segment_size(size), len(self.segments), 0
            self.segments.append(bsize)
            self.offsets.append([0])
            self.reserved += bsize
            self.peak_reserved = max(self.peak_reserved, self.reserved)
        rest = bsize - size
        if (small and rest >= 512) or (not small and rest > SMALL):
            self.blocks[(seg, off + size)] = [rest, False, small]
            bisect.insort(self.offsets[seg], off + size)
            bisect.insort(fl, (rest, seg, off + size))
            bsize = size
        self.blocks[(seg, off)] = [bsize, True, small]
        self.live[key] = (seg, off)
        self.allocated += bsize
        self.peak_allocated = max(self.peak_allocated, self.allocated)

    def release(self, key) -> None:
        loc = self.live.pop(key, None)
        if loc is None:
            return
        seg, off = loc
        size, _, small = self.blocks[loc]
        self.allocated -= size
        fl = self.free[small]
        nxt = (seg, off + size)
        b = self.blocks.get(nxt)
        if b is not None and not b[1]:  # merge with the following free block
            fl.pop(bisect.bisect_left(fl, (b[0], seg, off + size)))
            del self.blocks[nxt]
            self._drop_offset(seg, off + size)
            size += b[0]
        prev = self._prev_free(seg, off)
        if prev is not None:
            poff, psize = prev
            fl.pop(bisect.bisect_left(fl, (psize, seg, poff)))
            del self.blocks[(seg, off)]
            self._drop_offset(seg, off)
            off, size = poff, psize + size
        self.blocks[(seg, off)] = [size, False, small]
        bisect.insort(fl, (size, seg, off))

    def _drop_offset(self, seg, off):
        offs = self.offsets[seg]
        del offs[bisect.bisect_left(offs, off)]

    def _prev_free(self, seg, off):
        offs = self.offsets[seg]
        i = bisect.bisect_left(offs, off)
        if i == 0:
            return None
        poff = offs[i - 1]
        size, alloc, _ = self.blocks[(seg, poff)]
        return None if alloc else (poff, size)


def replay(log) -> dict:
    """log: iterable of (key, size) for a malloc and (key, -1) for a free."""
    m = CachingAllocatorModel()
    for key, size in log:
        if size >= 0:
            m.malloc(key, size)
        else:
            m.release(key)
    return {"peak_reserved_bytes": m.peak_reserved, "segments": len(m.segments),
            "peak_allocated_bytes": m.peak_allocated}
