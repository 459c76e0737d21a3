"""The page in two languages: the catalogues load and agree, every literal the source hands to
`_()` / `N_()` / `gettext()` has a Chinese entry with the same placeholders, and the planner
built in Chinese for one default plan of every family shows no English text a person reads
(HTML text, descriptions, options, placeholders, tooltips), besides model ids, GPU names,
units, numbers, code and the estimate's own notes (marked lang='en', docs/i18n.md)."""
from __future__ import annotations

import ast
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from vramplan import i18n
from vramplan.errors import VramplanError

PKG = Path(__file__).resolve().parents[1] / "app" / "vramplan"
MARKERS = ("_", "N_", "gettext")
CHART_MARKERS = ("t",)          # charts/ builders: t = lambda text: gettext(text, lang)
REPORT_MARKERS = ("tr",)        # report/: tr(text, lang, **values) (report/text.py)


# ---------------------------------------------------------------- the catalogue
def test_the_chinese_catalogue_loads_and_its_files_agree():
    cat = i18n.catalogue("zh")
    assert len(cat) > 300
    assert cat["Undo"] == "撤销"
    assert i18n.conflicts("zh") == []
    assert i18n.catalogue("en") == {}


def test_gettext_returns_english_unchanged_and_chinese_from_the_catalogue():
    assert i18n.gettext("Undo", "en") == "Undo"
    assert i18n.gettext("Undo", "zh") == "撤销"
    assert i18n.gettext("no such text in any catalogue", "zh") == "no such text in any catalogue"
    assert i18n.gettext("Fits on {gpu}", "zh").format(gpu="H100") == "H100 上装得下"


def test_normalise_lang_reads_the_usual_spellings_and_names_lang_otherwise():
    assert [i18n.normalise_lang(v) for v in ("en", "zh", "ZH", "zh-CN", "zh_Hans", "en-US",
                                             None, "")] == ["en", "zh", "zh", "zh", "zh", "en",
                                                             "en", "en"]
    for bad in ("fr", "chinese", 3, "zh!"):
        with pytest.raises(VramplanError, match="lang"):
            i18n.normalise_lang(bad)


def test_a_message_with_values_is_translated_by_its_pattern():
    msg = "unknown GPU 'h1000'; closest: nvidia-h100-sxm5-80gb, nvidia-h200-sxm-141gb"
    zh = i18n.translate_message(msg, "zh")
    assert zh == "未知的GPU“h1000”；最接近的：nvidia-h100-sxm5-80gb, nvidia-h200-sxm-141gb"
    assert i18n.translate_message(msg, "en") == msg
    assert i18n.translate_message("batch_size: " + "must be >= 1, got 0", "zh") == \
        "batch_size: 必须 >= 1，得到的是 0"
    from vramplan.scenario import form
    problem = form.check({"model": "gpt2", "batch_size": 0})["batch_size"]
    assert problem == "must be between 1 and 1,073,741,824, got 0"          # the form's words
    assert i18n.translate_message(problem, "zh") == "必须在 1 到 1,073,741,824 之间，得到的是 0"
    assert i18n.translate_message("a sentence no catalogue has", "zh") == \
        "a sentence no catalogue has"


def test_numbers_are_grouped_by_thousands_in_both_languages():
    assert i18n.format_number(1234567.891, 1, "en") == "1,234,567.9"
    assert i18n.format_number(1234567.891, 1, "zh") == "1,234,567.9"


def source_literals() -> dict[str, str]:
    """Every string literal passed first to `_()`, `N_()` or `gettext()` in the package:
    {text: 'file:line'}."""
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        markers = MARKERS + (CHART_MARKERS if p.parent.name == "charts" else ()) + \
            (REPORT_MARKERS if p.parent.name == "report" else ())
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
                else None
            arg = node.args[0]
            if name in markers and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.setdefault(arg.value, f"{p.relative_to(PKG)}:{node.lineno}")
    return out


def test_every_marked_literal_of_the_source_has_a_chinese_entry():
    lits = source_literals()
    assert len(lits) > 150            # the scan sees the page's strings
    assert "Undo" in lits and "Fits on {gpu}" in lits
    cat = i18n.catalogue("zh")
    missing = {t: where for t, where in lits.items() if t.strip() and t not in cat}
    assert not missing, f"{len(missing)} texts without a zh entry: {missing}"


