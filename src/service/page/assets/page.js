// The operator page's script (served as /page/page.js; the HTML is ../shell.ts, the JSON ../routes.ts). Plain DOM, no
// framework, no outside asset (docs/operations.md, "The operator page"). It polls one page of GET /bridges (server-side paging and filter),
// so a refresh costs the same with 1,000 bridges as with 50; the bridge view (#bridge=NAME) polls that bridge only.
// Text goes in through textContent, never as HTML: names, queues and error sentences come from configs and brokers.

const POLL_MS = 5000;
const LIMIT = 50;
const TOKEN_KEY = 'broker-bridge-admin-token';
const admin = document.body.dataset.admin === 'on';
const $ = (id) => document.getElementById(id);
const view = { offset: 0, q: '', problems: false };
let timer;
let generation = 0;

// ---- formatting -------------------------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (k === 'class') e.className = v;
    else if (k === 'title') e.title = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== undefined && c !== null) e.append(c instanceof Node ? c : String(c));
  return e;
}

function ago(iso) {
  if (!iso) return 'never';
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (s < 0) return `in ${duration(-s)}`;
  return `${duration(s)} ago`;
}

function duration(s) {
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

function clock(iso) {
  return iso ? new Date(iso).toLocaleTimeString() : '';
}

function num(n) {
  return typeof n === 'number' ? n.toLocaleString('en-US', { maximumFractionDigits: 1 }) : '–';
}

function bytes(n) {
  if (typeof n !== 'number') return '–';
  if (n < 1024) return `${n} B`;
  if (n < 1048576) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1048576).toFixed(1)} MiB`;
}

function seconds(s) {
  if (typeof s !== 'number') return '–';
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`;
}

/** The state and why, as the one sentence an operator reads first. */
function stateSentence(b) {
  const err = b.lastError ? `${b.lastError.message} (${clock(b.lastError.at)})` : '';
  switch (b.state) {
    case 'running':
      // A process that knows declared states (`state:` in bridges.yaml) says so: a resume through the API lasts until
      // the next reload or restart, when the file pauses the bridge again.
      return `running since ${clock(b.since)}${b.declaredState === 'paused' ? ' — resumed by an operator; bridges.yaml says paused: paused again at the next reload or restart' : ''}`;
    case 'paused': {
      // `pause: {by}` where the process says who paused it (a declared `state: paused`, or the API); else `paused`.
      const by = b.pause?.by === 'config' ? 'declared in bridges.yaml (state: paused)' : b.pause?.by === 'api' || b.paused ? 'by an operator: lasts until the next reload or restart' : '';
      return `paused since ${clock(b.since)}${by ? ` — ${by}` : ''}`;
    }
    case 'standby':
      return 'standby: another process consumes the source exclusively; this one takes over when it stops';
    case 'reconnecting':
      return b.retry
        ? `backing off: attempt ${b.retry.attempt} failed, next try ${ago(b.retry.nextAt)} (${clock(b.retry.nextAt)})${err ? ` — ${err}` : ''}`
        : `reconnecting${err ? ` — ${err}` : ''}`;
    case 'stalled':
      // The watchdog's sentence says what it saw ("bridge 'x' stalled: 20 message(s) in flight … restarting its session").
      return err || 'stalled: nothing forwarded for stall-timeout while there was work';
    case 'failed':
      return `failed: ${err || 'no error recorded'}`;
    case 'target-full':
      return `target full: waiting for room since ${clock(b.targetFullSince)} (${ago(b.targetFullSince)})`;
    case 'blocked':
      return 'blocked by the target broker (flow control)';
    case 'cache-down':
      return `duplicate-ID cache unreachable: messages are held${err ? ` — ${err}` : ''}`;
    case 'cache-untrusted':
      return 'cache may have lost IDs: copies are flagged as possible duplicates';
    case 'cache-horizon-short':
      return 'cache remembers less time back than min-cache-horizon';
    default:
      return `${b.state} since ${clock(b.since)}`;
  }
}

