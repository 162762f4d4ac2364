/**
 * The operator page's HTML (GET /): a shell the script (assets/page.js) fills from the JSON endpoints. Everything it
 * loads comes from this process (docs/operations.md, "The operator page": no external asset, it works air-gapped),
 * under a strict Content-Security-Policy: no inline script or style, no other origin, no frames, no forms posted.
 */

/** Sent with the page and its assets. 'self' only; connect-src for the polling of /bridges. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The page; `admin` says whether this process has an admin token at all (the page then asks for it). */
export function pageHtml(admin: boolean, version: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>broker-bridge</title>
<link rel="stylesheet" href="/page/page.css">
<script type="module" src="/page/page.js"></script>
</head>
<body data-admin="${admin ? 'on' : 'off'}">
<header>
  <h1><a href="#">broker-bridge</a></h1>
  <span class="muted" id="version">${escapeHtml(version)}</span>
  <span id="generation" class="muted"></span>
  <span class="spacer"></span>
  <span id="refreshed" class="muted" aria-live="polite"></span>
</header>
<section id="admin" aria-label="admin token">
  <span id="admin-note"></span>
  <span id="admin-form" hidden>
    <label>Admin token <input id="token" type="password" autocomplete="off" size="24"></label>
    <button type="button" id="token-use">Use</button>
    <button type="button" id="token-forget" hidden>Forget</button>
    <button type="button" id="reload" hidden>Reload configuration</button>
  </span>
</section>
<p id="outcome" role="status" aria-live="polite"></p>
<main id="list">
  <div class="controls">
    <label>Filter <input id="q" type="search" placeholder="name, queue, connection or state" size="32"></label>
    <label><input id="problems" type="checkbox"> only bridges that are not running</label>
    <span class="spacer"></span>
    <button type="button" id="prev">&larr; previous</button>
    <span id="range" class="muted"></span>
    <button type="button" id="next">next &rarr;</button>
  </div>
  <div class="scroll"><table id="bridges">
    <thead><tr>
      <th>Bridge</th><th>State</th><th>Source</th><th>Target</th><th>Forwarded</th><th>In flight</th>
      <th>Source backlog</th><th>Oldest unforwarded</th><th>Latency p50 / p99</th><th>Duplicates dropped</th>
      <th>Flagged copies</th><th>Dead-lettered</th><th>Filtered</th><th>Last forward</th><th>Stalls</th><th>Actions</th>
    </tr></thead>
    <tbody></tbody>
  </table></div>
</main>
<main id="detail" hidden>
  <p><a href="#">&larr; all bridges</a></p>
  <h2 id="detail-name"></h2>
  <p id="detail-state"></p>
  <div id="detail-actions"></div>
  <h3>Forward rate and latency, last 15 minutes</h3>
  <div id="chart"></div>
  <div class="columns">
    <div><h3>Status</h3><table id="detail-fields" class="fields"><tbody></tbody></table></div>
    <div><h3>Configuration <span class="muted">(secrets and URLs redacted)</span></h3><pre id="detail-config"></pre></div>
  </div>
</main>
<footer class="muted">JSON: <a href="/bridges">/bridges</a> · <a href="/readyz">/readyz</a> · <a href="/metrics">/metrics</a></footer>
</body>
</html>
`;
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
