"""The planner's look: one small stylesheet, no external fonts or icons.

Injected once through an `ipywidgets.HTML` holding a <style> tag, so it applies in Voila and in
JupyterLab alike. Every selector is scoped under `.vp-app`, except the page-level rules that
only apply inside Voila (`body[data-voila]`): there the document itself scrolls (Voila's lab
shell scrolls an inner panel, so printing or a full-page screenshot showed the first screen
only). Layout is by class, never inline, so that the narrow layouts can change it: two columns
from 900 px, one below (the results under the controls).
"""

# Latin faces first, then the usual Simplified Chinese ones (the ?lang=zh page)
FONT = ("-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, "
        "'PingFang SC', 'Hiragino Sans GB', 'Microsoft YaHei', 'Noto Sans CJK SC', "
        "'WenQuanYi Micro Hei', sans-serif")
MONO = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"

PAGE = """
html, body[data-voila] { height: auto !important; }
html:has(body[data-voila]) { scrollbar-gutter: stable; }
body[data-voila] { background: #f3f4f6; padding: 0; overflow: auto !important; }
body[data-voila] #main, body[data-voila] #jp-main-content-panel,
body[data-voila] #rendered_cells {
    position: static !important; height: auto !important; width: auto !important;
    overflow: visible !important; contain: none !important; min-height: 0 !important; }
body[data-voila] .jp-Notebook, body[data-voila] #rendered_cells > div,
body[data-voila] .jp-Cell, body[data-voila] .jp-OutputArea-output { padding: 0; }
body[data-voila] .jp-OutputPrompt { display: none; }
body[data-voila] .jp-OutputArea-output, body[data-voila] .jp-OutputArea-child,
body[data-voila] .jp-OutputArea { overflow: visible !important; }
"""