function backlog(b) {
  if (typeof b.sourceDepth === 'number') return num(b.sourceDepth);
  return b.sourceDepthNote ?? 'not available';
}

function oldest(b) {
  const age = b.oldestUnforwardedAgeSeconds;
  if (typeof age === 'number') return age > 0 ? duration(age) : 'none held';
  return el('span', { class: 'muted', title: 'this process does not report it' }, 'not reported');
}

function endpoint(text, conn, connections) {
  const c = conn ? connections.get(conn) : undefined;
  const where = c ? ` (${c.broker}${c.since ? `) since ${clock(c.since)}` : ')'}` : '';
  return el('div', {}, text, el('div', { class: 'muted small' }, conn ? `on ${conn}${where}` : 'not connected'));
}

function byReason(map) {
  const parts = Object.entries(map ?? {}).map(([r, n]) => `${r}: ${num(n)}`);
  return parts.length ? parts.join(', ') : '0';
}

// ---- fetching and actions ---------------------------------------------------------------------------------------

async function getJson(url) {
  const res = await fetch(url, { headers: { accept: 'application/json' }, cache: 'no-store' });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${(await res.json().catch(() => ({}))).error ?? res.statusText}`);
  return res.json();
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) ?? '';
}

function say(text, kind) {
  const p = $('outcome');
  p.textContent = text;
  p.className = kind ?? '';
}

async function act(name, action) {
  const what = name === undefined ? 'reload the configuration' : `${action} bridge '${name}'`;
  if (!window.confirm(`Really ${what}?`)) return;
  const url = name === undefined ? '/reload' : `/bridges/${encodeURIComponent(name)}/${action}`;
  say(`${what}: asking…`);
  try {
    const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token()}` } });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) say(refusal(what, res, body), 'bad');
    else if (name === undefined) say(`reload applied (configuration #${body.generation}): ${['added', 'removed', 'changed'].map((k) => `${k} ${(body[k] ?? []).length}`).join(', ')}`, 'good');
    else say(`${what}: done (${res.status}); the bridge is now ${body.state ?? body.bridge?.state ?? 'unknown'}`, 'good');
  } catch (err) {
    say(`${what}: failed: ${err.message}`, 'bad');
  }
  void refresh();
}

/** The refusal of an admin request as the sentence the page shows. */
function refusal(what, res, body) {
  if (res.status === 401) return `${what}: refused (401): the admin token is wrong`;
  return `${what}: refused (${res.status}): ${body.error ?? (body.errors ?? []).join('; ')}`;
}

async function postJson(url, body) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token()}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { res, body: await res.json().catch(() => ({})) };
}

function total(map) {
  return Object.values(map ?? {}).reduce((a, n) => a + n, 0);
}

// A replay (docs/operations.md, "Replaying dead letters") as `replay --dry-run`, then `replay`: the dry run's counts by
// reason are what the operator confirms, and the pass replays at most that many (--count), so dead letters that arrive
// in between are not replayed unseen.
async function replay(name) {
  const what = `replay the dead letters of bridge '${name}'`;
  const url = `/bridges/${encodeURIComponent(name)}/replay`;
  say(`${what}: dry run…`);
  try {
    const dry = await postJson(url, { 'dry-run': true });
    if (!dry.res.ok) return say(refusal(what, dry.res, dry.body), 'bad');
    const n = total(dry.body.byReason);
    const rest = `skipped ${num(dry.body.skipped)}, left ${num(dry.body.left)}`;
    if (n === 0) return say(`${what}: nothing to replay (dry run: ${rest})`, 'good');
    const found = `${num(n)} to replay, by reason: ${byReason(dry.body.byReason)} (${rest})`;
    if (!window.confirm(`Replay the dead letters of bridge '${name}'? The dry run found ${found}.`)) return say(`${what}: not done; the dry run found ${found}`);
    say(`${what}: replaying ${num(n)}…`);
    const run = await postJson(url, { count: n });
    if (!run.res.ok) return say(refusal(what, run.res, run.body), 'bad');
    const s = run.body;
    const result = s.result === 'done' ? 'done' : s.result === 'refused-again' ? 'done, some refused again (back in the dead-letter destination)' : `${s.result}${s.error ? `: ${s.error}` : ''}`;
    say(
      `${what}: ${result}; replayed ${num(s.replayed)}, dropped as already delivered ${num(s.droppedAsDelivered)}, flagged ${num(s.flagged)}, refused again ${num(s.refusedAgain)}, skipped ${num(s.skipped)}, left ${num(s.left)}`,
      s.result === 'done' ? 'good' : 'bad',
    );
  } catch (err) {
    say(`${what}: failed: ${err.message}`, 'bad');
  } finally {
    void refresh();
  }
}

