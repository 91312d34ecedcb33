// Server-rendered HTML. Everything that comes from the daemon (names, ids, content, errors)
// passes through `esc`: nothing a message or an agent's name holds can become markup.

/** Escape text for HTML element content and double-quoted attribute values. */
export function esc(value: string | number | boolean | null | undefined): string {
  return String(value ?? '')
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

/** Markup built by the functions here: already escaped, so `page` does not escape it again. */
export class Html {
  constructor(readonly text: string) {}
}

/** A template tag: interpolated values are escaped unless they are `Html` (or arrays of it). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += render(v) + (strings[i + 1] ?? '');
  });
  return new Html(out);
}

function render(v: unknown): string {
  if (v instanceof Html) return v.text;
  if (Array.isArray(v)) return v.map(render).join('');
  if (v === null || v === undefined || v === false) return '';
  return esc(typeof v === 'object' ? JSON.stringify(v) : (v as string | number | boolean));
}

/** The whole page: one stylesheet and one script, both served by the console itself. */
export function page(title: string, body: Html, opts: { bodyData?: Record<string, string> } = {}): string {
  const data = Object.entries(opts.bodyData ?? {})
    .map(([k, v]) => ` data-${k}="${esc(v)}"`)
    .join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)} · yello console</title>
<link rel="stylesheet" href="/assets/console.css">
<script src="/assets/console.js" defer></script>
</head>
<body${data}>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><nav aria-label="Main"><a href="/">Overview</a> <a href="/verify">Verify an export</a></nav></header>
<main id="main">
${body.text}
</main>
</body>
</html>
`;
}
