# syntax=docker/dockerfile:1
#
# gputopo's images, built by `make image` (which passes VERSION and
# SOURCE_DATE_EPOCH): one build stage, two final stages.
#
#   --target scheduler  gputopo-scheduler: static (CGO_ENABLED=0) on
#                       distroless/static, user 65532.
#   --target nodeagent  gputopo-nodeagent: NOT static. go-nvml's package
#                       nvml is cgo (it dlopens libnvidia-ml.so.1 at run
#                       time and does not build with CGO_ENABLED=0), so the
#                       binary links glibc dynamically and runs on
#                       distroless/base (glibc); the NVIDIA container
#                       runtime injects libnvidia-ml from the host driver.
#                       The image declares user 65532 like the scheduler;
#                       manifests/nodeagent/daemonset.yaml overrides it with
#                       runAsUser 0 on purpose (the kubelet's plugin
#                       directories and /var/run/cdi are root-owned; the
#                       reasons are listed there).
#
# Reproducible: the binaries are built by the Makefile's build-* targets,
# with the same flags as `make build` (-trimpath -buildvcs=false, -ldflags
# "-s -w -buildid= -X .../pkg/version.Version=$VERSION" and the Kubernetes
# release stamped into component-base and client-go), and given
# SOURCE_DATE_EPOCH as their modification time; BuildKit uses the
# SOURCE_DATE_EPOCH build argument for the image's timestamps. The base
# images are pinned by tag; for bit-identical images over time, pass them
# by digest (--build-arg GO_IMAGE=golang@sha256:...), and add
# --output type=docker,rewrite-timestamp=true (BuildKit 0.13 or later) to
# clamp the remaining file times (see README, Images).
ARG GO_IMAGE=golang:1.26-bookworm
ARG STATIC_IMAGE=gcr.io/distroless/static-debian12:nonroot
ARG BASE_IMAGE=gcr.io/distroless/base-debian12:nonroot

FROM ${GO_IMAGE} AS build
ARG VERSION=dev
ARG SOURCE_DATE_EPOCH=0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make build-gputopo-scheduler build-gputopo-nodeagent VERSION="${VERSION}" BIN_DIR=/out \
 && touch -d "@${SOURCE_DATE_EPOCH}" /out/*

FROM ${BASE_IMAGE} AS nodeagent
ARG VERSION=dev
ARG SOURCE_DATE_EPOCH
LABEL org.opencontainers.image.title="gputopo-nodeagent" \
      org.opencontainers.image.description="gputopo's NVML node agent: publishes GPUs as DRA ResourceSlices and prepares claims" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/gputopo/gputopo" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/gputopo-nodeagent /usr/local/bin/gputopo-nodeagent
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gputopo-nodeagent"]

FROM ${STATIC_IMAGE} AS scheduler
ARG VERSION=dev
ARG SOURCE_DATE_EPOCH
LABEL org.opencontainers.image.title="gputopo-scheduler" \
      org.opencontainers.image.description="kube-scheduler with gputopo's topology-aware DRA GPU plugins" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/gputopo/gputopo" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/gputopo-scheduler /usr/local/bin/gputopo-scheduler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gputopo-scheduler"]
