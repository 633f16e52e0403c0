# The operator image: a static binary on distroless, running as non-root.
# Build: docker build -t redis-cluster-operator:dev .   (then `make deploy IMG=redis-cluster-operator:dev`)

FROM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# CGO off: the binary must run on distroless/static, which has no libc.
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/manager .

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /manager
# 65532 is distroless's "nonroot"; numeric so runAsNonRoot can verify it.
USER 65532:65532
ENTRYPOINT ["/manager"]