CSS = PAGE + f"""
.vp-app {{ font-family: {FONT}; color: #1f2937; font-size: 13px; gap: 0; width: 100%;
          max-width: 1480px; margin: 0 auto; padding: 14px 20px 28px; box-sizing: border-box;
          overflow: visible; }}
.vp-app * {{ box-sizing: border-box; }}
.vp-app .widget-html, .vp-app .widget-html-content {{ font-family: {FONT}; line-height: 1.45;
    height: auto; align-self: stretch; margin: 0; }}
.vp-app .widget-label, .vp-app input, .vp-app select, .vp-app textarea, .vp-app button {{
    font-family: {FONT}; }}
.vp-app .widget-text, .vp-app .widget-dropdown, .vp-app .widget-combobox,
.vp-app .widget-select, .vp-app .widget-textarea {{ width: 100%; min-width: 0; margin: 0; }}
.vp-app .widget-text input, .vp-app .widget-dropdown select, .vp-app .widget-combobox input,
.vp-app .widget-select select, .vp-app textarea {{ min-width: 0; width: 100%;
    border-radius: 6px; font-size: 13px; }}
.vp-app .widget-dropdown select {{ text-overflow: ellipsis; }}
.vp-app .widget-inline-hbox {{ min-width: 0; }}

/* ---- header and the two columns ---- */
.vp-top {{ align-items: center; gap: 12px; padding: 2px 2px 12px; flex-wrap: wrap; }}
.vp-header {{ display: flex; align-items: baseline; gap: 12px; flex-wrap: wrap; }}
.vp-header .vp-logo {{ font-size: 21px; font-weight: 700; letter-spacing: -0.02em; color: #111827; }}
.vp-header .vp-logo span {{ color: #2563eb; }}
.vp-header .vp-tagline {{ color: #6b7280; font-size: 13px; }}
.vp-top .vp-lang {{ margin-left: auto; width: auto; }}
.vp-lang .widget-toggle-button {{ width: auto; min-width: 44px; padding: 0 10px; font-size: 12.5px;
                                  border-radius: 6px; }}
.vp-version {{ color: #9ca3af; font-size: 12px; }}
.vp-body {{ display: flex; flex-direction: row; gap: 16px; align-items: flex-start;
           width: 100%; overflow: visible; }}
.vp-controls {{ flex: 0 0 348px; width: 348px; min-width: 0; gap: 12px; overflow: visible; }}
.vp-results {{ flex: 1 1 0; min-width: 0; gap: 12px; overflow: visible; }}
.vp-workload {{ gap: 12px; overflow: visible; }}
@media (max-width: 1100px) {{ .vp-controls {{ flex-basis: 310px; width: 310px; }} }}
@media (max-width: 900px) {{
  .vp-body {{ flex-direction: column; }}
  .vp-controls, .vp-results {{ flex: 0 0 auto; width: 100%; }}
  .vp-app {{ padding: 10px 10px 24px; }}
  /* one column: the verdict first, then the controls, then the rest of the results (the
     results box lets its children into the column, so they can be ordered around it) */
  .vp-app .vp-body > .vp-results {{ display: contents; }}
  .vp-body > .vp-results > * {{ order: 2; align-self: stretch; width: 100%; min-width: 0; }}
  .vp-body > .vp-controls {{ order: 1; }}
  .vp-body > .vp-results > .vp-notices, .vp-body > .vp-results > .vp-estimate-panel {{
      order: 0; }}
}}

/* ---- cards ---- */
.vp-section {{ background: #ffffff; border: 1px solid #e5e7eb; border-radius: 10px;
              padding: 12px 14px 14px; box-shadow: 0 1px 2px rgba(16,24,40,.04); gap: 6px;
              width: 100%; min-width: 0; overflow: visible; }}
.vp-section-title {{ font-size: 11px; font-weight: 650; text-transform: uppercase;
                    letter-spacing: .06em; color: #6b7280; margin: 0 0 2px; }}
.vp-group-title {{ font-size: 12px; font-weight: 650; color: #6b7280; text-transform: uppercase;
                   letter-spacing: .06em; margin: 6px 2px -4px; }}
.vp-sub-title {{ font-size: 11px; font-weight: 650; text-transform: uppercase; letter-spacing: .06em;
                 color: #6b7280; margin: 14px 0 2px; }}
.vp-hint, .vp-count {{ color: #6b7280; font-size: 12px; line-height: 1.4; }}
.vp-msg {{ border-radius: 6px; padding: 5px 8px; font-size: 12px; line-height: 1.4;
          word-break: break-word; }}
.vp-msg-error {{ color: #b42318; background: #fef3f2; border: 1px solid #fecdca; }}
.vp-msg-info {{ color: #1d4ed8; background: #eff6ff; border: 1px solid #bfdbfe; }}
.vp-input-error input, .vp-input-error select, input.vp-input-error {{
    border-color: #f04438 !important; background: #fffbfa; }}

/* ---- fields ---- */
.vp-grid {{ display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 4px 10px;
           width: 100%; align-items: end; }}
.vp-grid > .vp-wide {{ grid-column: 1 / -1; }}
.vp-field {{ gap: 0; margin: 0 0 3px; min-width: 0; overflow: visible; }}
.vp-field > .widget-html, .vp-field .widget-html-content {{ min-width: 0; max-width: 100%; }}
.vp-field .vp-label {{ font-size: 12px; color: #4b5563; font-weight: 550; margin: 2px 0 2px;
                      line-height: 1.3; overflow-wrap: anywhere; }}
.vp-field .vp-msg-error {{ margin-top: 3px; font-size: 11.5px; }}
.vp-field .widget-checkbox {{ width: auto; margin: 2px 14px 2px 0; height: auto; }}
.vp-field .widget-checkbox .widget-label-basic, .vp-field .widget-checkbox label {{
    font-size: 12.5px; white-space: normal; }}
.vp-field .widget-checkbox input {{ margin-right: 6px; }}
.vp-allow.widget-checkbox {{ width: auto; max-width: 100%; height: auto; }}
.vp-allow .widget-label-basic, .vp-allow label {{ white-space: normal; overflow: visible;
    text-overflow: clip; max-width: none; font-size: 12.5px; }}
.vp-boxes {{ flex-wrap: wrap; gap: 0; }}
.vp-model-picker {{ gap: 4px; width: 100%; }}
.vp-model-picker .widget-upload, .vp-export .widget-upload, .vp-small-btn, .vp-choice,
.vp-undo {{ width: auto; border-radius: 6px; font-size: 12.5px; }}
.vp-model-picker .widget-button {{ margin: 4px 8px 0 0; }}
.vp-custom {{ align-items: center; gap: 8px; flex-wrap: wrap; }}
.vp-code {{ font-family: {MONO}; font-size: 11.5px; background: #f3f4f6; padding: 1px 4px;
           border-radius: 4px; word-break: break-all; }}
.vp-gpu-picker {{ width: 100%; }}
.vp-gpu-list, .vp-gpu-list select {{ width: 100% !important; max-width: 100%; }}
.vp-gpu-list select {{ font-size: 12.5px; padding: 2px 0; }}

/* ---- notices, undo ---- */
.vp-notices {{ gap: 6px; }}
.vp-choices {{ gap: 6px; flex-wrap: wrap; }}
.vp-choice {{ background: #fff; border: 1px solid #d0d5dd; }}
.vp-undo {{ background: #fff; border: 1px solid #d0d5dd; color: #344054; }}
.vp-undo:disabled {{ opacity: .45; }}

/* ---- verdict and figures ---- */
.vp-estimate-panel {{ gap: 12px; transition: opacity .15s; width: 100%; }}
.vp-stale .vp-estimate, .vp-stale .vp-breakdown, .vp-row.vp-stale, .vp-explore.vp-stale,
.vp-stale .vp-explore-chart {{ opacity: .42; filter: grayscale(.6); }}
.vp-verdict {{ display: flex; align-items: center; gap: 14px; border-radius: 10px;
              padding: 12px 16px; flex-wrap: wrap; }}
.vp-verdict.vp-fits {{ background: #ecfdf3; border: 1px solid #abefc6; }}
.vp-verdict.vp-nofit {{ background: #fef3f2; border: 1px solid #fecdca; }}
.vp-verdict-icon {{ width: 34px; height: 34px; border-radius: 50%; display: flex; align-items: center;
                    justify-content: center; color: #fff; font-size: 18px; font-weight: 700; flex: 0 0 34px; }}
.vp-fits .vp-verdict-icon {{ background: #12b76a; }}
.vp-nofit .vp-verdict-icon {{ background: #f04438; }}
.vp-verdict-main {{ flex: 1 1 260px; min-width: 0; }}
.vp-verdict-title {{ font-size: 19px; font-weight: 700; letter-spacing: -0.01em; line-height: 1.25; }}
.vp-fits .vp-verdict-title {{ color: #05603a; }}
.vp-nofit .vp-verdict-title {{ color: #912018; }}
.vp-verdict-sub {{ color: #4b5563; font-size: 12.5px; margin-top: 2px; }}
.vp-verdict-fig {{ text-align: right; flex: 0 1 auto; margin-left: auto; }}
.vp-verdict-used {{ font-size: 22px; font-weight: 700; color: #111827; font-variant-numeric: tabular-nums;
                    white-space: nowrap; }}
.vp-verdict-used span {{ font-size: 14px; font-weight: 500; color: #4b5563; }}
.vp-verdict-detail {{ font-size: 12px; color: #4b5563; }}
.vp-figs {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(106px, 1fr)); gap: 8px;
           margin-top: 12px; }}
.vp-kpi {{ background: #f9fafb; border: 1px solid #eef0f3; border-radius: 8px; padding: 8px 9px;
          min-width: 0; }}
.vp-kpi .vp-k, .vp-share .vp-k {{ font-size: 11px; color: #6b7280; text-transform: uppercase;
    letter-spacing: .04em; line-height: 1.3; }}
.vp-kpi .vp-v {{ font-size: 18px; font-weight: 650; color: #111827; margin-top: 2px;
                font-variant-numeric: tabular-nums; white-space: nowrap; overflow: hidden;
                text-overflow: ellipsis; }}
.vp-kpi-word .vp-v {{ font-size: 16px; line-height: 23px; }}
.vp-kpi .vp-d {{ font-size: 11.5px; color: #6b7280; margin-top: 1px; }}

.vp-legend {{ display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; color: #374151;
              margin: 2px 0 0 4px; }}
.vp-legend-item {{ white-space: nowrap; }}
.vp-legend-item i {{ display: inline-block; width: 10px; height: 10px; border-radius: 2px;
                    margin-right: 5px; vertical-align: -1px; }}
.vp-legend-item b {{ font-weight: 600; font-variant-numeric: tabular-nums; }}

/* ---- the advisor ---- */
.vp-plans {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(230px, 1fr)); gap: 10px;
            margin-top: 4px; }}
.vp-plan {{ background: #f9fafb; border: 1px solid #eef0f3; border-radius: 8px; padding: 10px 12px;
           gap: 6px; justify-content: space-between; min-width: 0; }}
.vp-plan-title {{ font-weight: 650; color: #111827; font-size: 13px; }}
.vp-plan-figs {{ font-variant-numeric: tabular-nums; color: #05603a; font-weight: 600;
                font-size: 12.5px; margin: 2px 0; }}
.vp-plan .vp-list {{ margin-top: 4px; }}
.vp-changes {{ gap: 0; }}
.vp-change-row {{ align-items: center; justify-content: space-between; gap: 10px;
                 border-bottom: 1px solid #f1f2f4; padding: 4px 0; }}
.vp-change-row > .widget-html {{ flex: 1 1 auto; min-width: 0; }}
.vp-change {{ font-size: 12.5px; line-height: 1.4; }}
.vp-app .vp-apply {{ width: auto; border-radius: 6px; font-size: 12.5px; background: #1f2937;
                     color: #fff; flex: 0 0 auto; }}
.vp-app .vp-apply:hover {{ background: #374151; }}

/* ---- charts ---- */
.vp-chart-panel, .vp-chart {{ width: 100%; min-width: 0; }}
.vp-chart .vega-embed {{ width: 100%; }}
.vp-chart svg {{ max-width: 100%; }}
/* the placeholder (loading text, then the static SVG) is an HTML widget in the holder's row:
   without these it shrinks to its content, the loading box to its text and the static SVG
   (width 100 % of an undefined width) to the 300 px default of a replaced element */
.vp-chart > .widget-html, .vp-chart > .widget-html > .widget-html-content {{ flex: 1 1 auto;
                                                                            width: 100%; min-width: 0; }}
.vp-chart-static {{ width: 100%; }}
.vp-chart-loading {{ color: #6b7280; font-size: 12.5px; display: flex; align-items: center;
                    justify-content: center; background: #f9fafb; border-radius: 8px;
                    border: 1px dashed #e5e7eb; width: 100%; text-align: center; padding: 8px; }}
.vp-chart-error {{ color: #b42318; }}
.vp-views {{ flex-wrap: wrap; gap: 4px; }}
.vp-views .widget-toggle-button {{ width: auto; padding: 0 10px; font-size: 12.5px;
                                   border-radius: 6px; }}
.vp-views .widget-toggle-buttons {{ flex-wrap: wrap; gap: 4px; }}
.vp-app .widget-toggle-buttons .widget-toggle-button.mod-active {{ background: #1f2937; color: #fff; }}
.vp-metric {{ max-width: 260px; }}

/* ---- details, device card, export ---- */
.vp-row {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); gap: 12px;
          width: 100%; }}
.vp-row > .vp-section {{ height: 100%; }}
.vp-table {{ border-collapse: collapse; width: 100%; font-size: 12.5px; }}
.vp-table td {{ padding: 3px 0; border-bottom: 1px solid #f1f2f4; vertical-align: top; }}
.vp-table td:first-child {{ color: #4b5563; padding-right: 10px; }}
.vp-table td.vp-num {{ text-align: right; font-variant-numeric: tabular-nums; color: #111827; }}
.vp-table td.vp-wrap {{ text-align: left; color: #4b5563; font-size: 12px; }}
/* the per-rank table (~720 px) scrolls in its box on a phone: its HTML widget is held to the
   card's width (a flex item's min-width: auto made it as wide as the table, cut at the card) */
.vp-ranks-body, .vp-ranks-body > .widget-html-content {{ flex: 1 1 auto; width: 100%;
                                                         min-width: 0; }}
.vp-ranks td:first-child {{ white-space: nowrap; }}
@media (max-width: 600px) {{ .vp-ranks td {{ white-space: nowrap !important; }} }}
.vp-list {{ margin: 4px 0 0 16px; padding: 0; font-size: 12.5px; color: #374151; }}
.vp-list li {{ margin: 0 0 5px; line-height: 1.45; }}
.vp-notes li {{ color: #4b5563; }}
.vp-app details {{ margin-top: 6px; font-size: 12.5px; }}
.vp-app summary {{ cursor: pointer; color: #374151; }}
.vp-card h2 {{ font-size: 19px; margin: 0; font-weight: 680; color: #111827; letter-spacing: -0.01em; }}
.vp-card .vp-sub {{ color: #6b7280; margin-top: 2px; font-size: 12.5px; }}
.vp-card .vp-badge {{ display: inline-block; font-size: 11px; font-weight: 600; padding: 1px 7px;
                     border-radius: 999px; color: #fff; margin-right: 6px; vertical-align: 2px; }}
.vp-card .vp-kpis {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(118px, 1fr));
                    gap: 10px; margin: 12px 0 4px; }}
.vp-card .vp-cols {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(220px, 1fr));
                    gap: 14px; margin-top: 10px; }}
.vp-card h3 {{ font-size: 11px; text-transform: uppercase; letter-spacing: .06em; color: #6b7280;
              margin: 0 0 4px; font-weight: 650; }}
.vp-card table {{ border-collapse: collapse; width: 100%; font-size: 12.5px; }}
.vp-card td {{ padding: 2.5px 0; border-bottom: 1px solid #f1f2f4; vertical-align: top; }}
.vp-card td:first-child {{ color: #6b7280; padding-right: 8px; }}
.vp-card td.vp-num {{ text-align: right; font-variant-numeric: tabular-nums; color: #111827; }}
.vp-card .vp-note {{ color: #6b7280; font-size: 12px; margin-top: 8px; line-height: 1.45; }}
.vp-card .vp-sources {{ margin: 10px 0 0; padding: 8px 0 0; border-top: 1px solid #eef0f3;
                       font-size: 12px; color: #4b5563; word-break: break-word; }}
.vp-card .vp-sources ol, .vp-card .vp-sources ul {{ margin: 2px 0 0 18px; padding: 0; }}
.vp-card a, .vp-share a {{ color: #2563eb; text-decoration: none; }}
.vp-card a:hover {{ text-decoration: underline; }}
.vp-card code {{ font-size: 11.5px; background: #f3f4f6; padding: 0 4px; border-radius: 4px; }}
.vp-share {{ font-size: 12px; margin-bottom: 8px; word-break: break-all; }}
.vp-share a {{ font-family: {MONO}; font-size: 11.5px; }}
.vp-downloads {{ display: flex; gap: 8px; margin-bottom: 6px; flex-wrap: wrap; }}
.vp-btn {{ display: inline-block; border: 1px solid #d0d5dd; border-radius: 6px; padding: 4px 10px;
           font-size: 12px; color: #344054; text-decoration: none; background: #fff; }}
.vp-btn:hover {{ background: #f9fafb; }}
/* the report / sweep buttons and the file picker look like the JSON download links beside
   them (one kind of button in the export card, not grey blocks under outlined links) */
.vp-export .widget-button, .vp-export .widget-upload {{ background: #fff; color: #344054;
    border: 1px solid #d0d5dd; border-radius: 6px; font-size: 12px; box-shadow: none;
    margin: 0 8px 6px 0; }}
.vp-export .widget-button:hover, .vp-export .widget-upload:hover {{ background: #f9fafb; }}
.vp-json {{ max-height: 260px; overflow: auto; background: #f8fafc; border: 1px solid #eef0f3;
            border-radius: 6px; padding: 8px; font-size: 11.5px; margin: 4px 0; user-select: all;
            white-space: pre-wrap; word-break: break-all; }}
/* ---- measure from the page (trace_panel.py, live_panel.py) ---- */
.vp-trace .widget-hbox, .vp-live .widget-hbox {{ flex-wrap: wrap; gap: 6px; align-items: center; }}
.vp-measure-progress {{ margin: 6px 0 2px; }}
.vp-measure-progress .widget-html-content {{ font-size: 12.5px; color: #374151; }}
.vp-indeterminate .progress-bar {{ width: 100% !important; opacity: .45; }}
.vp-measure-head {{ font-size: 13px; font-weight: 600; color: #111827; margin: 8px 0 4px; }}
.vp-measure-sub {{ font-size: 11px; text-transform: uppercase; letter-spacing: .06em;
                   color: #6b7280; margin: 10px 0 2px; font-weight: 650; }}
.vp-measure-table th {{ font-size: 11.5px; color: #6b7280; font-weight: 600; text-align: right;
                        padding: 2px 0 3px 10px; }}
.vp-measure-table td.vp-num {{ padding-left: 10px; white-space: nowrap; }}
.vp-measure-modules td:first-child {{ word-break: break-word; }}
.vp-trace-chart, .vp-live .vp-chart-panel {{ width: 100%; }}
@media print {{
  .vp-app {{ max-width: none; }}
  .vp-json {{ max-height: none; }}
}}
"""


def style_tag() -> str:
    return f"<style>{CSS}</style>"
