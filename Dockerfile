# syntax=docker/dockerfile:1
# The standalone host (the `fhirgate` command) as an image: the Medplum-compatible server with fhirgate mounted,
# storing everything in a SQLite file on the /data volume. docs/deployment.md has the build and run commands.

ARG NODE_IMAGE=node:24-slim

# Build: compile plugin/, bots/ and the LLM emulator to dist/. --ignore-scripts skips the install scripts of the
# development tools, among them the `node` devDependency's download of a second Node: the image already has one.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
RUN npm run build

# Runtime: the locked production dependencies (none has an install script) and the build, run as the unprivileged
# `node` user of the official image.
FROM ${NODE_IMAGE} AS runtime
# NODE_ENV=production: the host does not start without a provider (AI_PROVIDER; AI_PROVIDER=demo for the echo demo).
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8103 \
    FHIRGATE_DATA_DIR=/data
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The package's commands on PATH: `fhirgate` (the host) and `fhirgate-token` (for `docker exec`).
RUN chmod 0755 dist/plugin/hosts/standalone/main.js dist/plugin/hosts/standalone/print-token.js \
 && ln -s /app/dist/plugin/hosts/standalone/main.js /usr/local/bin/fhirgate \
 && ln -s /app/dist/plugin/hosts/standalone/print-token.js /usr/local/bin/fhirgate-token \
 && mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8103
# No curl in slim images: Node's fetch asks /healthcheck, which answers 503 when the store or Redis does not.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/healthcheck`).then((response) => process.exit(response.ok ? 0 : 1), () => process.exit(1))"]
CMD ["fhirgate"]