def fields(text: str) -> list[str]:
    """The `{name}` placeholders of a text, sorted (JSON-like braces in a doc are not)."""
    return sorted(re.findall(r"(?<!\{)\{(\w+)\}(?!\})", text))


def test_placeholders_match_between_english_and_chinese():
    bad = {k: v for k, v in i18n.catalogue("zh").items() if fields(k) != fields(v)}
    assert not bad, bad


def test_no_chinese_entry_is_left_empty_or_in_english():
    """An entry may equal its English only when every word is one a Chinese page keeps
    (names, units, loanwords: 'LoRA alpha', 'batch {n}')."""
    lazy = {k: v for k, v in i18n.catalogue("zh").items()
            if not v.strip() or (v == k and english_left(v, set()))}
    assert not lazy, lazy


# ---------------------------------------------------------------- the page, walked
class _Text(HTMLParser):
    """Text and tooltips of an HTML value, leaving out <style>, <code> and anything inside
    an element marked lang='en'."""

    SKIP = ("style", "script", "code", "pre")

    def __init__(self):
        super().__init__()
        self.out: list[str] = []
        self.stack: list[tuple[str, bool]] = []

    def _skipping(self) -> bool:
        return any(skip for _, skip in self.stack)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        skip = tag in self.SKIP or a.get("lang") == "en"
        if tag not in ("br", "img", "input", "hr", "meta", "link"):
            self.stack.append((tag, skip))
        if not (skip or self._skipping()) and a.get("title"):
            self.out.append(a["title"])

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        if data.strip() and not self._skipping():
            self.out.append(data)


def html_text(value: str) -> list[str]:
    p = _Text()
    p.feed(value or "")
    return p.out


def visible_strings(widget) -> list[str]:
    """What a person reads in a widget tree: HTML text and title tooltips, descriptions,
    tooltips, placeholders, option labels; hidden widgets (display none) are skipped."""
    import ipywidgets as W
    out: list[str] = []
    stack = [widget]
    while stack:
        w = stack.pop()
        layout = getattr(w, "layout", None)
        if layout is not None and getattr(layout, "display", None) == "none":
            continue
        if isinstance(w, (W.HTML, W.HTMLMath)):
            out += html_text(w.value)
        elif isinstance(w, W.Label):
            out.append(w.value)
        for attr in ("description", "tooltip", "placeholder"):
            v = getattr(w, attr, None)
            if isinstance(v, str) and v.strip():
                out.append(v)
        out += [t for t in (getattr(w, "tooltips", None) or []) if t]
        opts = getattr(w, "_options_labels", None)
        if opts:
            out += [o for o in opts if o]
        stack += list(getattr(w, "children", ()) or ())
    return out


# words a Chinese page keeps as they are: units, identifiers, names of software and formats,
# and the loanwords Chinese technical writing uses for ML terms (batch, token)
KEEP = {
    "batch", "token", "tokens", "alpha", "dropout", "eager", "sdpa", "flash", "auto", "config",
    "json", "torch", "compile", "nvidia", "smi", "id", "ids", "dp", "tp", "pp", "ZeRO", "LoRA",
    "QLoRA", "FSDP", "Gen", "Gbps", "pin", "bit", "x", "e", "g", "vram", "plan", "vramplan",
    "llama", "model_type", "Infinity", "Cache", "Float8", "diffusers", "torchao", "torchtune",
    "PEFT", "Adam", "fused", "True", "foreach", "set_to_none", "zero_grad", "DynamicCache",
    "StaticCache", "Hugging", "Face", "Korthikanti", "et", "al", "layer", "norm", "G", "buffer",
    "none", "in", "place", "out", "of", "cg", "bicgstab", "gmres", "mode", "codec", "streams",
    "format", "surfaces", "lookahead", "bframes", "fft", "fft_dtype", "solver", "restart",
    "solver_dtype", "name", "shape", "dtype", "count", "scale", "msaa", "bool", "default",
    "resolution", "model", "params", "geometry_budget", "seq", "vocab", "logits", "t", "h", "w",
    "d", "r", "lora", "train", "qlora", "forward", "generate", "serve", "denoise", "load",
    "render", "volume", "array", "enable_layerwise_casting", "enable_attention_slicing",
    "enable_model_cpu_offload", "offload_params", "save_on_cpu", "autograd", "graph", "cat",
    "StaticCache", "seq_len", "new_tokens", "expandable_segments", "PYTORCH_CUDA_ALLOC_CONF",
    "Offload", "ZeRO-Offload", "shard", "grad", "op", "full", "Transformer", "U-Net",
    "nvidia-smi", "shard-grad-op", "layer-norm", "offload", "Markdown", "acc", "HTML", "SVG",
    "CSV", "NVML", "vl-convert", "vs", "Dubey", "Dehghani", "vLLM", "arXiv", "ViT-B",
}
UNIT = re.compile(r"^(?:[KMGTPEZY]i?B|[kMGTPE]?B/s|[KMGT]iB|TFLOPS|TOPS|FLOPs?|FLOP/B|"
                  r"FLOP/byte|W|px|µs|ms|s|GB|TB|MB)$")
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.\-/+']*")


