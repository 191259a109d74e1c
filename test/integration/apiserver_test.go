package integration

import (
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/utils/ptr"
)

// apiServer is kube-apiserver on the shared etcd. A restartable one sits
// behind a TCP proxy with a fixed address and its own serving
// certificate, and the test driver uses a service account token (valid
// across restarts, as the signing key stays), so that every client keeps
// working when the API server is stopped and started again.
type apiServer struct {
	t       *testing.T
	options *kubeapiservertesting.TestServerInstanceOptions
	flags   []string
	storage *storagebackend.Config
	server  *kubeapiservertesting.TestServer
	proxy   *tcpProxy
}

func (s *apiServer) start() {
	s.server = kubeapiservertesting.StartTestServerOrDie(s.t, s.options, s.flags, s.storage)
	if s.proxy != nil {
		s.proxy.switchTo(hostOf(s.t, s.server.ClientConfig.Host))
	}
}

func (s *apiServer) stop() {
	if s.server != nil {
		s.server.TearDownFn()
		s.server = nil
	}
}

// restart stops the API server and starts a new one on the same storage;
// open connections are cut, as when a real API server restarts.
func (s *apiServer) restart() {
	s.t.Helper()
	if s.proxy == nil {
		s.t.Fatal("this API server cannot restart (startRestartableCluster)")
	}
	s.stop()
	s.start()
}

// makeRestartable sets a serving certificate and a proxy up; call it
// before start. It returns the proxy's CA bundle.
func (s *apiServer) makeRestartable() []byte {
	s.t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		s.t.Fatal(err)
	}
	dir := s.t.TempDir()
	certFile, keyFile := filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		s.t.Fatal(err)
	}
	s.flags = append(s.flags, "--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile)
	// Client-certificate and front-proxy setup would expect the serving
	// certificate the test server generates; nothing here uses them.
	s.options = kubeapiservertesting.NewDefaultTestServerOptions()
	s.options.EnableCertAuth = false
	s.proxy = newTCPProxy(s.t)
	return certPEM
}

// driverConfig is the test driver's admin config through the proxy: a
// token of a kube-system service account bound to cluster-admin.
func (s *apiServer) driverConfig(ctx context.Context, caPEM []byte) *rest.Config {
	s.t.Helper()
	loopback := kubernetes.NewForConfigOrDie(s.server.ClientConfig)
	const ns, name = "kube-system", "test-driver"
	if _, err := loopback.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
	if _, err := loopback.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	tr, err := loopback.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return &rest.Config{Host: "https://" + s.proxy.addr(), BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
}

func hostOf(t *testing.T, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// tcpProxy forwards connections to the current API server.
type tcpProxy struct {
	l       net.Listener
	mu      sync.Mutex
	backend string
	conns   map[net.Conn]struct{}
}

func newTCPProxy(t *testing.T) *tcpProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{l: l, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		l.Close()
		p.switchTo("")
	})
	return p
}

func (p *tcpProxy) addr() string { return p.l.Addr().String() }

// switchTo sends new connections to backend and cuts the open ones.
func (p *tcpProxy) switchTo(backend string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backend = backend
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *tcpProxy) forward(c net.Conn) {
	p.mu.Lock()
	backend := p.backend
	p.mu.Unlock()
	b, err := net.Dial("tcp", backend)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[b] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() {
		_, _ = io.Copy(b, c)
		b.Close()
	}()
	_, _ = io.Copy(c, b)
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, b)
	p.mu.Unlock()
}
