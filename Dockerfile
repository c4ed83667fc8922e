# syntax=docker/dockerfile:1
#
# fence in a container: a static binary on distroless, as the nonroot user,
# with its embedded store in the volume /var/lib/fence.
#
#   docker build -t fence \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) \
#     --build-arg DATE=$(git log -1 --format=%cI) .
#
# The server listens on 0.0.0.0:7700, beyond loopback, so it needs an auth
# file (fence serve refuses to serve beyond loopback without one): mount it at
# /etc/fence/auth, readable by uid 65532.
#
#   docker run -d --name fence -p 7700:7700 \
#     -v fence-data:/var/lib/fence -v /etc/fence/auth:/etc/fence/auth:ro fence
#   docker kill --signal HUP fence      # reload the auth file
#
# For a local trial without authentication, publish the port on loopback only
# and say so:
#
#   docker run --rm -p 127.0.0.1:7700:7700 -e FENCE_AUTH_FILE= \
#     -e FENCE_INSECURE_LISTEN=true fence
#
# Every flag of fence serve has an environment twin (FENCE_SIGNING_KEY,
# FENCE_LOCK_DELAY, FENCE_TLS_CERT, ...); flags given to docker run after the
# image name are added to the command line and win over the twins.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=""
ARG COMMIT=""
ARG DATE=""
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false -o /out/fence \
      -ldflags "-s -w \
        -X github.com/fence-lock/fence/internal/support/buildinfo.Version=${VERSION} \
        -X github.com/fence-lock/fence/internal/support/buildinfo.Commit=${COMMIT} \
        -X github.com/fence-lock/fence/internal/support/buildinfo.Date=${DATE}" \
      ./cmd/fence
# The data directory, owned by nonroot (65532) in the image so that a fresh
# named volume mounted there is nonroot's too (fence creates its files in
# it with mode 0600 and 0700).
RUN mkdir -p /out/var/lib/fence

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=""
ARG COMMIT=""
LABEL org.opencontainers.image.title="fence" \
      org.opencontainers.image.description="A lock service that issues fencing tokens, and storage that enforces them" \
      org.opencontainers.image.source="https://github.com/fence-lock/fence" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/fence /usr/local/bin/fence
COPY --from=build --chown=65532:65532 /out/var/lib/fence /var/lib/fence
COPY LICENSE /usr/share/doc/fence/LICENSE
ENV FENCE_AUTH_FILE=/etc/fence/auth
USER nonroot
VOLUME ["/var/lib/fence"]
EXPOSE 7700
# Healthy when GET /readyz answers 200: the store is open and readable (on a
# cluster: this server leads, or knows a leader to forward to). An image that
# serves HTTPS (FENCE_TLS_CERT) needs its own HEALTHCHECK, with an https://
# --addr and the CA that verifies the server.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/fence", "healthz", "--addr", "http://127.0.0.1:7700"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/fence", "serve", "--listen", "0.0.0.0:7700", "--data", "/var/lib/fence"]
