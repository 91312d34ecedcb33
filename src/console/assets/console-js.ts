// The console's one client script, served as /assets/console.js (the CSP allows no inline
// script and no other origin). It renders every daemon-provided string with textContent, never
// as HTML, and checks each message's signature with WebCrypto against the daemon's JWKS
// (docs/protocol.md §5.4), so a record changed anywhere on its way shows as unverified.
// Plain browser JavaScript kept as a string: the build (tsc) has no DOM types and no bundler.
// The signed payload's layout is not written here: it is interpolated from its one definition
// (src/shared/message-signing.ts), the one the daemon signs with.

import { MESSAGE_PAYLOAD_FIELDS, MESSAGE_PAYLOAD_TAG, SIGNATURE_ALG } from '../../shared/message-signing.js';

export const CONSOLE_JS = String.raw`'use strict';
(function () {
  var PAGE = 200;
  var enc = new TextEncoder();

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function b64u(bytes) {
    var s = '';
    for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }
  function unb64u(text) {
    var s = atob(text.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((text.length + 3) % 4));
    var out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  function big(s) { try { return BigInt(s); } catch (e) { return 0n; } }
  function keyOf(r) { return r.streamId + '/' + r.generation + '/' + r.position; }

  // --- signatures (docs/protocol.md §5.4) -------------------------------------------------
  var PAYLOAD_TAG = ${JSON.stringify(MESSAGE_PAYLOAD_TAG)};
  var PAYLOAD_FIELDS = ${JSON.stringify(MESSAGE_PAYLOAD_FIELDS)};
  var SIGNATURE_ALG = ${JSON.stringify(SIGNATURE_ALG)};
  /** The signed text of message m (messagePayload in src/shared/message-signing.ts). */
  function signedText(m) {
    var f = { chatId: m.chatId, fromAgentId: m.fromAgentId, toAgentId: m.toAgentId, createdAt: m.signature.createdAt, contentSha256: m.contentSha256 };
    return [PAYLOAD_TAG].concat(PAYLOAD_FIELDS.map(function (k) { return f[k]; })).join('\n');
  }
  function Verifier(jwks) {
    this.keys = new Map();
    var list = (jwks && jwks.keys) || [];
    for (var i = 0; i < list.length; i++) this.keys.set(list[i].kid, list[i]);
    this.imported = new Map();
  }
  Verifier.prototype.key = function (kid) {
    if (!this.imported.has(kid)) {
      var k = this.keys.get(kid);
      this.imported.set(kid, crypto.subtle.importKey('jwk', { kty: 'EC', crv: 'P-256', x: k.x, y: k.y, ext: true }, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['verify']));
    }
    return this.imported.get(kid);
  };
  /** Resolves to null when the record verifies, else to what is wrong. */
  Verifier.prototype.check = async function (r) {
    var w = r.wrapper, m = w && w.message;
    if (!m || !m.signature) return 'not a message';
    if (r.streamId !== w.chatId + ':' + w.authorAgentId) return 'the record names another stream than its own';
    if (m.chatId !== w.chatId || m.fromAgentId !== w.authorAgentId) return 'the message names another chat or sender than its stream';
    var digest = b64u(new Uint8Array(await crypto.subtle.digest('SHA-256', enc.encode(m.content))));
    if (digest !== m.contentSha256) return 'the content does not match its signed hash (changed after signing)';
    var sig = m.signature;
    if (sig.alg !== SIGNATURE_ALG) return 'not an ' + SIGNATURE_ALG + ' signature';
    if (!this.keys.has(sig.kid)) return 'signed with a key the daemon does not list (kid ' + sig.kid + ')';
    if (!/^[A-Za-z0-9_-]{86}$/.test(sig.value)) return 'malformed signature value';
    var ok = await crypto.subtle.verify({ name: 'ECDSA', hash: 'SHA-256' }, await this.key(sig.kid), unb64u(sig.value), enc.encode(signedText(m)));
    return ok ? null : 'the signature does not verify';
  };

  // --- the transcript ---------------------------------------------------------------------
  function Transcript(list, status, names, sideA) {
    this.list = list; this.status = status; this.names = names; this.sideA = sideA;
    this.records = new Map(); this.results = new Map(); this.verifier = new Verifier(null);
    this.shown = PAGE; this.query = ''; this.note = ''; this.pendingRender = false;
    // A file someone hands in: its receipts and writer fences carry no signature, so nothing
    // here can tell a real one from an invented one (yello verify checks them against the
    // stream's signed checkpoint). Shown as unverifiable claims, never as facts.
    this.untrusted = false;
  }
  var UNSIGNED = 'UNSIGNED, not verifiable here (yello verify checks it against the signed checkpoint): ';
  Transcript.prototype.name = function (id) { return this.names[id] || id; };
  Transcript.prototype.reset = function (jwks) {
    this.records.clear(); this.results.clear(); this.verifier = new Verifier(jwks); this.render();
  };
  Transcript.prototype.add = function (records) {
    var self = this;
    records.forEach(function (r) {
      var k = keyOf(r);
      if (self.records.has(k)) return;
      self.records.set(k, r);
      if (r.wrapper && r.wrapper.type === 'chat.message') {
        self.results.set(k, 'pending');
        self.verifier.check(r).then(function (why) { self.results.set(k, why); self.schedule(); }, function (e) { self.results.set(k, 'cannot check: ' + e.message); self.schedule(); });
      }
    });
    this.schedule();
  };
  Transcript.prototype.schedule = function () {
    var self = this;
    if (this.pendingRender) return;
    this.pendingRender = true;
    requestAnimationFrame(function () { self.pendingRender = false; self.render(); });
  };
  /** The contract's order: by time (a message's signature time; a receipt takes the time of what precedes it in its stream), then sender, then generation and position. */
  Transcript.prototype.ordered = function () {
    var byStream = new Map();
    this.records.forEach(function (r) {
      var s = r.streamId + '/' + r.generation;
      if (!byStream.has(s)) byStream.set(s, []);
      byStream.get(s).push(r);
    });
    var timed = [];
    byStream.forEach(function (rs) {
      rs.sort(function (a, b) { return big(a.position) < big(b.position) ? -1 : 1; });
      var t = '';
      rs.forEach(function (r) {
        var w = r.wrapper;
        if (w.type === 'chat.message') t = w.message.signature.createdAt;
        else if (w.type === 'chat.writer-fence') t = w.fence.claimedAt;
        timed.push({ t: t, r: r });
      });
    });
    timed.sort(function (x, y) {
      if (x.t !== y.t) return x.t < y.t ? -1 : 1;
      var ax = x.r.wrapper.authorAgentId, ay = y.r.wrapper.authorAgentId;
      if (ax !== ay) return ax < ay ? -1 : 1;
      var gx = big(x.r.generation), gy = big(y.r.generation);
      if (gx !== gy) return gx < gy ? -1 : 1;
      return big(x.r.position) < big(y.r.position) ? -1 : 1;
    });
    return timed.map(function (x) { return x.r; });
  };
  Transcript.prototype.render = function () {
    var self = this, all = this.ordered();
    var reads = new Map();
    all.forEach(function (r) {
      var w = r.wrapper;
      if (w.type !== 'chat.receipt') return;
      var target = w.receipt.peerStreamId + '/' + w.receipt.peerGeneration + '/' + (big(w.receipt.nextPosition) - 1n).toString();
      if (!reads.has(target)) reads.set(target, []);
      reads.get(target).push(r);
    });
    var items = [], lastGen = new Map(), q = this.query.toLowerCase();
    all.forEach(function (r) {
      var w = r.wrapper, author = self.name(w.authorAgentId);
      var prev = lastGen.get(r.streamId);
      if (prev !== undefined && prev !== r.generation) {
        items.push({ r: r, li: el('li', 'seam', author + "'s stream was reset: generation " + r.generation + ' starts here (generation ' + prev + ' is sealed, above)') });
      }
      lastGen.set(r.streamId, r.generation);
      if (w.type === 'chat.message') {
        if (q && w.message.content.toLowerCase().indexOf(q) < 0 && author.toLowerCase().indexOf(q) < 0) return;
        items.push({ r: r, li: self.message(r, reads.get(keyOf(r)) || []) });
      } else if (q) {
        return;
      } else if (w.type === 'chat.writer-fence') {
        var f = w.fence;
        var session = author + "'s writer session " + f.epoch + ' began at ' + f.claimedAt + (f.replaced ? ', taking over from a previous writer' : '') + (f.reason ? ' (reason given: ' + JSON.stringify(f.reason) + ')' : '');
        items.push({ r: r, li: self.untrusted ? el('li', 'session unverified', '⚠ ' + UNSIGNED + session) : el('li', 'session', '— ' + session + ' —') });
      } else if (w.type === 'chat.receipt') {
        var target = w.receipt.peerStreamId + '/' + w.receipt.peerGeneration + '/' + (big(w.receipt.nextPosition) - 1n).toString();
        var read = author + ' read up to position ' + w.receipt.nextPosition + ' of generation ' + w.receipt.peerGeneration;
        if (!self.records.has(target)) items.push({ r: r, li: self.untrusted ? el('li', 'receipt unverified', '⚠ ' + UNSIGNED + read + ' (those records are not in this file)') : el('li', 'receipt', read + ' (those records are not shown here)') });
      }
    });
    var start = q ? 0 : Math.max(0, items.length - this.shown);
    var frag = document.createDocumentFragment();
    for (var i = start; i < items.length; i++) frag.appendChild(items[i].li);
    this.list.replaceChildren(frag);
    var older = document.getElementById('older');
    if (older) older.hidden = start === 0;
    var messages = 0, verified = 0, bad = 0, unsigned = 0;
    this.results.forEach(function (v) { messages++; if (v === null) verified++; else if (v !== 'pending') bad++; });
    all.forEach(function (r) { if (r.wrapper.type !== 'chat.message') unsigned++; });
    var text = messages + ' messages, ' + verified + ' signatures verified in this browser' + (bad ? ', ' + bad + ' UNVERIFIED' : '');
    if (this.untrusted && unsigned) text += ', ' + unsigned + ' receipts and writer fences UNSIGNED (not verifiable here: run yello verify)';
    if (q) text = items.length + ' matching messages for “' + this.query + '” · ' + text;
    else if (start > 0) text = 'showing the newest ' + (items.length - start) + ' of ' + items.length + ' entries · ' + text;
    this.status.textContent = text + (this.note ? ' · ' + this.note : '');
  };
  Transcript.prototype.message = function (r, readers) {
    var w = r.wrapper, m = w.message, k = keyOf(r), res = this.results.get(k);
    var li = el('li');
    var box = el('article', 'msg' + (w.authorAgentId === this.sideA ? ' side-a' : ' side-b') + (res && res !== 'pending' ? ' unverified' : ''));
    box.setAttribute('aria-label', 'message from ' + this.name(m.fromAgentId));
    var head = el('header');
    head.appendChild(el('strong', '', this.name(m.fromAgentId) + ' → ' + this.name(m.toAgentId)));
    var t = el('time', '', m.signature.createdAt); t.setAttribute('datetime', m.signature.createdAt); head.appendChild(t);
    head.appendChild(el('span', '', 'generation ' + r.generation + ', position ' + r.position));
    head.appendChild(res === 'pending' ? el('span', '', 'checking signature…') : res === null ? el('span', 'sig-ok', '✓ signature verified') : el('span', 'sig-bad', '✗ UNVERIFIED: ' + res));
    box.appendChild(head);
    box.appendChild(el('p', 'content', m.content));
    var self = this;
    readers.forEach(function (rr) {
      var who = self.name(rr.wrapper.authorAgentId);
      box.appendChild(self.untrusted ? el('p', 'readmark unverified', '⚠ an unsigned receipt says ' + who + ' read up to here (not verifiable here: run yello verify)') : el('p', 'readmark', '✓ ' + who + ' read up to here'));
    });
    li.appendChild(box);
    return li;
  };

  // --- banners: what happened to a stream, and what a person does --------------------------
  function banners(box, got, names) {
    box.replaceChildren();
    var chat = got.chat;
    got.streams.forEach(function (s) {
      var author = names[s.authorAgentId] || s.authorAgentId;
      var reader = s.authorAgentId === chat.agentAId ? chat.agentB.username : chat.agentA.username;
      function add(cls, title, what, todo) {
        var b = el('div', 'banner ' + cls); b.setAttribute('role', cls === 'info' ? 'status' : 'alert');
        b.appendChild(el('strong', '', title)); b.appendChild(el('p', '', what)); b.appendChild(el('p', '', 'What to do: ' + todo));
        box.appendChild(b);
      }
      if (s.generation !== '1') {
        var caught = s.acknowledged && s.acknowledged.generation === s.generation;
        add(caught ? 'info' : '', 'Continuity break: ' + author + "'s stream was reset", 'It is at generation ' + s.generation + '; earlier generations are sealed and stay readable (shown above the red seam). ' + (caught ? reader + ' has acknowledged records of the new generation.' : reader + ' has not acknowledged anything of the new generation yet.'), reader + ' finishes what it missed of the sealed generation (the export shows it), then goes on as a person decided: yello chats read ' + chat.id + ' --from generation-start --ack (with ' + reader + "'s token).");
      }
      if (s.firstPosition !== '0') add('info', author + "'s stream was trimmed", 'Records of generation ' + s.generation + ' below position ' + s.firstPosition + ' are gone.', 'nothing, if ' + reader + ' had read them; otherwise ' + reader + ' goes on with yello chats read ' + chat.id + ' --from generation-start --ack.');
      if (s.corruptFrom !== undefined) add('', author + "'s stream is damaged", 'Reads may not reach position ' + s.corruptFrom + ' of generation ' + s.generation + '; what lies below is shown.', 'export the chat, run yello doctor, then reset the stream (below) so writers and readers start clean.');
    });
  }

  function chatView() {
    var d = document.body.dataset, names = {};
    names[d.a] = d.an; names[d.b] = d.bn;
    var status = document.getElementById('status'), box = document.getElementById('banners');
    var t = new Transcript(document.getElementById('transcript'), status, names, d.a);
    var live = el('div', 'banner'); live.setAttribute('role', 'alert');
    document.getElementById('older').addEventListener('click', function () { t.shown += PAGE; t.render(); });
    document.getElementById('q').addEventListener('input', function (e) { t.query = e.target.value.trim(); t.render(); });
    document.getElementById('search').addEventListener('submit', function (e) { e.preventDefault(); });
    var handlers = [];
    function on(name, f) { handlers.push([name, f]); }
    // EventSource retries by itself after a dropped stream, but gives up on an error answer
    // (the daemon restarting): then open a new one.
    function connect() {
      var src = new EventSource('chats/' + encodeURIComponent(d.chat) + '/events');
      handlers.forEach(function (h) { src.addEventListener(h[0], function (e) { h[1](JSON.parse(e.data)); }); });
      src.onerror = function () {
        if (src.readyState === 2) { t.note = 'disconnected; retrying'; t.schedule(); setTimeout(connect, 2000); }
      };
    }
    on('keys', function (jwks) { t.note = 'loading'; t.reset(jwks); });
    on('streams', function (got) { banners(box, got, names); });
    on('records', function (rs) { t.add(rs); });
    on('damage', function (u) { t.note = u.streamId + ' generation ' + u.generation + ' is damaged: ' + u.message; t.schedule(); });
    on('ready', function () { t.note = 'live'; t.schedule(); });
    on('break', function (b) {
      live.replaceChildren(el('strong', '', 'Live view interrupted: ' + b.reason), el('p', '', 'Stream ' + b.streamId + ' changed (expected ' + b.expected + ', now ' + b.actual + '). The view reloads the whole chat.'));
      box.prepend(live);
    });
    on('failure', function (f) { t.note = 'interrupted: ' + f.message + '; retrying'; t.schedule(); });
    connect();
  }

  function verifyView() {
    var status = document.getElementById('status');
    var t = new Transcript(document.getElementById('transcript'), status, {}, '');
    t.shown = Infinity;
    t.untrusted = true;
    document.getElementById('exportfile').addEventListener('change', async function (e) {
      var file = e.target.files[0];
      if (!file) return;
      status.textContent = 'reading ' + file.name + '…';
      var jwks = await (await fetch('keys.json')).json();
      t.reset(jwks);
      var records = [], bad = 0, checkpoints = 0;
      (await file.text()).split('\n').forEach(function (line) {
        if (!line.trim()) return;
        try { var v = JSON.parse(line); if (v.checkpoint) checkpoints++; else if (v.wrapper) records.push(v); else bad++; } catch (err) { bad++; }
      });
      t.note = file.name + ': ' + records.length + ' records, ' + checkpoints + ' checkpoints' + (bad ? ', ' + bad + ' lines that are not records' : '') + '; completeness and order: yello verify';
      t.add(records);
    });
  }

  var view = document.body.dataset.view;
  if (view === 'chat') chatView();
  else if (view === 'verify') verifyView();
})();
`;
