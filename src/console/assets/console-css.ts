// The console's stylesheet, served as /assets/console.css (the CSP allows no inline style).
// Colours keep a contrast of at least 4.5:1 against their background (WCAG AA).

export const CONSOLE_CSS = String.raw`
:root { color-scheme: light; --fg: #1a1a1a; --bg: #ffffff; --muted: #4a4a4a; --line: #c8c8c8; --ok: #0b6b2f; --bad: #a3001b; --warn-bg: #fff4e0; --bad-bg: #fde8ea; --link: #0645ad; --focus: #1a5fd6; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
a { color: var(--link); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -9999px; }
.skip:focus { left: 8px; top: 8px; background: var(--bg); padding: 4px 8px; z-index: 2; }
.top { background: #222; padding: 8px 16px; }
.top a { color: #fff; margin-right: 16px; }
.signout { display: inline; margin: 0; }
.signout button { font-size: 0.85em; }
main { max-width: 1200px; margin: 0 auto; padding: 16px; }
h1 { font-size: 1.5rem; margin: 0.4em 0; }
h2 { font-size: 1.2rem; margin-top: 1.6em; border-bottom: 1px solid var(--line); }
h3 { font-size: 1rem; margin: 0.6em 0 0.2em; }
code, kbd { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 0.9em; overflow-wrap: anywhere; }
.secret { display: inline-block; background: #f3f3f3; padding: 2px 6px; user-select: all; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; border-bottom: 1px solid var(--line); padding: 4px 6px; vertical-align: top; }
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; }
.kv dt { font-weight: 600; }
.kv dd { margin: 0; }
.plain { list-style: none; margin: 0; padding: 0; }
.ok { color: var(--ok); }
.bad { color: var(--bad); font-weight: 600; }
.note, .cli { color: var(--muted); font-size: 0.9em; }
.attention ul { padding-left: 1.2em; }
.att { background: var(--warn-bg); margin: 4px 0; padding: 6px 8px; border-left: 4px solid #b35c00; }
.att-corrupt, .att-read-only, .att-break { background: var(--bad-bg); border-left-color: var(--bad); }
.todo { display: block; }
form.action { display: inline-flex; flex-wrap: wrap; gap: 6px; align-items: center; margin: 4px 0; }
button { font: inherit; padding: 3px 10px; border: 1px solid #555; border-radius: 4px; background: #f0f0f0; color: var(--fg); cursor: pointer; }
input { font: inherit; padding: 2px 4px; border: 1px solid #666; border-radius: 3px; }
.stream { border: 1px solid var(--line); padding: 4px 10px; margin: 8px 0; }
.banner { background: var(--bad-bg); border-left: 4px solid var(--bad); padding: 8px 10px; margin: 8px 0; }
.banner.info { background: var(--warn-bg); border-left-color: #b35c00; }
.transcript { list-style: none; padding: 0; }
.transcript > li { margin: 6px 0; }
.msg { border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; max-width: 80%; }
.msg.side-b { margin-left: auto; background: #f4f7fb; }
.msg header { font-size: 0.85em; color: var(--muted); display: flex; flex-wrap: wrap; gap: 10px; }
.content { white-space: pre-wrap; overflow-wrap: anywhere; margin: 4px 0; }
.sig-ok { color: var(--ok); }
.sig-bad { color: var(--bad); font-weight: 700; }
.msg.unverified { border: 2px solid var(--bad); background: var(--bad-bg); }
.readmark { font-size: 0.85em; color: var(--ok); margin: 2px 0 0; }
.readmark.unverified, .session.unverified, .receipt.unverified { color: var(--bad); font-weight: 600; }
.session, .seam, .receipt { text-align: center; font-size: 0.85em; color: var(--muted); }
.seam { color: var(--bad); font-weight: 600; border-top: 2px dashed var(--bad); padding-top: 4px; }
.result { padding: 10px; border-left: 4px solid var(--ok); }
.result.bad { border-left-color: var(--bad); background: var(--bad-bg); color: var(--fg); }
.search { margin: 8px 0; }
mark { background: #ffe066; color: var(--fg); }
`;
