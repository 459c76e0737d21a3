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
"""


def style_tag() -> str:
    return f"<style>{CSS}</style>"