# messages of libraries outside the project, shown as they give them
EXTERNAL = ("NVML Shared Library Not Found",)
CJK = "\u3000-\u9fff\uff00-\uffef"
GLOSS = re.compile(f"(?<=[{CJK}])[（(][A-Za-z][A-Za-z \\-]*[）)]")   # 伪张量（fake tensor）


def english_left(text: str, names: set[str]) -> list[str]:
    """The English words of `text` a Chinese reader would need translated."""
    text = " ".join(w for w in text.split() if "_" not in w)  # identifiers: max_model_len
    for n in sorted(names, key=len, reverse=True):       # model ids, GPU names, ...
        if n and n in text:
            text = text.replace(n, " ")
    text = GLOSS.sub(" ", text)
    text = " ".join(w for w in text.split() if not re.search(r"[=&?]", w))  # links, queries
    out = []
    for w in WORD.findall(text):
        w = w.strip(".'-/+")
        if len(w) < 2 or w in KEEP or w.lower() in KEEP or UNIT.match(w):
            continue
        if any(c.isdigit() for c in w) or "_" in w or "/" in w or "." in w:
            continue                  # ids, dtypes, versions, paths: bf16, fp8_e4m3, gpt2
        if w.isupper() and len(w) <= 6:
            continue                  # acronyms: GPU, KV, CUDA, NCCL, MSAA, HBM3e
        if re.fullmatch(r"[A-Z][a-z]*[A-Z]\w*", w):
            continue                  # product and format names: MoE, NVLink, PCIe
        out.append(w)
    return out


def allowed_names(db) -> set[str]:
    """Names a Chinese page shows as they are: model ids and aliases, GPU names (whole and
    less the vendor, as the GPU list shows them), ids, architectures, memory and link types,
    and the scenario's choice values that are identifiers (adamw, sgd, lion, ...)."""
    from vramplan.catalog import list_models
    from vramplan.scenario import form
    from vramplan.scenario.keys import KEYS
    names = set()
    for m in list_models():
        names |= {m.id, *m.aliases}
    for d in db.devices:
        names |= {d.id, d.name, *d.aliases, d.vendor, d.architecture or "",
                  d.memory_type or "", d.form_factor or ""}
        if d.name.lower().startswith(d.vendor.lower() + " "):
            names.add(d.name[len(d.vendor) + 1:].split(" · ")[0])
    for k in KEYS:
        names |= {str(c) for c in (getattr(k, "choices", None) or ()) if isinstance(c, str)
                  and not i18n.has(c, "zh")}
        ic = d.to_dict().get("interconnect") or {}
        names |= {str(v) for v in ic.values() if isinstance(v, str)}
        hier = d.to_dict().get("hierarchy") or {}
        names |= {str(v) for v in hier.values() if isinstance(v, str) and not i18n.has(v, "zh")}
    from vramplan.vocab import FAMILIES
    names |= set(FAMILIES) | {k.name for k in KEYS} | set(EXTERNAL)
    for plan in [{"model": m.id} for m in list_models()] + [{"task": t} for t in
                                                             ("render", "volume", "array")]:
        for f in form.fields(plan):
            names |= {str(c) for c in (f.choices or ()) if isinstance(c, str)
                      and not i18n.has(c, "zh")}
    return names