function actions(b) {
  if (!admin || !token()) return el('span', { class: 'muted' }, 'read-only');
  const span = el('span', { class: 'actions' });
  const button = (action) => {
    const btn = el('button', { type: 'button', 'data-action': action, 'data-bridge': b.name }, action);
    btn.addEventListener('click', () => void act(b.name, action));
    span.append(btn);
  };
  button(b.paused ? 'resume' : 'pause');
  button('restart');
  // Where the dead letters can be read back (`replay` in the row: a queue, or a JetStream stream).
  if (b.replay) {
    const btn = el('button', { type: 'button', 'data-action': 'replay', 'data-bridge': b.name, title: 'dry run first, then a confirmation' }, 'replay dead letters');
    btn.addEventListener('click', () => void replay(b.name));
    span.append(btn);
  }
  return span;
}

function showAdmin() {
  const note = $('admin-note');
  const has = token() !== '';
  $('admin-form').hidden = !admin;
  $('token-forget').hidden = !has;
  $('reload').hidden = !has;
  if (!admin) note.textContent = 'Read-only: this process has no admin token (admin-token or ADMIN_TOKEN_FILE), so its pause, resume, restart and reload endpoints are off.';
  else if (!has) note.textContent = 'Read-only until you enter the admin token (kept in this tab only).';
  else note.textContent = 'Admin token set for this tab: actions ask for a confirmation.';
}

// ---- the list -----------------------------------------------------------------------------------------------------

function row(b, connections) {
  const c = b.counters ?? {};
  const stalled = b.state === 'stalled' || (c.stalls ?? 0) > 0;
  const tr = el(
    'tr',
    { 'data-bridge': b.name, 'data-state': b.state, class: `state-${b.state}` },
    el('td', {}, el('a', { href: `#bridge=${encodeURIComponent(b.name)}` }, b.name)),
    el('td', { class: 'state' }, el('span', { class: `badge state-${b.state}` }, b.state), ' ', el('span', { class: 'reason' }, stateSentence(b))),
    el('td', { class: 'endpoint' }, endpoint(b.source, b.connections?.source, connections)),
    el('td', { class: 'endpoint' }, endpoint(b.target, b.connections?.target, connections)),
    el('td', { class: 'n' }, num(c.forwarded), el('div', { class: 'muted small' }, `${num(b.forwardedPerSecond)}/s`), typeof c.received === 'number' ? el('div', { class: 'muted small' }, `of ${num(c.received)} received`) : undefined),
    el('td', { class: 'n' }, num(b.inFlight), el('div', { class: 'muted small' }, bytes(b.inFlightBytes))),
    el('td', { class: 'n backlog' }, backlog(b)),
    el('td', { class: 'n' }, oldest(b)),
    el('td', { class: 'n' }, b.latency ? `${seconds(b.latency.p50)} / ${seconds(b.latency.p99)}` : el('span', { class: 'muted', title: 'nothing forwarded in the last minute' }, '–')),
    el('td', { class: 'n' }, num(c.duplicatesDropped)),
    el('td', { class: 'n' }, num(c.possibleDuplicates)),
    el('td', { class: 'n' }, byReason(b.deadLetteredByReason)),
    el('td', { class: 'n' }, num(c.filtered)),
    el('td', {}, b.lastForwardAt ? ago(b.lastForwardAt) : 'never'),
    el('td', { class: 'stall' }, stalled ? el('span', { class: 'bad', title: `${c.stalls ?? 0} stall(s) since start` }, `⚠ ${c.stalls ?? 0}`) : ''),
    el('td', {}, actions(b)),
  );
  return tr;
}

