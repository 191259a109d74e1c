# gputopo scheduler image: a static binary on a distroless non-root base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags=-s -o /out/gputopo-scheduler ./cmd/scheduler

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gputopo-scheduler /usr/local/bin/gputopo-scheduler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gputopo-scheduler"]