def _untranslated(app, names) -> dict[str, list[str]]:
    out = {}
    for s in visible_strings(app):
        left = english_left(s, names)
        if left:
            out[s[:160]] = left
    return out


def family_plans():
    """One default plan per family the model picker offers, and each model-free task."""
    from vramplan.ui.state import state as S
    from vramplan.ui.widgets.model_picker import family_options
    fams = [v for _, v in family_options() if v not in (S.ALL, S.OWN, S.NO_MODEL)]
    return [("family", f) for f in fams] + [("task", t) for t in ("render", "volume", "array")]


def test_the_page_in_chinese_has_no_untranslated_english_for_every_family(db, monkeypatch):
    pytest.importorskip("ipywidgets")
    from vramplan.ui import App
    monkeypatch.delenv("QUERY_STRING", raising=False)
    app = App(db=db, charts=False, lang="zh")
    names = allowed_names(db)
    seen, problems = 0, {}
    for kind, value in family_plans():
        if kind == "family":
            app.workload.set("family", value)
        else:
            app.workload.set("family", "no-model")
            app.state.set("task", value)
        assert app.state.result is not None, (kind, value, app.state.errors)
        strings = visible_strings(app)
        seen += len(strings)
        assert any("工作负载" in s for s in strings)          # the page is in Chinese
        for s, left in _untranslated(app, names).items():
            problems.setdefault(s, (kind, value, left))
    assert seen > 500
    assert not problems, f"{len(problems)} untranslated: {problems}"


def test_the_charts_and_advice_in_chinese_have_no_untranslated_english(db, monkeypatch):
    pytest.importorskip("altair")
    from vramplan.ui import App
    monkeypatch.delenv("QUERY_STRING", raising=False)
    app = App(db=db, lazy_chart=False, lang="zh",
              scenario={"model": "meta-llama/Llama-3.1-70B", "task": "train"})
    names = allowed_names(db)
    assert app.advisor.value and not app.state.estimate.fits
    problems = _untranslated(app, names)
    assert not problems, problems
    for view in [v for _, v in app.explore.view.options]:
        app.explore.view.value = view
        assert app.explore.shown_view == view, app.explore.status.value
        texts = chart_texts(app.chart.spec)
        left = {t: english_left(t, names) for t in texts if english_left(t, names)}
        assert not left, (view, left)


# plans that get advice of each kind: changes with and without a cost, plans over more GPUs,
# an engine's max_model_len, a volume split into slabs, a plan that fits with room to grow
ADVISED = [
    ("nvidia-l4", {"model": "gpt2", "task": "train", "batch_size": 64, "seq_len": 1024}),
    ("nvidia-rtx-4090", {"model": "meta-llama/Llama-3.1-70B", "task": "serve"}),
    ("nvidia-l4", {"task": "volume", "resolution": [2048, 2048, 2048]}),
    ("nvidia-l4", {"model": "stabilityai/stable-diffusion-xl-base-1.0", "task": "denoise",
                   "batch_size": 16}),
    ("nvidia-h100-sxm5-80gb", {"model": "meta-llama/Llama-3.1-8B", "task": "lora"}),
]


@pytest.mark.parametrize("gpu, plan", ADVISED, ids=[p.get("model", p["task"]) for _, p in
                                                    ADVISED])
