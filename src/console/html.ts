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

/** Where a page lives: the console's secret prefix (every link is relative to it), and the session's CSRF token for the sign-out form. */
export interface PageBase {
  prefix: string;
  csrf?: string;
}

/**
 * The whole page: one stylesheet and one script, both served by the console itself. Links are
 * relative to `<base href>`, the console's prefix; a page without one (a request outside the
 * prefix) has no navigation, so it gives away nothing of where the console lives.
 */
export function page(title: string, body: Html, opts: { bodyData?: Record<string, string>; base?: PageBase } = {}): string {
  const data = Object.entries(opts.bodyData ?? {})
    .map(([k, v]) => ` data-${k}="${esc(v)}"`)
    .join('');
  const base = opts.base;
  const signOut = base?.csrf
    ? ` <form class="signout" method="post" action="logout"><input type="hidden" name="csrf" value="${esc(base.csrf)}"><button type="submit">Sign out</button></form>`
    : '';
  const head = base
    ? `<base href="${esc(base.prefix)}">
<link rel="stylesheet" href="assets/console.css">
<script src="assets/console.js" defer></script>`
    : '';
  const nav = base
    ? `<header class="top"><nav aria-label="Main"><a href="./">Overview</a> <a href="verify">Verify an export</a>${signOut}</nav></header>`
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)} · yello console</title>
${head}
</head>
<body${data}>
<a class="skip" href="#main">Skip to content</a>
${nav}
<main id="main">
${body.text}
</main>
</body>
</html>
`;
}
