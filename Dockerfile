# syntax=docker/dockerfile:1
# payd in a container: one static binary (SQLite is pure Go, so no cgo),
# run as a non-root user on a distroless base. The same image runs
# `payd serve` (the default), `payd migrate up|status` and `payd sandbox`.

# The Go release must satisfy go.mod's go line (a test checks it).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/payd ./cmd/payd \
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
ENTRYPOINT ["/usr/local/bin/payd"]
CMD ["serve"]