def test_the_advisor_panel_in_chinese_translates_its_titles_and_costs(db, monkeypatch, gpu,
                                                                       plan):
    """Every title and cost of the advice in Chinese (none left in English marked lang='en'),
    and an applied change's notice too."""
    pytest.importorskip("ipywidgets")
    from vramplan.ui import App
    monkeypatch.delenv("QUERY_STRING", raising=False)
    app = App(db=db, charts=False, lang="zh", gpu=gpu, scenario=plan)
    app.advisor.enabled = True
    app.advisor.render()                   # outside a kernel the advice is computed in place
    adv = app.state.advice
    assert adv is not None and app.advisor.value
    assert "lang='en'" not in app.advisor.value, app.advisor.value
    problems = _untranslated(app.advisor, allowed_names(db))
    assert not problems, problems
    texts = " ".join(visible_strings(app.advisor))
    if adv.fits:
        assert "装得下，剩余" in texts
    else:
        assert adv.recommendations and "节省" in texts
    free = [r for r in adv.recommendations if r.saves_bytes > 0 and not r.cost.compute_share
            and not r.cost.time_share and r.cost.accuracy_risk == "none"
            and not r.cost.changes_job and r.cost.gpus <= 1]
    if free:                               # a change whose every cost figure is nil
        assert "无额外计算或传输" in texts
    if app.advisor.buttons:
        app.advisor.buttons[0].click()
        notice = " ".join(html_text(app.notices.value))
        assert "已应用" in notice and not english_left(notice, allowed_names(db)), notice


