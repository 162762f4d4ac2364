# syntax=docker/dockerfile:1
# broker-bridge image: `docker build -t broker-bridge .`, or `docker compose up --build`.
# Mount the configuration at /etc/broker-bridge/bridges.yaml (see docker-compose.yml).

ARG NODE_IMAGE=node:20-bookworm-slim

# --- build: compile TypeScript (and copy the Lua scripts next to it), then drop the dev dependencies ---------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
# Manifests first, so that the dependency layer is reused while only sources change.
COPY package.json package-lock.json ./
# --ignore-scripts: no runtime dependency has an install script, and the dev tool chain (testcontainers' optional
# native ssh2/cpu-features) would otherwise try to compile without a compiler in the slim image.
RUN npm ci --ignore-scripts --no-audit --no-fund
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
WORKDIR /app
# Owned by root and not writable by `node`: the process has no reason to modify its own code.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
# Prometheus metrics and GET /health when bridges.yaml sets metrics-port: 9464.
EXPOSE 9464
# Exec form: node is PID 1 and receives SIGTERM itself, which starts the drain.
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["run", "--config", "/etc/broker-bridge/bridges.yaml"]
