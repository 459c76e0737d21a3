"""The planner's look: one small stylesheet, no external fonts or icons.

Injected once through an `ipywidgets.HTML` holding a <style> tag, so it applies in Voila and in
JupyterLab alike. Every selector is scoped under `.vp-app` except the few page-level rules that
only apply inside Voila (`body[data-voila]`).
"""

FONT = ("-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, "
        "sans-serif")

CSS = f"""
body[data-voila] {{ background: #f3f4f6; padding: 0; }}
body[data-voila] .jp-Notebook {{ padding: 0; }}
body[data-voila] #rendered_cells > div {{ padding: 0; }}
body[data-voila] .jp-Cell {{ padding: 0; }}
body[data-voila] .jp-OutputArea-output {{ padding: 0; }}
body[data-voila] .jp-OutputPrompt {{ display: none; }}

.vp-app {{ font-family: {FONT}; color: #1f2937; font-size: 13px; gap: 0;
          max-width: 1440px; margin: 0 auto; padding: 14px 20px 28px; box-sizing: border-box; }}
.vp-app * {{ box-sizing: border-box; }}
.vp-app .widget-html, .vp-app .widget-html-content {{ font-family: {FONT}; line-height: 1.45;
    height: auto; align-self: stretch; }}
.vp-app .widget-html {{ margin: 0; }}
.vp-app .widget-inline-hbox .widget-label {{ width: 92px; min-width: 92px; }}
.vp-app .widget-label, .vp-app input, .vp-app select, .vp-app button {{ font-family: {FONT}; }}

.vp-header {{ display: flex; align-items: baseline; gap: 12px; padding: 4px 2px 12px; }}
.vp-header .vp-logo {{ font-size: 20px; font-weight: 700; letter-spacing: -0.02em; color: #111827; }}
.vp-header .vp-logo span {{ color: #2563eb; }}
.vp-header .vp-tagline {{ color: #6b7280; font-size: 13px; }}

.vp-body {{ gap: 16px; align-items: flex-start; }}
.vp-controls {{ flex: 0 0 350px; gap: 12px; }}
.vp-results {{ flex: 1 1 auto; min-width: 0; gap: 12px; }}

.vp-section {{ background: #ffffff; border: 1px solid #e5e7eb; border-radius: 10px;
              padding: 12px 14px 14px; box-shadow: 0 1px 2px rgba(16,24,40,.04); gap: 6px; }}
.vp-section-title {{ font-size: 11px; font-weight: 650; text-transform: uppercase;
                    letter-spacing: .06em; color: #6b7280; margin: 0 0 2px; }}
.vp-section .widget-text input, .vp-section select {{ border-radius: 6px; }}
.vp-section .widget-text, .vp-section .widget-select, .vp-section .widget-dropdown,
.vp-section .widget-toggle-buttons {{ width: 100%; margin: 2px 0; }}
.vp-section .widget-label {{ color: #374151; }}
.vp-section .widget-select select {{ font-size: 12.5px; padding: 2px 0; }}
.vp-section .widget-toggle-buttons .widget-toggle-button {{ font-size: 12px; }}
.vp-filters-row {{ gap: 8px; }}
.vp-filters-row > .widget-text {{ flex: 1 1 0; min-width: 0; }}
.vp-hint {{ color: #6b7280; font-size: 11.5px; line-height: 1.4; }}
.vp-count {{ color: #6b7280; font-size: 11.5px; }}
.vp-msg-error {{ color: #b42318; background: #fef3f2; border: 1px solid #fecdca;
                border-radius: 6px; padding: 5px 8px; font-size: 12px; line-height: 1.4; }}
.vp-msg-info {{ color: #1d4ed8; background: #eff6ff; border: 1px solid #bfdbfe;
               border-radius: 6px; padding: 5px 8px; font-size: 12px; line-height: 1.4; }}
.vp-input-error input {{ border-color: #f04438 !important; background: #fffbfa; }}

.vp-card h2 {{ font-size: 19px; margin: 0; font-weight: 680; color: #111827; letter-spacing: -0.01em; }}
.vp-card .vp-sub {{ color: #6b7280; margin-top: 2px; font-size: 12.5px; }}
.vp-card .vp-badge {{ display: inline-block; font-size: 11px; font-weight: 600; padding: 1px 7px;
                     border-radius: 999px; color: #fff; margin-right: 6px; vertical-align: 2px; }}
.vp-card .vp-kpis {{ display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 10px;
                    margin: 12px 0 4px; }}
.vp-card .vp-kpi {{ background: #f9fafb; border: 1px solid #eef0f3; border-radius: 8px; padding: 8px 10px; }}
.vp-card .vp-kpi .vp-k {{ font-size: 11px; color: #6b7280; text-transform: uppercase; letter-spacing: .05em; }}
.vp-card .vp-kpi .vp-v {{ font-size: 20px; font-weight: 650; color: #111827; margin-top: 2px;
                         font-variant-numeric: tabular-nums; }}
.vp-card .vp-kpi .vp-d {{ font-size: 11.5px; color: #6b7280; margin-top: 1px; }}
.vp-card .vp-cols {{ display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 14px;
                    margin-top: 10px; }}
.vp-card h3 {{ font-size: 11px; text-transform: uppercase; letter-spacing: .06em; color: #6b7280;
              margin: 0 0 4px; font-weight: 650; }}
.vp-card table {{ border-collapse: collapse; width: 100%; font-size: 12.5px; }}
.vp-card td {{ padding: 2.5px 0; border-bottom: 1px solid #f1f2f4; vertical-align: top; }}
.vp-card td:first-child {{ color: #6b7280; padding-right: 8px; }}
.vp-card td.vp-num {{ text-align: right; font-variant-numeric: tabular-nums; color: #111827; }}
.vp-card .vp-note {{ color: #6b7280; font-size: 12px; margin-top: 8px; line-height: 1.45; }}
.vp-card .vp-sources {{ margin: 10px 0 0; padding: 8px 0 0; border-top: 1px solid #eef0f3;
                       font-size: 12px; color: #4b5563; }}
.vp-card .vp-sources ol {{ margin: 2px 0 0 18px; padding: 0; }}
.vp-card .vp-sources li {{ margin: 1px 0; }}
.vp-card a {{ color: #2563eb; text-decoration: none; }}
.vp-card a:hover {{ text-decoration: underline; }}
.vp-card code {{ font-size: 11.5px; background: #f3f4f6; padding: 0 4px; border-radius: 4px; }}

.vp-chart-loading {{ color: #6b7280; font-size: 12.5px; height: 380px; display: flex;
                    align-items: center; justify-content: center; background: #f9fafb;
                    border-radius: 8px; border: 1px dashed #e5e7eb; }}
.vp-chart .vega-embed {{ width: 100%; }}
.vp-chart .vega-embed summary {{ opacity: .5; }}

/* ---- planner: fields, verdict, figures ---- */
.vp-controls {{ flex: 0 0 360px; }}
.vp-workload {{ gap: 12px; }}
.vp-field {{ gap: 0; margin: 0 0 4px; }}
.vp-field .vp-label {{ font-size: 11.5px; color: #4b5563; font-weight: 550; margin: 2px 0 1px; }}
.vp-field .widget-text, .vp-field .widget-dropdown, .vp-field .widget-combobox {{ width: 100%; margin: 0; }}
.vp-field .widget-checkbox {{ width: auto; margin: 0 12px 0 0; }}
.vp-field .widget-checkbox .widget-label-basic {{ font-size: 12.5px; }}
.vp-field .widget-checkbox input {{ margin-right: 5px; }}
.vp-field .vp-msg-error {{ margin-top: 3px; font-size: 11.5px; word-break: break-word; }}
.vp-section .widget-combobox input {{ border-radius: 6px; }}
.vp-grid {{ margin-top: 2px; }}
.vp-group-title {{ font-size: 12px; font-weight: 650; color: #6b7280; text-transform: uppercase;
                   letter-spacing: .06em; margin: 8px 2px -4px; }}
.vp-sub-title {{ font-size: 11px; font-weight: 650; text-transform: uppercase; letter-spacing: .06em;
                 color: #6b7280; margin: 14px 0 0; }}

.vp-estimate-panel {{ gap: 12px; transition: opacity .15s; }}
.vp-estimate-panel.vp-stale .vp-estimate, .vp-estimate-panel.vp-stale .vp-breakdown,
.vp-estimate-panel.vp-stale .vp-row, .vp-estimate-panel.vp-stale > .vp-section:last-child {{
    opacity: .42; filter: grayscale(.6); }}
.vp-verdict {{ display: flex; align-items: center; gap: 14px; border-radius: 10px; padding: 12px 16px; }}
.vp-verdict.vp-fits {{ background: #ecfdf3; border: 1px solid #abefc6; }}
.vp-verdict.vp-nofit {{ background: #fef3f2; border: 1px solid #fecdca; }}
.vp-verdict-icon {{ width: 34px; height: 34px; border-radius: 50%; display: flex; align-items: center;
                    justify-content: center; color: #fff; font-size: 18px; font-weight: 700; flex: 0 0 34px; }}
.vp-fits .vp-verdict-icon {{ background: #12b76a; }}
.vp-nofit .vp-verdict-icon {{ background: #f04438; }}
.vp-verdict-main {{ flex: 1 1 auto; min-width: 0; }}
.vp-verdict-title {{ font-size: 19px; font-weight: 700; letter-spacing: -0.01em; }}
.vp-fits .vp-verdict-title {{ color: #05603a; }}
.vp-nofit .vp-verdict-title {{ color: #912018; }}
.vp-verdict-sub {{ color: #4b5563; font-size: 12.5px; margin-top: 2px; }}
.vp-verdict-fig {{ text-align: right; flex: 0 0 auto; }}
.vp-verdict-used {{ font-size: 22px; font-weight: 700; color: #111827; font-variant-numeric: tabular-nums; }}
.vp-verdict-used span {{ font-size: 14px; font-weight: 500; color: #4b5563; }}
.vp-verdict-detail {{ font-size: 12px; color: #4b5563; }}
.vp-figs {{ display: grid; grid-template-columns: repeat(5, minmax(0, 1fr)); gap: 10px; margin-top: 12px; }}
.vp-figs .vp-kpi {{ background: #f9fafb; border: 1px solid #eef0f3; border-radius: 8px; padding: 8px 10px; }}
.vp-kpi .vp-k, .vp-share .vp-k {{ font-size: 11px; color: #6b7280; text-transform: uppercase; letter-spacing: .05em; }}
.vp-figs .vp-v {{ font-size: 20px; font-weight: 650; color: #111827; margin-top: 2px;
                  font-variant-numeric: tabular-nums; white-space: nowrap; }}
.vp-figs .vp-d {{ font-size: 11.5px; color: #6b7280; margin-top: 1px; }}
.vp-breakdown {{ width: 100%; }}
.vp-breakdown .vp-chart-loading {{ height: 130px; }}
.vp-row > .vp-section {{ height: 100%; }}
.vp-table {{ border-collapse: collapse; width: 100%; font-size: 12.5px; }}
.vp-table td {{ padding: 3px 0; border-bottom: 1px solid #f1f2f4; vertical-align: top; }}
.vp-table td:first-child {{ color: #4b5563; padding-right: 10px; min-width: 55%; width: 60%; }}
.vp-table td.vp-num {{ text-align: right; font-variant-numeric: tabular-nums; color: #111827; white-space: nowrap; }}
.vp-table td.vp-wrap {{ white-space: normal; text-align: left; color: #4b5563; font-size: 12px; }}
.vp-list {{ margin: 4px 0 0 16px; padding: 0; font-size: 12.5px; color: #374151; }}
.vp-list li {{ margin: 0 0 5px; line-height: 1.4; }}
.vp-notes li {{ color: #4b5563; }}
.vp-share {{ font-size: 12px; margin-bottom: 8px; word-break: break-all; }}
.vp-share a {{ color: #2563eb; text-decoration: none; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 11.5px; }}
.vp-downloads {{ display: flex; gap: 8px; margin-bottom: 6px; }}
.vp-btn {{ display: inline-block; border: 1px solid #d0d5dd; border-radius: 6px; padding: 4px 10px;
           font-size: 12px; color: #344054; text-decoration: none; background: #fff; }}
.vp-btn:hover {{ background: #f9fafb; }}
.vp-app details {{ margin-top: 4px; font-size: 12.5px; }}
.vp-app summary {{ cursor: pointer; color: #374151; }}
.vp-json {{ max-height: 260px; overflow: auto; background: #f8fafc; border: 1px solid #eef0f3;
            border-radius: 6px; padding: 8px; font-size: 11.5px; margin: 4px 0; user-select: all; }}
"""


def style_tag() -> str:
    return f"<style>{CSS}</style>"