/** `mine`: the refresh this one belongs to. An answer that comes after a newer refresh began is not shown: typing in
 * the filter starts one per key, and their answers can arrive out of order (the table would show an older query's). */
async function refreshList(mine) {
  const params = new URLSearchParams({ offset: String(view.offset), limit: String(LIMIT) });
  if (view.q) params.set('q', view.q);
  if (view.problems) params.set('state', '!running');
  const data = await getJson(`/bridges?${params}`);
  if (mine !== generation) return;
  if (data.matched > 0 && view.offset >= data.matched) {
    view.offset = Math.max(0, Math.floor((data.matched - 1) / LIMIT) * LIMIT);
    return refreshList(mine);
  }
  const connections = new Map((data.connections ?? []).map((c) => [c.name, c]));
  const tbody = $('bridges').tBodies[0];
  tbody.replaceChildren(...data.bridges.map((b) => row(b, connections)));
  if (data.bridges.length === 0) tbody.append(el('tr', {}, el('td', { colspan: '16', class: 'muted' }, 'no bridge matches')));
  const last = view.offset + data.bridges.length;
  $('range').textContent = `${data.matched === 0 ? 0 : view.offset + 1}–${last} of ${data.matched}${data.matched !== data.total ? ` (of ${data.total})` : ''}`;
  $('prev').disabled = view.offset === 0;
  $('next').disabled = last >= data.matched;
  if (data.config) $('generation').textContent = `configuration #${data.config.generation ?? ''} ${String(data.config.hash ?? '').slice(0, 12)}`;
}

// ---- one bridge -----------------------------------------------------------------------------------------------------

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/** Rate (left axis) and latency p50/p99 (right axis) over the samples; inline SVG, no library. */
function chart(history) {
  const W = 720, H = 200, L = 50, R = 60, T = 24, B = 24;
  const s = history.samples;
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': 'forward rate and latency, last 15 minutes' });
  if (s.length < 1) {
    root.append(svg('text', { x: L, y: H / 2 }, `collecting: one sample every ${history.intervalSeconds} s`));
    return root;
  }
  // The last 15 minutes, or since the first sample of a younger process (else its trace would be a few pixels wide).
  const t1 = Date.now();
  const t0 = Math.max(t1 - 15 * 60_000, Date.parse(s[0].at) - history.intervalSeconds * 1000);
  const x = (iso) => L + ((Date.parse(iso) - t0) / (t1 - t0)) * (W - L - R);
  const maxRate = Math.max(1, ...s.map((p) => p.forwardedPerSecond));
  const maxLat = Math.max(0.001, ...s.map((p) => p.latencyP99 ?? 0));
  const yRate = (v) => H - B - (v / maxRate) * (H - T - B);
  const yLat = (v) => H - B - (v / maxLat) * (H - T - B);
  const line = (pts, cls) => svg('polyline', { points: pts.join(' '), class: cls, fill: 'none' });
  root.append(svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }));
  root.append(svg('text', { x: 2, y: T + 4, class: 'rate' }, `${num(maxRate)}/s`));
  root.append(svg('text', { x: 2, y: H - B, class: 'rate' }, '0/s'));
  root.append(svg('text', { x: W - R + 4, y: T + 4, class: 'p99' }, seconds(maxLat)));
  root.append(svg('text', { x: L, y: H - 6, class: 'muted' }, `${duration((t1 - t0) / 1000)} ago`));
  root.append(svg('text', { x: W - R - 24, y: H - 6, class: 'muted' }, 'now'));
  root.append(line(s.map((p) => `${x(p.at).toFixed(1)},${yRate(p.forwardedPerSecond).toFixed(1)}`), 'rate'));
  const lat = (key) => s.filter((p) => p[key] !== null).map((p) => `${x(p.at).toFixed(1)},${yLat(p[key]).toFixed(1)}`);
  root.append(line(lat('latencyP50'), 'p50'), line(lat('latencyP99'), 'p99'));
  // A dot per rate sample: one sample is no line yet.
  for (const p of s) root.append(svg('circle', { cx: x(p.at).toFixed(1), cy: yRate(p.forwardedPerSecond).toFixed(1), r: 2, class: 'rate' }));
  const legend = svg('text', { x: L + 8, y: 14 });
  for (const [cls, label] of [['rate', 'forwarded/s  '], ['p50', 'latency p50  '], ['p99', 'latency p99']]) legend.append(svg('tspan', { class: cls }, label));
  root.append(legend);
  return root;
}

