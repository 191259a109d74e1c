package controlplane

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// startEtcd runs etcd in this process on free loopback ports; its errors
// go to stderr.
func startEtcd(dir string) (clientURL string, stop func(), err error) {
	return startEtcdLogging(dir, os.Stderr)
}

// startEtcdLogging is startEtcd with etcd's errors written to errOut.
func startEtcdLogging(dir string, errOut io.Writer) (clientURL string, stop func(), err error) {
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "etcd")
	var closing atomic.Bool
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdLogger(errOut, &closing))
	client, err := freeURL()
	if err != nil {
		return "", nil, err
	}
	peer, err := freeURL()
	if err != nil {
		return "", nil, err
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return "", nil, fmt.Errorf("etcd not ready after a minute")
	}
	return client.String(), func() {
		closing.Store(true)
		e.Close()
	}, nil
}

// servingEnded is what etcd logs, as an error, for each of its listeners
// when Close shuts them down.
const servingEnded = "setting up serving from embedded etcd failed."

// etcdLogger logs etcd's errors (no warnings or info: the level is set
// here, not by Config.LogLevel) as JSON lines to out, except the
// listeners' servingEnded once closing is set: a normal shutdown is not
// an error, and a demo that ends with four of them looks broken.
func etcdLogger(out io.Writer, closing *atomic.Bool) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	core := zapcore.NewCore(enc, zapcore.AddSync(out), zapcore.ErrorLevel)
	return zap.New(&quietClose{Core: core, closing: closing})
}

// quietClose drops servingEnded once closing is set.
type quietClose struct {
	zapcore.Core
	closing *atomic.Bool
}

func (q *quietClose) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if ent.Message == servingEnded && q.closing.Load() {
		return ce
	}
	return q.Core.Check(ent, ce)
}

func (q *quietClose) With(fields []zapcore.Field) zapcore.Core {
	return &quietClose{Core: q.Core.With(fields), closing: q.closing}
}

func freeURL() (*url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return &url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}
