// How a store URL is shown: never with a password, whatever characters the password holds
// (issue 52 finding 8). A password may hold the URL's own delimiters (`/ ? # @ :`), so the
// authority cannot be taken to end at the first `/`: `postgresql://yello:Ab12/Sekr3t@db/y` was
// printed whole, and parsed as the host `yello` with the port `Ab12`. One split of the URL serves
// the redaction and the parser (connection.ts), so that what one calls a password the other does.

/** The parameters whose values are shown; every other value is `***` (connection.ts refuses unknown ones). */
const SHOWN_PARAMS = new Set([
  'host',
  'port',
  'dbname',
  'user',
  'target_session_attrs',
  'sslmode',
  'sslrootcert',
  'connect_timeout',
  'application_name',
]);

/** A store URL cut in three: `scheme://`, the userinfo (without its `@`; null when none), and the rest. */
export interface SplitUrl {
  scheme: string;
  userinfo: string | null;
  /** Hosts, path, query and fragment. */
  rest: string;
}

/**
 * Split a URL into scheme, userinfo and the rest; null when it has no `scheme://`. When a `:`
 * comes before the first `@`, a password may follow the user, and a password may hold `@`, `/`,
 * `?` and `#`: the userinfo then runs to the *last* `@`. That can take an `@` of a query value
 * along (`postgresql://h:5432/db?application_name=a@b`): more is hidden then, never less.
 * Without such a `:` the userinfo is what precedes the authority's last `@`, as RFC 3986 reads it.
 */
export function splitStoreUrl(url: string): SplitUrl | null {
  const m = /^([a-z][a-z0-9+.-]*:\/\/)(.*)$/is.exec(url);
  if (!m) return null;
  const scheme = m[1] ?? '';
  const after = m[2] ?? '';
  const firstAt = after.indexOf('@');
  if (firstAt < 0) return { scheme, userinfo: null, rest: after };
  const colon = after.indexOf(':');
  if (colon >= 0 && colon < firstAt) {
    const lastAt = after.lastIndexOf('@');
    return { scheme, userinfo: after.slice(0, lastAt), rest: after.slice(lastAt + 1) };
  }
  const end = after.search(/[/?#]/);
  const at = (end < 0 ? after : after.slice(0, end)).lastIndexOf('@');
  if (at < 0) return { scheme, userinfo: null, rest: after };
  return { scheme, userinfo: after.slice(0, at), rest: after.slice(at + 1) };
}

/** Whether the split URL's userinfo holds a password (a `:` after the user). */
export function holdsPassword(split: SplitUrl): boolean {
  return split.userinfo?.includes(':') === true;
}

/**
 * The URL with any password and every query value that could hold a secret replaced by `***`,
 * for logs and error messages. Works on strings that are not valid URLs too (it never throws
 * and never returns the input unredacted when it fails to parse).
 */
export function redactStoreUrl(url: string): string {
  const split = splitStoreUrl(url);
  if (!split) return '<unparseable store URL>';
  const { scheme, userinfo, rest } = split;
  let user = '';
  if (userinfo !== null) {
    const colon = userinfo.indexOf(':');
    user = `${colon >= 0 ? `${userinfo.slice(0, colon)}:***` : userinfo}@`;
  }
  const hash = rest.indexOf('#');
  const beforeHash = hash < 0 ? rest : rest.slice(0, hash);
  const fragment = hash < 0 ? '' : '#***';
  const q = beforeHash.indexOf('?');
  if (q < 0) return scheme + user + beforeHash + fragment;
  const params = beforeHash
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const key = decodeSafe(eq < 0 ? pair : pair.slice(0, eq));
      return eq < 0 || SHOWN_PARAMS.has(key) ? pair : `${pair.slice(0, eq)}=***`;
    })
    .join('&');
  return scheme + user + beforeHash.slice(0, q) + '?' + params + fragment;
}

/**
 * `text` (a driver's or the system's message) with the URL and its password taken out: the raw
 * URL becomes its redacted form, and the password, raw or percent-decoded, `***` wherever else
 * it shows. A message built from the URL's pieces (a host, a database name) cannot quote a
 * password that is never one of them, but a driver's text is not ours to trust.
 */
export function scrubStoreUrl(text: string, url: string): string {
  let out = text.split(url).join(redactStoreUrl(url)).split(url.replace(/\s+/g, ' ')).join(redactStoreUrl(url));
  const split = splitStoreUrl(url);
  if (split && holdsPassword(split)) {
    const userinfo = split.userinfo ?? '';
    const password = userinfo.slice(userinfo.indexOf(':') + 1);
    // Where the password ends is not known when it holds `@`: every cut at an `@` is a candidate, longest first.
    const cuts = [password, ...[...password.matchAll(/@/g)].map((m) => password.slice(0, m.index))];
    // Raw and percent-decoded, and as a message folded onto one line shows them.
    const forms = cuts.flatMap((c) => [c, decodeSafe(c)]).flatMap((c) => [c, c.replace(/\s+/g, ' '), c.replace(/\s+/g, ' ').trim()]);
    const secrets = new Set(forms.filter((c) => c !== ''));
    for (const secret of [...secrets].sort((a, b) => b.length - a.length)) out = out.split(secret).join('***');
  }
  return out;
}

export function decodeSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
