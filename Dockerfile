# syntax=docker/dockerfile:1
# petrel in a container: docs/operations.md, "Docker". Build and run:
#
#   docker build -t petrel .
#   docker run -d --name petrel -p 7447:7447 -v petrel-data:/var/lib/petrel petrel
#
# deploy/compose.yaml runs it behind a TLS reverse proxy.

ARG GO_VERSION=1.26.8
ARG DEBIAN=bookworm

# Build: cgo on (the binary dlopens libsecp256k1 at start; building needs
# neither the library nor its headers), trimmed, version from VERSION.
FROM golang:${GO_VERSION}-${DEBIAN} AS build
WORKDIR /src
ENV GOTOOLCHAIN=local CGO_ENABLED=1
COPY go.mod go.sum ./
COPY third_party ./third_party
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "-s -w -X github.com/petrel-relay/petrel/internal/cli.version=${VERSION}" -o /out/petrel ./cmd/petrel

# Run: Debian slim with libsecp256k1 (signature verification about 4x
# faster than the pure-Go fallback) and CA certificates (TLS to
# PostgreSQL or NATS). Runs as an unprivileged user; the store is a volume.
FROM debian:${DEBIAN}-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libsecp256k1-1 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home /var/lib/petrel --shell /usr/sbin/nologin petrel \
 && install -d -o petrel -g petrel -m 0750 /var/lib/petrel
COPY --from=build /out/petrel /usr/local/bin/petrel
USER petrel
WORKDIR /var/lib/petrel
# Listen on every interface of the container; keep the store in the volume.
# Any other key: PETREL_<SECTION>_<KEY>, or a config file mounted at
# /etc/petrel/petrel.toml and `serve --config /etc/petrel/petrel.toml`.
ENV PETREL_SERVER_LISTEN=0.0.0.0:7447 \
    PETREL_STORE_PATH=/var/lib/petrel/data
VOLUME /var/lib/petrel
EXPOSE 7447
# NIP-11 from the relay itself: answered without the database.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["petrel", "relay", "--timeout", "4s", "ws://127.0.0.1:7447"]
# SIGTERM: graceful shutdown (server.shutdown_timeout); give it time with
# `docker stop -t 30` (compose: stop_grace_period).
STOPSIGNAL SIGTERM
ENTRYPOINT ["petrel"]
CMD ["serve"]
