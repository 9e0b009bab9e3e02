# syntax=docker/dockerfile:1
# payd in a container: one static binary (SQLite is pure Go, so no cgo),
# run as a non-root user on a distroless base. The same image runs
# `payd serve` (the default), `payd migrate up|status` and `payd sandbox`.
#
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg REVISION="$(git rev-parse HEAD)" -t payd .

# The Go release must satisfy go.mod's go line (a test checks it).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .git stays out of the build context, so the toolchain stamps no revision:
# `payd version` and payd_build_info show these (internal/version).
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags="-s -w -X github.com/payd/payd/internal/version.version=${VERSION} -X github.com/payd/payd/internal/version.revision=${REVISION}" \
      -o /out/payd ./cmd/payd \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/payd /usr/local/bin/payd
# /data is where SQLite files go (e.g. the sandbox's own store); a named
# volume mounted there starts out owned by the non-root user.
COPY --from=build --chown=65532:65532 /out/data /data
WORKDIR /data
USER 65532:65532
ENV PAYD_ADDR=0.0.0.0:8080
EXPOSE 8080
# No shell in the image: payd probes itself, GET /healthz on PAYD_ADDR
# (`payd help healthcheck`). `payd sandbox` listens elsewhere, so its
# container passes -url (docker-compose.yml does).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/payd", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/payd"]
CMD ["serve"]
