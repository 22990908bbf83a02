# syntax=docker/dockerfile:1
# The base image, pinned by the digest of its multi-platform index (node:24-bookworm-slim,
# Node 24.19.0, as docker-library/repo-info recorded it on 2026-08-25: repos/node/remote/24-bookworm-slim.md).
# To move to a newer build: `docker buildx imagetools inspect node:24-bookworm-slim` prints the
# index digest ("Digest:"); put it here.
ARG NODE_IMAGE=node:24-bookworm-slim@sha256:a9f5f7c91a432850b2a8a7797adf5eadb6c733ceed61167806cee7ea7fbc29df

# Build: compile TypeScript with the dev dependencies. JavaScript is the same on every
# platform, so a multi-platform build compiles once, on the builder's own platform.
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json nest-cli.json ./
COPY scripts/bundle.js scripts/bundle-plugins.js ./scripts/
COPY src ./src
# tsc into dist/, then esbuild folds the entry point dist/server/main.js and its imports into one
# file, dist/main.js (scripts/bundle.js).
RUN npm run build

# Production dependencies only, installed on the target platform (a native addon gets its binary):
# the packages the bundle leaves external (scripts/bundle.js), and those of dist/cli.js.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

# Runtime: the same `node dist/main.js` the e2e tests run, as a non-root user.
FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY scripts/warm-compile-cache.js ./scripts/
# Node's compile cache: V8's code for dist/main.js, written once here by starting the server and
# stopping it, and read by every start: a shorter time to the first review (docs/performance.md,
# "One bundled file and a warmed compile cache").
# Written as the user the container runs as: Node keeps the cache per user, readable by it only.
ENV NODE_COMPILE_CACHE=/app/.compile-cache
RUN mkdir "$NODE_COMPILE_CACHE" && chown 65532:65532 "$NODE_COMPILE_CACHE"
USER 65532:65532
RUN node scripts/warm-compile-cache.js
EXPOSE 8443 8080
ENTRYPOINT ["node", "dist/main.js"]
