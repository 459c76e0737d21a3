"""vramplan.units: parsing and formatting sizes and rates (values checkable by hand)."""
import pytest

from vramplan import units
from vramplan.errors import VramplanError
from vramplan.units import GiB, MiB, UnitError


@pytest.mark.parametrize("text,expected", [
    ("80GB", 80_000_000_000), ("80 GiB", 85_899_345_920), ("80gib", 80 * GiB),
    ("81559 MiB", 85_520_809_984), ("1.5 KiB", 1536), ("512", 512), (512, 512), ("0", 0),
    (" 2 TB ", 2 * 10**12), ("1e3 B", 1000),
])
def test_parse_bytes(text, expected):
    assert units.parse_bytes(text) == expected


@pytest.mark.parametrize("bad", ["40G", "forty GB", "", "-1GB", -5, float("nan"), True, "1 GHz"])
def test_parse_bytes_rejects(bad):
    with pytest.raises(UnitError):
        units.parse_bytes(bad)


def test_unit_error_is_a_vramplan_error():
    assert issubclass(UnitError, VramplanError) and issubclass(UnitError, ValueError)


@pytest.mark.parametrize("text,expected", [
    ("3.35 TB/s", 3.35e12), ("900 GB/s", 900e9), ("1 GiB/s", GiB), (2e12, 2e12),
])
def test_parse_rate(text, expected):
    assert units.parse_rate(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["3.35 TB", "fast", "2 TB/h", -1])
def test_parse_rate_rejects(bad):
    with pytest.raises(UnitError):
        units.parse_rate(bad)


def test_format_bytes():
    assert units.format_bytes(85_899_345_920) == "80.0 GiB"
    assert units.format_bytes(80_000_000_000, binary=False) == "80.0 GB"
    assert units.format_bytes(81559 * MiB, "MiB", 0) == "81559 MiB"
    assert units.format_bytes(512) == "512 B"
    assert units.format_bytes(-2 * GiB) == "-2.0 GiB"


def test_format_rate():
    assert units.format_rate(3.35e12) == "3.35 TB/s"
    assert units.format_rate(900e9) == "900.00 GB/s"


@pytest.mark.parametrize("bus,rate,gbs", [
    (5120, 3.186, 2039.04),   # A100 80GB SXM4: 5120 bit x 3.186 Gbps / 8
    (384, 21, 1008),          # RTX 4090: GDDR6X 21 Gbps
    (4096, 1.75, 896),        # V100: datasheet says 900
    (6144, 6.25, 4800),       # H200
])
def test_bandwidth_gbs_has_no_extra_factor_two(bus, rate, gbs):
    assert units.bandwidth_gbs(bus, rate) == pytest.approx(gbs)


def test_round_trip_binary_sizes():
    for n in (1, 7, 80, 141):
        assert units.parse_bytes(units.format_bytes(n * GiB, "GiB", 0).replace(" ", "")) == n * GiB
