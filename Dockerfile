# gputopo images. Default target: the scheduler, a static binary on a
# distroless non-root base. `--target nodeagent`: the node agent, built
# with cgo (go-nvml loads libnvidia-ml at run time) on the glibc
# distroless base; the NVIDIA container runtime injects the library.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags=-s -o /out/gputopo-scheduler ./cmd/scheduler
RUN CGO_ENABLED=1 go build -trimpath -ldflags=-s -o /out/gputopo-nodeagent ./cmd/nodeagent

FROM gcr.io/distroless/base-debian12 AS nodeagent
COPY --from=build /out/gputopo-nodeagent /usr/local/bin/gputopo-nodeagent
ENTRYPOINT ["/usr/local/bin/gputopo-nodeagent"]

FROM gcr.io/distroless/static-debian12:nonroot AS scheduler
COPY --from=build /out/gputopo-scheduler /usr/local/bin/gputopo-scheduler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gputopo-scheduler"]
