# syntax=docker/dockerfile:1
# broker-bridge image: `docker build -t broker-bridge .`, or `docker compose up --build`.
# Mount the configuration at /etc/broker-bridge/bridges.yaml (see docker-compose.yml).

# Node 24, the active LTS line (Node 20 reached its end of life on 2026-04-30); the code still runs on Node >= 20.19.
ARG NODE_IMAGE=node:24-bookworm-slim

# --- build: compile TypeScript (and copy the Lua scripts next to it), then drop the dev dependencies ---------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
# Manifests first, so that the dependency layer is reused while only sources change.
COPY package.json package-lock.json ./
# patches/: amqplib's header-table decoder made iterative and bounded, rhea's decode failures kept to the one message
# (patches/README.md says why). --ignore-scripts skips the package's own postinstall, so the patches are applied here;
# `npm prune` below keeps the patched files.
COPY patches ./patches
# --ignore-scripts: no runtime dependency has an install script, and the dev tool chain (testcontainers' optional
# native ssh2/cpu-features) would otherwise try to compile without a compiler in the slim image.
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && npx --no-install patch-package --error-on-fail
COPY tsconfig.json tsconfig.build.json ./
# scripts/copy-assets.mjs is what `npm run build` runs to put src/cache/scripts/*.lua into dist/.
COPY scripts ./scripts
COPY src ./src
RUN npm run build \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

# --- runtime: production node_modules and dist only, as the unprivileged `node` user --------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
# The HTTP API must be reachable from outside the container (bridges.yaml: http-host: ${HTTP_HOST:-127.0.0.1}).
ENV HTTP_HOST=0.0.0.0
WORKDIR /app
# Owned by root and not writable by `node`: the process has no reason to modify its own code.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
# The HTTP API (/livez, /readyz, /bridges, /metrics) when bridges.yaml sets http-port: 9464.
EXPOSE 9464
# Liveness only: the process and its event loop answer. Readiness (/readyz) is for the orchestrator's traffic and
# alerting decisions (the compose file's healthcheck uses it); a Redis outage must not get a live process restarted.
# HEALTH_PORT: set it when bridges.yaml uses another http-port.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.HEALTH_PORT||9464)+'/livez').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Exec form: node is PID 1 and receives SIGTERM itself, which starts the drain.
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["run", "--config", "/etc/broker-bridge/bridges.yaml"]