def chart_texts(spec) -> list[str]:
    """Titles, subtitles, axis and legend titles and tooltip titles of a Vega-Lite spec."""
    out = []
    stack = [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("title", "subtitle", "text") and isinstance(v, str):
                    out.append(v)
                elif k in ("title", "subtitle") and isinstance(v, list):
                    out += [x for x in v if isinstance(x, str)]
                else:
                    stack.append(v)
        elif isinstance(node, list):
            stack += node
    return out


# ---------------------------------------------------------------- switching
def test_the_switch_and_the_link_set_the_language_and_the_address_keeps_it(db, monkeypatch):
    pytest.importorskip("ipywidgets")
    from vramplan.ui import App
    monkeypatch.setenv("QUERY_STRING", "model=gpt2&task=train&lang=zh")
    app = App(db=db, charts=False)
    assert app.state.lang == "zh" and app.state.scenario.model == "gpt2"
    assert app.url.query.endswith("&lang=zh") and "model=gpt2" in app.url.query
    assert "撤销" == app.notices.undo.description
    assert "工作负载" in app.workload.sections["workload"].children[0].value
    app.lang_switch.value = "en"
    assert app.state.lang == "en" and "lang=" not in app.url.query
    assert app.notices.undo.description == "Undo"
    assert "Workload" in app.workload.sections["workload"].children[0].value
    assert app.state.scenario.model == "gpt2"          # the plan stays
    assert app.trace in app.results.children and app.live in app.results.children
    app.set_lang("zh")
    assert app.notices.undo.description == "撤销" and app.url.query.endswith("lang=zh")
    assert not _untranslated(app, allowed_names(db))       # every panel, later ones too


def test_an_unknown_lang_in_the_link_says_so_inline_and_keeps_the_plan(db, monkeypatch):
    pytest.importorskip("ipywidgets")
    from vramplan.ui import App
    monkeypatch.setenv("QUERY_STRING", "model=gpt2&lang=fr")
    app = App(db=db, charts=False)
    assert app.state.lang == "en" and app.state.scenario.model == "gpt2"
    text = " ".join(html_text(app.notices.value))
    assert "lang 'fr' is not a language of the page" in text and "lang=zh" in text
    assert "lang" not in app.state.errors


def test_two_pages_in_one_kernel_keep_their_own_languages(db, monkeypatch):
    pytest.importorskip("ipywidgets")
    from vramplan.ui import App
    monkeypatch.delenv("QUERY_STRING", raising=False)
    zh, en = App(db=db, charts=False, lang="zh"), App(db=db, charts=False)
    zh.workload.set("batch_size", "4")
    en.workload.set("batch_size", "4")
    # the verdict, whichever way it goes: "Fits on" / "Does not fit on", 装得下 / 装不下
    verdict_en = re.compile(r"\b[Ff]its? on ")
    assert "装" in zh.panel.value and verdict_en.search(en.panel.value)
    assert not verdict_en.search(zh.panel.value) and "装" not in en.panel.value
    assert "峰值所在阶段" in zh.panel.value and "Peak phase" in en.panel.value


def test_a_widget_callback_speaks_its_page_language_and_leaves_no_global():
    from vramplan.ui.state.i18n import _, current_lang, speaking, speaking_for

    class Page:
        lang = "zh"
    assert _("Undo") == "Undo" and current_lang() == "en"       # outside any page
    assert speaking_for(Page(), lambda: _("Undo"))() == "撤销"
    with speaking("zh"):
        assert _("Undo") == "撤销"
        with speaking("en"):
            assert _("Undo") == "Undo"
        assert current_lang() == "zh"
    assert current_lang() == "en"


# ---------------------------------------------------------------- the estimate's notes
# one plan per kind of workload whose notes differ: training (full, LoRA, mixed precision,
# encoder with dropout, encoder-decoder), inference (generate, forward, serve), a CNN, a ViT,
# detection, a diffusion pipeline, and the model-free tasks
NOTE_PLANS = [
    {"model": "meta-llama/Llama-3.1-8B", "task": "train", "precision": "bf16-mixed"},
    {"model": "meta-llama/Llama-3.1-8B", "task": "lora"},
    {"model": "meta-llama/Llama-3.1-8B", "task": "generate"},
    {"model": "meta-llama/Llama-3.1-8B", "task": "serve"},
    {"model": "meta-llama/Llama-3.1-8B", "task": "forward"},
    {"model": "bert-base-uncased", "task": "train"},
    {"model": "google-t5/t5-base", "task": "train"},
    {"model": "torchvision/resnet50", "task": "train"},
    {"model": "torchvision/vit_b_16", "task": "train"},
    {"model": "mmdet/faster-rcnn_r50_fpn", "task": "train"},
    {"model": "stabilityai/stable-diffusion-xl-base-1.0", "task": "denoise"},
    {"task": "render"}, {"task": "volume"}, {"task": "array"},
]


@pytest.mark.parametrize("plan", NOTE_PLANS, ids=lambda p: f"{p.get('model', '-')}:{p['task']}")
def test_every_note_of_the_estimate_speaks_chinese(plan, db):
    """Each note (generated text with figures in) matches a locale/zh/notes.toml pattern, its
    figures kept, and leaves no English word a Chinese reader needs; the page's notes card
    and the report's assumptions show them so (no lang='en' left)."""
    from vramplan.estimate import estimate
    from vramplan.report import assemble
    from vramplan.report.content import MACHINE_NOTES
    e = estimate({"gpu": "nvidia-h100-sxm5-80gb", **plan})
    notes = [str(n) for n in e.to_dict()["notes"] if not str(n).startswith(MACHINE_NOTES)]
    assert notes
    names = allowed_names(db)
    for n in notes:
        zh = i18n.translate_message(n, "zh")
        assert zh != n, f"no zh pattern for the note: {n}"
        lost = [x for x in re.findall(r"\d+(?:[.,]\d+)*", n) if x not in zh]
        assert not lost, (n, zh, lost)                       # the figures are kept
        assert not english_left(zh, names), (zh, english_left(zh, names))
    r = assemble(e.to_dict(), db.get("nvidia-h100-sxm5-80gb").to_dict(), lang="zh")
    assert r.assumptions == [i18n.translate_message(n, "zh") for n in notes]


def test_a_note_with_its_figures_reads_in_chinese_by_hand():
    """The roofline note (timing.py) with its efficiency clause (a nested {why}), by hand."""
    en = ("roofline: 68.1 TFLOP and 85.38 GB per step -> 797 FLOP/B against the GPU's ridge "
          "193: compute-bound. The compute floor is at the dense datasheet bf16 peak (165.2 "
          "TFLOPS); no measured FLOPs utilisation for this workload is known to vramplan, so "
          "real steps are slower than either floor")
    assert i18n.translate_message(en, "zh") == (
        "屋顶线模型（roofline）：每步 68.1 TFLOP、85.38 GB -> 797 FLOP/B，GPU 的拐点为 193："
        "受算力限制。计算下限按数据手册中 bf16 的稠密峰值（165.2 TFLOPS）计；vramplan 没有此"
        "工作负载的实测 FLOPs 利用率，因此实际每步比两个下限都慢")
    from vramplan.ui.widgets.details import notes_html
    from vramplan.ui.state.i18n import speaking
    with speaking("zh"):
        out = notes_html([], [en, "a note no catalogue has"])
    assert "屋顶线模型" in out and out.count("lang='en'") == 1   # only the unknown note
