"""The sources speak Chinese too (issue 19.5: "the notes, sources and advice titles speak
Chinese too (page, report and `report --lang zh`)").

A source of the hardware database (hwdb/sources.toml) has a title, a publisher, a doc number
and a URL. The title is words and is translated (locale/zh/sources.toml); the publisher, the
doc and the URL are identifiers and stay as they are, in the report and on the device card.
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from vramplan import i18n
from vramplan.hardware import default_db
from vramplan.report import assemble, to_markdown

ADA = "NVIDIA Ada GPU Architecture whitepaper (Appendix: RTX 4090, RTX 4080)"
ADA_ZH = "NVIDIA Ada GPU 架构白皮书（附录：RTX 4090、RTX 4080）"
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_every_source_title_of_the_database_has_a_chinese_entry():
    """Fails when a source is added to hwdb/sources.toml without its zh title."""
    titles = {s.title for s in default_db().sources.values() if s.title}
    assert len(titles) >= 100
    missing = sorted(t for t in titles if not i18n.has(t, "zh"))
    assert not missing, f"add these to locale/zh/sources.toml: {missing}"
    for t in titles:
        zh = i18n.gettext(t, "zh")
        assert CJK.search(zh), (t, zh)                          # translated ...
        # ... with every figure, version and number of the English kept
        for token in re.findall(r"\d[\d.,:/x-]*\d|\d", t):
            assert token in zh, (t, zh, token)


def cost_sources() -> list[str]:
    """Every `source` of advisor/data/costs.toml (what a recommendation or plan cites)."""
    import tomllib
    from importlib import resources
    table = tomllib.loads((resources.files("vramplan") / "advisor" / "data" /
                           "costs.toml").read_text(encoding="utf-8"))
    out, stack = [], [table]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            out += [v for k, v in node.items() if k == "source"]
            stack += [v for k, v in node.items() if k != "source"]
        elif isinstance(node, list):
            stack += node
    return out


def test_every_advice_source_has_a_chinese_entry():
    """Fails when a cost is added to advisor/data/costs.toml without its zh source."""
    sources = cost_sources()
    assert len(sources) >= 40
    missing = [s for s in sources if not i18n.has(s, "zh")]
    assert not missing, f"add these to locale/zh/advice_sources.toml: {missing}"
    for s in sources:
        zh = i18n.gettext(s, "zh")
        assert CJK.search(zh), s
        for token in re.findall(r"\d[\d.,:/x-]*\d|\d", s):     # figures and ids kept
            assert token in zh, (s, zh, token)
        # as the report lists it: '<change id>: <source>', the id kept
        assert i18n.translate_message(f"compile: {s}", "zh") == f"compile: {zh}"


def test_a_chinese_report_lists_the_gpus_source_with_its_chinese_title():
    db = default_db()
    dev = db.get("nvidia-rtx-4090").to_dict()
    src = next(s for s in dev["sources"] if s["title"] == ADA)
    est = {"scenario": {"model": "m"}, "gpu": {"name": dev["name"]}}
    zh = assemble(est, dev, lang="zh").sources
    en = assemble(est, dev, lang="en").sources
    # 'NVIDIA GeForce RTX 4090：<zh title>, NVIDIA, v2.1, <url>': publisher, doc, URL unchanged
    assert f"NVIDIA GeForce RTX 4090：{ADA_ZH}, NVIDIA, {src['doc']}, {src['url']}" in zh
    assert f"NVIDIA GeForce RTX 4090: {ADA}, NVIDIA, {src['doc']}, {src['url']}" in en
    assert not any(ADA in s for s in zh)


def test_report_lang_zh_prints_the_chinese_source_titles():
    out = subprocess.run(
        [sys.executable, "-m", "vramplan.cli", "report", "--model", "meta-llama/Llama-3.1-8B",
         "--task", "lora", "--gpu", "nvidia-rtx-4090", "--lang", "zh"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    sources = out.stdout.split("## 来源", 1)[1].split("\n## ", 1)[0]
    assert ADA_ZH in sources and ADA not in sources, sources
    assert "https://images.nvidia.com/" in sources                 # the URL kept
    # every line in Chinese; the advice's ('compile: Ansel et al. 2024, PyTorch 2 ...') too
    lines = [x for x in sources.splitlines() if x.startswith("- ")]
    assert len(lines) >= 4 and all(CJK.search(x) for x in lines), lines
    assert any(x.startswith("- compile: Ansel et al. 2024, PyTorch 2") for x in lines), lines


def test_the_chinese_device_card_shows_the_chinese_titles():
    pytest.importorskip("ipywidgets")
    from vramplan.ui.state.i18n import speaking
    from vramplan.ui.widgets.device_card import device_card_html
    db = default_db()
    d = db.get("nvidia-rtx-4090").to_dict()
    with speaking("zh"):
        html = device_card_html(d, db.sources)
    sources = html.split("vp-sources", 1)[1]
    text = re.sub(r"<[^>]+>", "", sources)
    assert ADA_ZH in text and ADA not in text
    assert "<ol lang='en'>" not in sources
    # its names and figures are marked English, its words not (the page's language check)
    assert "<span lang='en'>NVIDIA Ada GPU </span>架构白皮书" in sources
    with speaking("en"):
        assert ADA in device_card_html(d, db.sources)


def test_the_markdown_report_in_chinese_keeps_the_url():
    db = default_db()
    dev = db.get("nvidia-h100-sxm5-80gb").to_dict()
    md = to_markdown(assemble({"scenario": {"model": "m"}, "gpu": {"name": dev["name"]}}, dev,
                              lang="zh"))
    block = md.split("## 来源", 1)[1]
    for s in dev["sources"]:
        assert i18n.gettext(s["title"], "zh") in block
        if s.get("url"):
            assert s["url"] in block
