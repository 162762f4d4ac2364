/**
 * GET /metrics (Prometheus) and GET /health (200 while every bridge runs, 503 otherwise, with the states as JSON, and
 * for a Redis cache the losses it detected and the addresses whose redelivered copies it flags now).
 * Used by the compose healthcheck; bound to the configured metrics-port only.
 */
import { createServer, type Server } from 'node:http';
import type { Metrics } from '../core/metrics.js';

/** `cacheTrust`: what the duplicate-ID cache says of losses and of the addresses whose copies it flags now. */
export function startHttpServer(port: number, metrics: Metrics, cacheTrust?: () => unknown): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.url === '/health') {
      const ok = metrics.healthy();
      res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: ok ? 'ok' : 'degraded', bridges: metrics.snapshot(), ...(cacheTrust ? { cache: cacheTrust() } : {}) }));
      return;
    }
    if (req.url === '/metrics') {
      metrics.registry.metrics().then(
        (body) => {
          res.writeHead(200, { 'content-type': metrics.registry.contentType });
          res.end(body);
        },
        () => {
          res.writeHead(500);
          res.end();
        },
      );
      return;
    }
    res.writeHead(404);
    res.end();
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => resolve(server));
  });
}
