// The fence dashboard. Everything it shows comes from the v1 API of the
// server that serves it: GET /v1/locks (the locks held now), GET /v1/watch
// (the events, as Server-Sent Events, the recent ones replayed when the
// page opens), GET /v1/fences (every resource's last token and last fence,
// held or not), GET /v1/cluster.
//
// Tokens are integers up to 2^63-1, more than a JavaScript number holds
// exactly: every integer of every answer is kept as its decimal string
// (see parseJSON), and compared as such (see cmpInt).
'use strict';

(function () {
  // Limits of what the page fetches and keeps.
  const PAGE_DEFAULT = 100; // GET /v1/locks page size (?limit= on the page's URL changes it)
  const MAX_LOCKS = 5000; // locks listed at most
  const MAX_FENCES = 5000; // resources listed at most (GET /v1/fences)
  const MAX_RESOURCES = 200; // rows of the fences table at most
  const MAX_EVENTS = 500; // rows of the timeline at most; also the events replayed on opening
  const CLUSTER_EVERY_MS = 10000;
  const RELIST_EVERY_MS = 15000; // waiters change without events: list again now and then
  const RELIST_AFTER_EVENT_MS = 400;
  const STALL_MS = 45000; // no byte for this long (heartbeats come every 15 s): reconnect
  const RETRY_MAX_MS = 30000;
  const TOKEN_KEY = 'fence-dashboard-token';
  const MOVED_KEY = 'fence-dashboard-moved'; // the page moved from /ui/ to /ui once (see askToken)

  // parseJSON parses an API answer with every integer kept as its decimal
  // string: numbers outside strings that have no fraction or exponent are
  // quoted before JSON.parse sees them.
  function parseJSON(text) {
    let out = '';
    let start = 0;
    let i = 0;
    const n = text.length;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x22) { // a string: skip it, escapes included
        i++;
        while (i < n) {
          const d = text.charCodeAt(i);
          if (d === 0x5c) {
            i += 2;
          } else {
            i++;
            if (d === 0x22) break;
          }
        }
        continue;
      }
      if (c === 0x2d || (c >= 0x30 && c <= 0x39)) { // a number
        let j = i + 1;
        while (j < n && isDigit(text.charCodeAt(j))) j++;
        let k = j;
        while (k < n && isNumberChar(text.charCodeAt(k))) k++;
        if (k === j) { // an integer
          out += text.slice(start, i) + '"' + text.slice(i, j) + '"';
          start = j;
        }
        i = k;
        continue;
      }
      i++;
    }
    return JSON.parse(out + text.slice(start));
  }

  function isDigit(c) {
    return c >= 0x30 && c <= 0x39;
  }

  function isNumberChar(c) { // what may follow the integer part of a JSON number
    return isDigit(c) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;
  }

  // cmpInt compares two non-negative decimal integers given as strings.
  function cmpInt(a, b) {
    a = String(a || '0').replace(/^0+(?=\d)/, '');
    b = String(b || '0').replace(/^0+(?=\d)/, '');
    if (a.length !== b.length) return a.length < b.length ? -1 : 1;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  function maxInt(a, b) {
    if (a === undefined || a === null) return b;
    if (b === undefined || b === null) return a;
    return cmpInt(a, b) >= 0 ? a : b;
  }

  // parseTime returns the milliseconds of an RFC 3339 time (nanoseconds cut
  // to milliseconds), or NaN.
  function parseTime(s) {
    if (!s) return NaN;
    return Date.parse(String(s).replace(/(\.\d{3})\d+/, '$1'));
  }

  // SSEParser splits a text/event-stream into events, as the HTML standard
  // says: lines end in CR, LF or CRLF; a blank line dispatches.
  class SSEParser {
    constructor(onEvent, onRetry) {
      this.onEvent = onEvent;
      this.onRetry = onRetry;
      this.buf = '';
      this.data = [];
      this.type = '';
      this.id = null;
      this.lastCR = false;
    }

    push(chunk) {
      let text = this.buf + chunk;
      if (this.lastCR && text.startsWith('\n')) text = text.slice(1);
      this.lastCR = false;
      let from = 0;
      for (;;) {
        const m = /\r\n|\r|\n/g;
        m.lastIndex = from;
        const hit = m.exec(text);
        if (!hit) break;
        if (hit[0] === '\r' && hit.index === text.length - 1) {
          this.lastCR = true; // maybe the first half of a CRLF cut by the chunk
        }
        this.line(text.slice(from, hit.index));
        from = hit.index + hit[0].length;
      }
      this.buf = text.slice(from);
    }

    line(line) {
      if (line === '') {
        if (this.data.length > 0) {
          this.onEvent({ type: this.type || 'message', data: this.data.join('\n'), id: this.id });
        }
        this.data = [];
        this.type = '';
        return;
      }
      if (line.startsWith(':')) return; // a comment: the heartbeat
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      switch (field) {
        case 'data': this.data.push(value); break;
        case 'event': this.type = value; break;
        case 'id': if (!value.includes('\0')) this.id = value; break;
        case 'retry': if (/^\d+$/.test(value)) this.onRetry(Number(value)); break;
        default: break;
      }
    }
  }

  // What the page knows.
  const state = {
    prefix: '',
    pageSize: PAGE_DEFAULT,
    token: '', // a bearer token typed in, if the browser's credentials did not do
    locks: new Map(), // resource -> {resource, holder, token, expires_at, waiters, expiresMs}
    resources: new Map(), // resource -> {last_token, last_fence}
    listings: [], // listings in flight: the events that arrive meanwhile, to apply after
    skewMs: 0, // the server's clock minus ours, when far apart
    errors: new Map(), // source -> message
    notice: '',
    events: 0,
    rejected: 0,
    lastEventID: '',
    head: null, // {stream, seq} of the server's last event when the stream opened: events up to it are history
    retryMs: 1000,
    watch: null, // the AbortController of the stream
    watchGen: 0,
  };

  const $ = (id) => document.getElementById(id);

  // ApiError is a failed API request, with the problem's code.
  class ApiError extends Error {
    constructor(path, status, code, detail) {
      super(path.split('?')[0] + ': ' + (status ? status + ' ' : '') + code + (detail ? ': ' + detail : ''));
      this.status = status;
      this.code = code;
    }
  }

  // abs makes an API path absolute. A relative one resolves against the
  // page's URL, and fetch refuses a URL with the credentials that a user may
  // have typed into it (http://user:token@host/ui/); location.origin has none.
  function abs(path) {
    return location.origin + path;
  }

  function headers(extra) {
    const h = Object.assign({ Accept: 'application/json' }, extra || {});
    if (state.token) h.Authorization = 'Bearer ' + state.token;
    return h;
  }

  function noteSkew(resp, sentAt) {
    const date = Date.parse(resp.headers.get('Date') || '');
    if (Number.isNaN(date)) return;
    const est = date + 500 - (sentAt + Date.now()) / 2; // Date has whole seconds
    state.skewMs = Math.abs(est) > 1500 ? est : 0;
  }

  // api GETs path and returns its JSON answer; a problem is thrown as an
  // ApiError.
  async function api(path) {
    const sentAt = Date.now();
    let resp;
    try {
      resp = await fetch(abs(path), { headers: headers(), cache: 'no-store', credentials: 'same-origin' });
    } catch (e) {
      throw new ApiError(path, 0, 'unreachable', 'the server does not answer (' + (e.message || e) + ')');
    }
    noteSkew(resp, sentAt);
    const text = await resp.text();
    let body = null;
    try {
      body = parseJSON(text);
    } catch (e) {
      body = null;
    }
    if (!resp.ok) {
      throw problemError(path, resp, body, text);
    }
    if (body === null) throw new ApiError(path, resp.status, 'bad_answer', 'not JSON');
    if (location.pathname === '/ui') forget(MOVED_KEY); // the move worked: it may again
    return body;
  }

  function problemError(path, resp, body, text) {
    if (resp.status === 401) askToken();
    const code = body && body.code ? body.code : 'http_' + resp.status;
    const detail = body && body.detail ? body.detail : (text || '').slice(0, 200);
    return new ApiError(path, resp.status, code, detail);
  }

  function seg(name) {
    return encodeURIComponent(name);
  }

  function matches(resource) {
    return resource !== undefined && resource.startsWith(state.prefix);
  }

  // Status line.

  function setError(source, err) {
    if (err) {
      state.errors.set(source, err.message || String(err));
    } else {
      state.errors.delete(source);
    }
    renderStatus();
  }

  function renderStatus() {
    const el = $('status');
    const errs = [...state.errors.values()];
    el.classList.toggle('error', errs.length > 0);
    let text;
    if (errs.length > 0) {
      text = errs.join(' · ');
    } else {
      const n = [...state.locks.values()].filter((l) => matches(l.resource)).length;
      text = n + (n === 1 ? ' lock held' : ' locks held') + (state.prefix ? ' under “' + state.prefix + '”' : '');
      if (state.notice) text += ' · ' + state.notice;
    }
    if (el.textContent !== text) el.textContent = text;
  }

  function setConn(kind, text) {
    const el = $('conn');
    el.dataset.state = kind;
    el.textContent = text;
    document.body.dataset.watch = kind;
  }

  // Auth: with auth on, the browser sends the HTTP Basic credentials it was
  // given for the page; where it does not (or they do not let the API in),
  // a token can be typed in, kept for this tab, and sent as a bearer token.

  // askToken follows an API request's 401. A browser keeps the Basic
  // credentials it sent for /ui/ for the paths under /ui/ only, so it does
  // not send them to /v1/...; at /ui (no slash) it keeps them for the whole
  // server. So the first 401 at /ui/ moves the page to /ui, where the
  // browser finds the credentials of the realm again, sends them, and from
  // then on sends them to the API too. Past that, the page asks for a token.
  function askToken() {
    if (!state.token && location.pathname !== '/ui' && remember(MOVED_KEY)) {
      location.replace('/ui' + location.search + location.hash);
      return;
    }
    $('login').hidden = false;
  }

  // remember notes key for this tab, and reports whether it was not noted
  // before (false too when nothing can be kept).
  function remember(key) {
    try {
      if (sessionStorage.getItem(key) === '1') return false;
      sessionStorage.setItem(key, '1');
      return true;
    } catch (e) {
      return false;
    }
  }

  function forget(key) {
    try {
      sessionStorage.removeItem(key);
    } catch (e) { /* nothing kept */ }
  }

  function setupLogin() {
    try {
      state.token = sessionStorage.getItem(TOKEN_KEY) || '';
    } catch (e) {
      state.token = '';
    }
    $('login-forget').hidden = !state.token;
    $('login').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const v = $('login-token').value.trim();
      if (!v) return;
      state.token = v;
      try {
        sessionStorage.setItem(TOKEN_KEY, v);
      } catch (e) { /* not kept: fine */ }
      $('login-token').value = '';
      $('login').hidden = true;
      $('login-forget').hidden = false;
      restart();
    });
    $('login-forget').addEventListener('click', () => {
      state.token = '';
      forget(TOKEN_KEY);
      $('login-forget').hidden = true;
      restart();
    });
  }

  // Locks.

  let listing = null; // the listing in flight
  let listAgain = false;
  let listTimer = 0;

  // scheduleList lists the locks again after delay ms (the earliest wins).
  function scheduleList(delay) {
    if (listTimer) return;
    listTimer = setTimeout(() => {
      listTimer = 0;
      listLocks();
    }, delay);
  }

  // listPages reads a listing (GET /v1/locks, /v1/fences) under prefix,
  // page after page of pageSize, until its end or max items: the items
  // (the answers' member named key) and whether more were left.
  async function listPages(path, key, prefix, pageSize, max) {
    const items = [];
    let after = '';
    do {
      const q = new URLSearchParams();
      if (prefix) q.set('prefix', prefix);
      if (after) q.set('after', after);
      q.set('limit', String(pageSize));
      const page = await api(path + '?' + q.toString());
      items.push(...(page[key] || []));
      after = page.next || '';
    } while (after && items.length < max);
    return { items, more: after !== '' };
  }

  async function listLocks() {
    if (listing) {
      listAgain = true;
      return;
    }
    const prefix = state.prefix;
    const run = { events: [] };
    listing = run;
    state.listings.push(run);
    try {
      const { items: locks, more } = await listPages('/v1/locks', 'locks', prefix, state.pageSize, MAX_LOCKS);
      if (prefix !== state.prefix) return; // the filter changed meanwhile
      const next = new Map();
      for (const l of locks) {
        next.set(l.resource, lockOf(l));
      }
      // Keep the locks outside the prefix: the stream may still tell of them.
      for (const [r, l] of state.locks) {
        if (!r.startsWith(prefix)) next.set(r, l);
      }
      state.locks = next;
      // What happened while listing may be newer than the list: apply it again.
      for (const e of run.events) applyLockEvent(e);
      $('locks-note').hidden = !more;
      $('locks-note').textContent = more ? 'Showing the first ' + locks.length + ' locks only.' : '';
      for (const l of locks) seeResource(l.resource);
      setError('locks', null);
      renderLocks();
      renderResources();
    } catch (e) {
      setError('locks', e);
    } finally {
      state.listings = state.listings.filter((x) => x !== run);
      listing = null;
      if (listAgain) {
        listAgain = false;
        listLocks();
      }
    }
  }

  // lockOf is a held lock from a listing's entry or a grant's event. A
  // shared group has holders (a listing's, or the event's one) and no
  // holder of its own; a lease in a session names the session.
  function lockOf(l) {
    const shared = l.mode === 'shared';
    return {
      resource: l.resource,
      holder: l.holder,
      shared,
      holders: shared ? (l.holders || (l.holder !== undefined ? [l.holder] : [])) : [],
      session: l.session ? l.session.resource : '',
      revokeAt: l.revoke_at || '',
      token: l.token,
      expires_at: l.expires_at,
      expiresMs: parseTime(l.expires_at),
      waiters: l.waiters === undefined ? '0' : l.waiters,
    };
  }

  // heldBy says who holds l: its holder, or a shared group's holders.
  function heldBy(l) {
    if (l.shared) return 'shared: ' + l.holders.join(', ');
    return l.session ? l.holder + ' (in ' + l.session + ')' : l.holder;
  }

  // applyLockEvent brings the locks up to date with one event.
  function applyLockEvent(e) {
    const cur = state.locks.get(e.resource);
    switch (e.type) {
      case 'granted':
      case 'renewed': {
        const l = lockOf(e);
        l.waiters = cur ? cur.waiters : '0';
        if (l.shared && cur && cur.shared && cur.token === l.token) {
          // One more holder of the group, or one renewed: the group lasts
          // as long as its latest holder.
          l.holders = [...new Set([...cur.holders, e.holder])].sort();
          if (cur.expiresMs > l.expiresMs) {
            l.expires_at = cur.expires_at;
            l.expiresMs = cur.expiresMs;
          }
        } else if (!l.shared && cur && cur.token === l.token) {
          l.session = cur.session; // events do not name the session
        }
        state.locks.set(e.resource, l);
        break;
      }
      case 'released':
      case 'expired':
        if (cur && cur.shared && e.mode === 'shared' && cur.token === e.token) {
          cur.holders = cur.holders.filter((h) => h !== e.holder);
          if (cur.holders.length === 0) state.locks.delete(e.resource);
          break;
        }
        if (cur && (e.token === undefined || cur.token === e.token)) state.locks.delete(e.resource);
        break;
      case 'revoked':
        if (cur && (e.token === undefined || cur.token === e.token)) state.locks.delete(e.resource);
        break;
      case 'revoke_requested':
        if (cur && cur.token === e.token) cur.revokeAt = e.expires_at;
        break;
      default:
        break;
    }
  }

  function renderLocks() {
    const body = $('locks').tBodies[0];
    const rows = [...state.locks.values()].filter((l) => matches(l.resource))
      .sort((a, b) => (a.resource < b.resource ? -1 : a.resource > b.resource ? 1 : 0));
    const frag = document.createDocumentFragment();
    for (const l of rows) {
      const tr = document.createElement('tr');
      tr.dataset.resource = l.resource;
      tr.dataset.token = l.token;
      tr.append(
        cell(l.resource, 'resource'),
        cell(heldBy(l), 'holder'),
        cell(l.token, 'num token'),
        cell('', 'num left'),
        cell(l.waiters, 'num waiters'),
      );
      tr.cells[3].dataset.expires = String(l.expiresMs);
      tr.cells[3].title = 'expires at ' + l.expires_at + (l.revokeAt ? '; asked to let go, revoked at ' + l.revokeAt : '');
      if (l.shared) tr.dataset.shared = 'true';
      if (l.revokeAt) tr.dataset.revokeAt = l.revokeAt;
      frag.append(tr);
    }
    body.replaceChildren(frag);
    $('locks-empty').hidden = rows.length > 0;
    $('locks-empty').textContent = state.prefix ? 'No lock is held under “' + state.prefix + '”.' : 'No lock is held.';
    tick();
    renderStatus();
  }

  // tick counts the time left of each lease down.
  function tick() {
    const now = Date.now() + state.skewMs;
    for (const td of $('locks').querySelectorAll('td.left')) {
      const left = Number(td.dataset.expires) - now;
      const text = Number.isNaN(left) ? '?' : formatLeft(left);
      if (td.textContent !== text) td.textContent = text;
      td.classList.toggle('soon', left < 3000);
    }
  }

  function formatLeft(ms) {
    if (ms <= 0) return 'expired';
    if (ms < 10000) return (ms / 1000).toFixed(1) + ' s';
    const s = Math.floor(ms / 1000);
    if (s < 60) return s + ' s';
    const pad = (x) => String(x).padStart(2, '0');
    if (s < 3600) return Math.floor(s / 60) + ' m ' + pad(s % 60) + ' s';
    if (s < 86400) return Math.floor(s / 3600) + ' h ' + pad(Math.floor(s / 60) % 60) + ' m';
    return Math.floor(s / 86400) + ' d ' + pad(Math.floor(s / 3600) % 24) + ' h';
  }

  // Resources: last token and last fence, listed from GET /v1/fences
  // (every resource with a token issued, held now or not) and raised by
  // the events in between.

  // seeResource notes a resource listed or seen in an event.
  function seeResource(name) {
    if (name === undefined || name === '') return undefined;
    let r = state.resources.get(name);
    if (!r) {
      r = { last_token: undefined, last_fence: undefined };
      state.resources.set(name, r);
    }
    return r;
  }

  let fencing = false; // a listing of the fences in flight
  let fenceAgain = false;

  async function listFences() {
    if (fencing) {
      fenceAgain = true;
      return;
    }
    fencing = true;
    const prefix = state.prefix;
    try {
      const { items: fences } = await listPages('/v1/fences', 'fences', prefix, 1000, MAX_FENCES);
      if (prefix !== state.prefix) return; // the filter changed meanwhile
      for (const f of fences) {
        const r = seeResource(f.resource);
        // Both only grow: the higher of what is known wins.
        r.last_token = maxInt(r.last_token, f.last_token);
        r.last_fence = maxInt(r.last_fence, f.last_fence);
      }
      setError('resources', null);
      renderResourcesSoon();
    } catch (e) {
      setError('resources', e);
    } finally {
      fencing = false;
      if (fenceAgain) {
        fenceAgain = false;
        listFences();
      }
    }
  }

  let resourcesFrame = 0;
  function renderResourcesSoon() {
    if (resourcesFrame) return;
    resourcesFrame = requestAnimationFrame(() => {
      resourcesFrame = 0;
      renderResources();
    });
  }

  function renderResources() {
    const body = $('resources').tBodies[0];
    const names = [...state.resources.keys()].filter(matches).sort();
    const frag = document.createDocumentFragment();
    for (const name of names.slice(0, MAX_RESOURCES)) {
      const r = state.resources.get(name);
      const l = state.locks.get(name);
      const tr = document.createElement('tr');
      tr.dataset.resource = name;
      tr.append(
        cell(name, 'resource'),
        cell(l ? heldBy(l) : 'free', l ? 'held' : 'held free'),
        cell(r.last_token === undefined ? '…' : r.last_token, 'num last-token'),
        cell(r.last_fence === undefined ? '…' : r.last_fence, 'num last-fence'),
      );
      frag.append(tr);
    }
    body.replaceChildren(frag);
    $('resources-empty').hidden = names.length > 0;
  }

  // The timeline, from GET /v1/watch.

  // watchLoop keeps one stream open, reconnecting with Last-Event-ID.
  async function watchLoop(gen) {
    let failures = 0;
    while (gen === state.watchGen) {
      const ctrl = new AbortController();
      state.watch = ctrl;
      let stall = 0;
      const arm = () => {
        clearTimeout(stall);
        stall = setTimeout(() => ctrl.abort(), STALL_MS);
      };
      try {
        setConn('connecting', failures > 0 ? 'reconnecting' : 'connecting');
        const h = headers({ Accept: 'text/event-stream' });
        // A reconnect resumes after the last event; the first stream
        // replays the recent events, so that the timeline shows what
        // happened before the page opened.
        let path = '/v1/watch?replay=' + MAX_EVENTS;
        if (state.lastEventID) {
          h['Last-Event-ID'] = state.lastEventID;
          path = '/v1/watch';
        }
        arm();
        const resp = await fetch(abs(path), { headers: h, cache: 'no-store', credentials: 'same-origin', signal: ctrl.signal });
        if (!resp.ok) {
          const text = await resp.text();
          let body = null;
          try {
            body = parseJSON(text);
          } catch (e) {
            body = null;
          }
          const err = problemError('/v1/watch', resp, body, text);
          if (resp.status === 404) { // this lock service cannot watch: poll the list
            setConn('polling', 'no stream: polling');
            state.notice = 'this server has no event stream; the list is polled';
            setError('watch', null);
            clearTimeout(stall);
            pollLoop(gen);
            return;
          }
          if (resp.status === 400 && state.lastEventID) state.lastEventID = ''; // start afresh
          throw err;
        }
        failures = 0;
        setError('watch', null);
        setConn('live', 'live');
        state.head = eventSeq(resp.headers.get('Fence-Event-Head'));
        // Subscribed: whatever changes from now on comes as an event, so a
        // listing now misses nothing.
        listLocks();
        listFences();
        const parser = new SSEParser(onStreamEvent, (ms) => { state.retryMs = ms; });
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          arm();
          const { value, done } = await reader.read();
          if (done) break;
          parser.push(value);
        }
        clearTimeout(stall);
        if (gen !== state.watchGen) return;
        setConn('connecting', 'stream ended: reconnecting');
      } catch (e) {
        clearTimeout(stall);
        if (gen !== state.watchGen) return;
        failures++;
        if (e.name === 'AbortError') {
          setError('watch', new Error('/v1/watch: no data for ' + STALL_MS / 1000 + ' s; reconnecting'));
        } else if (e instanceof ApiError) {
          setError('watch', e);
        } else {
          setError('watch', new Error('/v1/watch: the stream broke (' + (e.message || e) + '); reconnecting'));
        }
      }
      const wait = Math.min(RETRY_MAX_MS, state.retryMs * Math.pow(2, Math.max(0, failures - 1)));
      if (failures > 0) {
        setConn('offline', 'offline: retrying in ' + Math.ceil(wait / 1000) + ' s');
      } else {
        setConn('connecting', 'reconnecting');
      }
      await sleep(wait);
    }
  }

  async function pollLoop(gen) {
    while (gen === state.watchGen) {
      listLocks();
      await sleep(5000);
    }
  }

  function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  // eventSeq splits an event ID, "<stream>-<seq>", into {stream, seq}.
  function eventSeq(id) {
    const m = /^([0-9a-f]+)-([0-9]+)$/.exec(id || '');
    return m ? { stream: m[1], seq: Number(m[2]) } : null;
  }

  // isHistory reports whether the event of id was published before the
  // stream opened (a replay's or a resume's catch-up).
  function isHistory(id) {
    const e = eventSeq(id);
    return state.head !== null && e !== null && e.stream === state.head.stream && e.seq <= state.head.seq;
  }

  function onStreamEvent(msg) {
    if (msg.id) state.lastEventID = msg.id;
    let e;
    try {
      e = parseJSON(msg.data);
    } catch (err) {
      setError('watch', new Error('/v1/watch: an event that is not JSON: ' + msg.data.slice(0, 100)));
      return;
    }
    if (!e.type) e.type = msg.type;
    onEvent(e, isHistory(msg.id));
  }

  // onEvent applies one event of the stream and adds it to the timeline.
  // An event from before the stream opened (history) goes on the timeline
  // and raises the fences it tells of; the locks held come from the
  // listing made once the stream opened, which is newer.
  function onEvent(e, history) {
    if (e.type === 'lost') {
      addTimelineRow(e);
      listLocks();
      listFences();
      return;
    }
    if (e.resource !== undefined) {
      const r = seeResource(e.resource);
      r.last_fence = maxInt(r.last_fence, e.last_fence);
      if (e.type === 'granted' || e.type === 'fence_raised') r.last_token = maxInt(r.last_token, e.token);
    }
    if (history) {
      addTimelineRow(e);
      renderResourcesSoon();
      return;
    }
    for (const run of state.listings) run.events.push(e);
    applyLockEvent(e);
    if (e.type === 'granted' || e.type === 'released' || e.type === 'expired' || e.type === 'revoked') {
      scheduleList(RELIST_AFTER_EVENT_MS); // the waiters changed
    }
    addTimelineRow(e);
    renderLocksSoon();
    renderResourcesSoon();
  }

  let locksFrame = 0;
  function renderLocksSoon() {
    if (locksFrame) return;
    locksFrame = requestAnimationFrame(() => {
      locksFrame = 0;
      renderLocks();
    });
  }

  const LABELS = {
    granted: 'granted',
    renewed: 'renewed',
    released: 'released',
    expired: 'expired',
    revoked: 'revoked',
    revoke_requested: 'asked to let go',
    fence_raised: 'fence raised',
    write_rejected: 'write rejected',
    lost: 'events lost',
  };

  // describe says in words what an event was.
  function describe(e) {
    const t = e.token;
    switch (e.type) {
      case 'granted':
        return (e.mode === 'shared' ? 'shared hold granted to ' : 'granted to ') + e.holder + until(e.expires_at);
      case 'renewed':
        return 'renewed by ' + e.holder + until(e.expires_at);
      case 'released':
        return 'released by ' + e.holder;
      case 'expired':
        return (e.mode === 'shared' ? 'the shared hold of ' : 'the lease of ') + e.holder + ' ran out';
      case 'revoke_requested':
        return e.holder + ' asked to let go' + (Number.isNaN(parseTime(e.expires_at)) ? '' : '; revoked at ' + clock(parseTime(e.expires_at), false) + ' unless released');
      case 'revoked':
        return (t !== undefined ? 'the lease of ' + e.holder + ' revoked' : 'revoked while free') +
          '; fence raised to ' + e.last_fence;
      case 'fence_raised':
        return 'writes with a token below ' + e.last_fence + ' are rejected';
      case 'write_rejected': {
        const what = e.key !== undefined ? 'key ' + e.key + ', ' + e.op : e.op;
        return 'stale write rejected: token ' + t + ' < last fence ' + e.last_fence + ' (' + what + ')';
      }
      case 'lost':
        return 'events were missed' + (e.detail ? ' (' + e.detail + ')' : '') + '; the locks were listed again';
      default:
        return '';
    }
  }

  function until(expiresAt) {
    const ms = parseTime(expiresAt);
    return Number.isNaN(ms) ? '' : ' until ' + clock(ms, false);
  }

  function clock(ms, withMillis) {
    const d = new Date(ms);
    const pad = (x, n) => String(x).padStart(n || 2, '0');
    let s = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
    if (withMillis) s += '.' + pad(d.getMilliseconds(), 3);
    return s;
  }

  function addTimelineRow(e) {
    state.events++;
    if (e.type === 'write_rejected') state.rejected++;
    const tr = document.createElement('tr');
    tr.className = 'ev ev-' + String(e.type).replace(/[^a-z_]/g, '');
    if (e.type === 'write_rejected') tr.classList.add('rejected');
    tr.dataset.type = e.type;
    if (e.resource !== undefined) tr.dataset.resource = e.resource;
    if (e.token !== undefined) tr.dataset.token = e.token;
    if (e.holder !== undefined) tr.dataset.holder = e.holder;
    tr.hidden = e.resource !== undefined && !matches(e.resource);

    const ms = parseTime(e.time);
    const tdTime = document.createElement('td');
    tdTime.className = 'time';
    const time = document.createElement('time');
    if (e.time) time.dateTime = e.time;
    time.textContent = Number.isNaN(ms) ? '' : clock(ms, true);
    time.title = e.time || '';
    tdTime.append(time);

    const tdType = document.createElement('td');
    const badge = document.createElement('span');
    badge.className = 'badge';
    badge.textContent = LABELS[e.type] || e.type;
    tdType.append(badge);

    tr.append(
      tdTime,
      tdType,
      cell(e.resource === undefined ? '' : e.resource, 'resource'),
      cell(e.holder === undefined ? '' : e.holder, 'holder'),
      cell(e.token === undefined ? '' : e.token, 'num token'),
      cell(e.last_fence === undefined ? '' : e.last_fence, 'num last-fence'),
      cell(describe(e), 'what'),
    );
    const body = $('timeline').tBodies[0];
    body.insertBefore(tr, body.firstChild);
    while (body.rows.length > MAX_EVENTS) body.deleteRow(body.rows.length - 1);
    $('timeline-empty').hidden = true;
    $('timeline-count').textContent = String(state.events);
    $('rejected-count').textContent = String(state.rejected);
  }

  function filterTimeline() {
    for (const tr of $('timeline').tBodies[0].rows) {
      const r = tr.dataset.resource;
      tr.hidden = r !== undefined && !matches(r);
    }
  }

  // The cluster.

  async function loadCluster() {
    try {
      const c = await api('/v1/cluster');
      $('cluster-role').textContent = c.role || '–';
      $('cluster-role').dataset.role = c.role || '';
      let leader = c.leader;
      if (!leader) leader = c.role === 'leader' ? 'this server' : 'none (an election is in progress)';
      $('cluster-leader').textContent = leader;
      $('cluster-epoch').textContent = c.epoch === undefined ? '–' : c.epoch;
      $('cluster-store').textContent = c.store || '–';
      const frag = document.createDocumentFragment();
      for (const s of c.servers || []) {
        const tr = document.createElement('tr');
        tr.append(cell(s.url || 'this server', 'url'), cell(s.role, 'role role-' + String(s.role).replace(/[^a-z]/g, '')));
        frag.append(tr);
      }
      $('servers').tBodies[0].replaceChildren(frag);
      setError('cluster', null);
    } catch (e) {
      setError('cluster', e);
    }
  }

  // Helpers.

  // cell makes a table cell of text. Names (resources, holders, servers),
  // which a long one may be cut to fit, have it whole in their title too.
  function cell(text, className) {
    const td = document.createElement('td');
    if (className) td.className = className;
    td.textContent = text === undefined || text === null ? '' : String(text);
    if (/\b(resource|holder|held|url)\b/.test(className || '') && td.textContent.length > 12) {
      td.title = td.textContent;
    }
    return td;
  }

  // The prefix filter, kept in the page's URL (?prefix=).
  function setupFilter() {
    const input = $('prefix');
    input.value = state.prefix;
    let timer = 0;
    const apply = () => {
      const v = input.value;
      if (v === state.prefix) return;
      state.prefix = v;
      const u = new URL(location.href);
      if (v) u.searchParams.set('prefix', v); else u.searchParams.delete('prefix');
      history.replaceState(null, '', u.pathname + u.search + u.hash);
      filterTimeline();
      renderLocks();
      renderResources();
      listLocks();
      listFences();
    };
    input.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(apply, 250);
    });
    $('filter').addEventListener('submit', (ev) => {
      ev.preventDefault();
      clearTimeout(timer);
      apply();
    });
  }

  // restart starts over: after a token was typed in or forgotten.
  function restart() {
    state.errors.clear();
    state.watchGen++;
    if (state.watch) state.watch.abort();
    listLocks();
    watchLoop(state.watchGen);
    loadCluster();
    listFences();
  }

  function main() {
    const q = new URLSearchParams(location.search);
    state.prefix = q.get('prefix') || '';
    const limit = Number(q.get('limit'));
    if (Number.isInteger(limit) && limit >= 1 && limit <= 1000) state.pageSize = limit;
    setupLogin();
    setupFilter();
    renderLocks();
    renderResources();
    listLocks(); // a first view at once; listed again once the stream is open
    listFences();
    state.watchGen++;
    watchLoop(state.watchGen);
    loadCluster();
    setInterval(tick, 250);
    setInterval(loadCluster, CLUSTER_EVERY_MS);
    setInterval(() => scheduleList(0), RELIST_EVERY_MS);
    setInterval(listFences, RELIST_EVERY_MS);
  }

  // For tests and the console.
  window.fenceDashboard = { parseJSON, cmpInt, SSEParser, describe };

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', main);
  } else {
    main();
  }
})();