function field(key, value) {
  const shown = value === null || value === undefined ? '–' : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return el('tr', {}, el('th', {}, key), el('td', {}, shown));
}

async function refreshDetail(name, mine) {
  const path = `/bridges/${encodeURIComponent(name)}`;
  const [b, history] = await Promise.all([getJson(path), getJson(`${path}/history`)]);
  if (mine !== generation) return;
  $('detail-name').textContent = b.name;
  const state = $('detail-state');
  state.replaceChildren(el('span', { class: `badge state-${b.state}` }, b.state), ' ', stateSentence(b));
  state.dataset.state = b.state;
  $('detail-actions').replaceChildren(actions(b));
  $('chart').replaceChildren(chart(history));
  const rows = [];
  for (const [k, v] of Object.entries(b)) {
    if (k === 'counters') for (const [ck, cv] of Object.entries(v ?? {})) rows.push(field(`counters.${ck}`, cv));
    else rows.push(field(k, v));
  }
  $('detail-fields').tBodies[0].replaceChildren(...rows);
  if (!$('detail-config').textContent) {
    const cfg = await getJson(`${path}/config`);
    if (mine !== generation) return;
    $('detail-config').textContent = JSON.stringify(cfg.config, null, 2);
  }
}

// ---- the loop -------------------------------------------------------------------------------------------------------

function selected() {
  const m = /^#bridge=(.+)$/.exec(location.hash);
  return m ? decodeURIComponent(m[1]) : undefined;
}

async function refresh() {
  clearTimeout(timer);
  const mine = ++generation;
  const name = selected();
  $('list').hidden = name !== undefined;
  $('detail').hidden = name === undefined;
  try {
    if (name === undefined) await refreshList(mine);
    else await refreshDetail(name, mine);
    if (mine === generation) $('refreshed').textContent = `updated ${new Date().toLocaleTimeString()}, every ${POLL_MS / 1000} s`;
  } catch (err) {
    if (mine === generation) $('refreshed').textContent = `not updated: ${err.message}`;
  }
  // A hidden tab does not poll; it refreshes when shown again.
  if (mine === generation && !document.hidden) timer = setTimeout(() => void refresh(), POLL_MS);
}

$('q').addEventListener('input', () => {
  view.q = $('q').value.trim();
  view.offset = 0;
  void refresh();
});
$('problems').addEventListener('change', () => {
  view.problems = $('problems').checked;
  view.offset = 0;
  void refresh();
});
$('prev').addEventListener('click', () => {
  view.offset = Math.max(0, view.offset - LIMIT);
  void refresh();
});
$('next').addEventListener('click', () => {
  view.offset += LIMIT;
  void refresh();
});
$('token-use').addEventListener('click', () => {
  const t = $('token').value.trim();
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  $('token').value = '';
  showAdmin();
  void refresh();
});
$('token-forget').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  showAdmin();
  void refresh();
});
$('reload').addEventListener('click', () => void act(undefined, 'reload'));
window.addEventListener('hashchange', () => {
  $('detail-config').textContent = '';
  say('');
  void refresh();
});
document.addEventListener('visibilitychange', () => {
  if (!document.hidden) void refresh();
});
showAdmin();
void refresh();
