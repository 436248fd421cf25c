// Command apiserver runs a real Kubernetes API server for cronsource's tests: the full
// kube-apiserver of Kubernetes v1.37.2 (k8s.io/kubernetes/cmd/kube-apiserver/app: the core API
// with Namespaces, ServiceAccounts, ConfigMaps, Events, apps, batch, RBAC, admission, API
// priority and fairness, the aggregator and apiextensions with our CustomResourceDefinitions)
// backed by an embedded etcd, everything on 127.0.0.1. There is no controller manager,
// scheduler or kubelet: objects are stored and validated, Pods never run, Namespaces are never
// finalized after a delete, ServiceAccount tokens are not minted into Secrets.
//
// It does the steps of k8s.io/kubernetes/cmd/kube-apiserver/app/testing.StartTestServer (the
// server Kubernetes' own integration tests start) without its dependency on package testing,
// and with our own embedded etcd (go.etcd.io/etcd/server/v3/embed) instead of a separate etcd
// process:
//
//   - authentication: a static token (--token, written into the kubeconfig) for the user
//     cronsource-test-admin in group system:masters (through --token-auth-file), and
//     ServiceAccount tokens (TokenRequest) signed by a key kept in DATA-DIR/certs; no anonymous
//     requests (--anonymous-auth=false: a request without a token gets 401);
//   - authorization: --authorization-mode=RBAC (system:masters may do everything), so RBAC
//     objects mean what they mean in a cluster; SubjectAccessReview and impersonation work;
//   - the default admission plugins but NamespaceLifecycle
//     (--disable-admission-plugins=NamespaceLifecycle): a namespaced object may be created in a
//     namespace that has no Namespace object, as tests name namespaces freely. Pass
//     --disable-admission-plugins= (empty) to have it, as a cluster has;
//   - --endpoint-reconciler-type=none, --service-cluster-ip-range=10.0.0.0/24 (no address of
//     it is ever used: nothing routes traffic here).
//
// Usage:
//
//	apiserver --write-kubeconfig PATH [--data-dir DIR] [--port N] [--token T] [kube-apiserver flags...]
//
// Any flag of kube-apiserver is accepted too, e.g. --watch-cache=false,
// --etcd-compaction-interval=10s, --authorization-mode=AlwaysAllow, -v=2.
//
// Once the server answers /readyz and has created the "default" Namespace it writes the
// kubeconfig and prints one line on stdout:
//
//	READY https://127.0.0.1:PORT admin=http://127.0.0.1:APORT
//
// The admin address serves POST /compact (compacts etcd so that every resourceVersion older than
// the newest object's is expired; prints the compacted revision) and GET /revision, so that
// tests can expire old resourceVersions. The program stops
// on SIGTERM or SIGINT, and on EOF of stdin when --exit-on-stdin-eof is set (so that it never
// outlives the test process that started it).
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	netutils "k8s.io/utils/net"
)

const (
	adminUser  = "cronsource-test-admin"
	saIssuer   = "https://kubernetes.default.svc.cluster.local"
	serviceIPs = "10.0.0.0/24"
)

type settings struct {
	kubeconfig     string
	dataDir        string
	port           int
	adminPort      int
	token          string
	exitOnStdinEOF bool
	etcdLog        string
	readyTimeout   time.Duration
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "apiserver: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var st settings
	fs := pflag.NewFlagSet("apiserver", pflag.ContinueOnError)
	fs.StringVar(&st.kubeconfig, "write-kubeconfig", "", "where to write the kubeconfig (required)")
	fs.StringVar(&st.dataDir, "data-dir", "", "etcd data, serving certificates and keys; a temporary directory (removed on exit) when empty; kept and reused when given")
	fs.IntVar(&st.port, "port", 0, "secure port on 127.0.0.1 (0: a free one)")
	fs.IntVar(&st.adminPort, "admin-port", 0, "admin HTTP port on 127.0.0.1 (0: a free one)")
	fs.StringVar(&st.token, "token", "", "bearer token of the admin user, in system:masters (random when empty)")
	fs.BoolVar(&st.exitOnStdinEOF, "exit-on-stdin-eof", false, "stop when standard input is closed")
	fs.StringVar(&st.etcdLog, "etcd-log", "", "etcd log file (default: DATA-DIR/etcd.log)")
	fs.DurationVar(&st.readyTimeout, "ready-timeout", 2*time.Minute, "give up when /readyz is not ok by then")

	s := options.NewServerRunOptions()
	// Defaults of ours, still overridable on the command line (set before the flags are
	// added, so that --help shows them).
	s.Authorization.Modes = []string{"RBAC"}
	s.Authentication.Anonymous.Allow = false
	s.Admission.GenericAdmission.DisablePlugins = []string{"NamespaceLifecycle"}
	s.ServiceClusterIPRanges = serviceIPs
	s.EndpointReconcilerType = "none" // the advertised address is loopback: no Endpoints for it
	s.Authentication.ServiceAccounts.Issuers = []string{saIssuer}
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if st.kubeconfig == "" {
		return errors.New("--write-kubeconfig is required")
	}
	if st.token == "" {
		st.token = randomToken()
	}
	registry := s.GenericServerRunOptions.ComponentGlobalsRegistry
	if err := registry.Set(); err != nil {
		return err
	}
	featureGate := registry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(s.Logs, featureGate); err != nil {
		return err
	}
	// The server's clients of itself should not log the warnings it sends them.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})

	removeDataDir := false
	if st.dataDir == "" {
		d, err := os.MkdirTemp("", "cronsource-apiserver-")
		if err != nil {
			return err
		}
		st.dataDir, removeDataDir = d, true
	}
	certDir := filepath.Join(st.dataDir, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	defer func() {
		if removeDataDir {
			_ = os.RemoveAll(st.dataDir)
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopOnSignals(cancel, st.exitOnStdinEOF)

	// Authentication: the admin token, and the key that signs and verifies ServiceAccount
	// tokens (kept in the data directory, so that a restart keeps tokens valid).
	if s.Authentication.TokenFile.TokenFile == "" {
		tokenFile := filepath.Join(certDir, "tokens.csv")
		line := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", st.token, adminUser, adminUser)
		if err := os.WriteFile(tokenFile, []byte(line), 0o600); err != nil {
			return err
		}
		s.Authentication.TokenFile.TokenFile = tokenFile
	}
	if s.ServiceAccountSigningKeyFile == "" {
		keyFile, err := serviceAccountKey(certDir)
		if err != nil {
			return err
		}
		s.ServiceAccountSigningKeyFile = keyFile
		if len(s.Authentication.ServiceAccounts.KeyFiles) == 0 {
			s.Authentication.ServiceAccounts.KeyFiles = []string{keyFile}
		}
	}

	etcd, etcdURL, err := startEtcd(st)
	if err != nil {
		return err
	}
	defer etcd.Close()
	if len(s.Etcd.StorageConfig.Transport.ServerList) == 0 {
		s.Etcd.StorageConfig.Transport.ServerList = []string{etcdURL}
	}

	ln, port, err := listen(st.port)
	if err != nil {
		return fmt.Errorf("secure port: %w", err)
	}
	ss := s.SecureServing
	ss.Listener, ss.BindPort = ln, port
	ss.BindAddress = netutils.ParseIPSloppy("127.0.0.1")
	ss.ExternalAddress = ss.BindAddress
	ss.ServerCert.CertDirectory = certDir

	informerName, err := cache.NewInformerName("kube-apiserver")
	if err != nil {
		return err
	}
	s.InformerName = informerName
	completed, err := s.Complete(ctx)
	if err != nil {
		return fmt.Errorf("completing the options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return utilerrors.NewAggregate(errs)
	}
	featureGate.(featuregate.MutableFeatureGate).AddMetrics()
	registry.AddMetrics()

	config, err := app.NewConfig(completed)
	if err != nil {
		return fmt.Errorf("configuring the server: %w", err)
	}
	completedConfig, err := config.Complete()
	if err != nil {
		return fmt.Errorf("configuring the server: %w", err)
	}
	server, err := app.CreateServerChain(completedConfig)
	if err != nil {
		return fmt.Errorf("creating the server: %w", err)
	}

	serverDone := make(chan error, 1)
	go func() {
		prepared, err := server.PrepareRun()
		if err != nil {
			serverDone <- err
			return
		}
		serverDone <- prepared.Run(ctx)
	}()

	host := fmt.Sprintf("https://127.0.0.1:%d", port)
	caData, err := os.ReadFile(ss.ServerCert.CertKey.CertFile)
	if err != nil {
		return fmt.Errorf("reading the serving certificate: %w", err)
	}
	clientConfig := &rest.Config{
		Host:            host,
		BearerToken:     st.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caData},
	}
	if err := waitReady(ctx, clientConfig, serverDone, st.readyTimeout); err != nil {
		cancel()
		return err
	}
	if err := writeKubeconfig(st.kubeconfig, host, caData, st.token); err != nil {
		cancel()
		return err
	}

	adminURL, err := serveAdmin(ctx, st.adminPort, etcd)
	if err != nil {
		cancel()
		return err
	}
	fmt.Printf("READY %s admin=%s\n", host, adminURL)

	select {
	case err := <-serverDone:
		cancel()
		if err != nil {
			return fmt.Errorf("server stopped: %w", err)
		}
		return nil
	case err := <-etcd.Err():
		cancel()
		<-serverDone
		return fmt.Errorf("etcd stopped: %w", err)
	case <-ctx.Done():
		if err := <-serverDone; err != nil {
			klog.Errorf("server shutdown: %v", err)
		}
		return nil
	}
}

// serviceAccountKey returns DIR/service-account.key, an ECDSA key made on the first start.
func serviceAccountKey(dir string) (string, error) {
	path := filepath.Join(dir, "service-account.key")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	pemKey, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return "", err
	}
	if err := keyutil.WriteKey(path, pemKey); err != nil {
		return "", err
	}
	return path, nil
}

func startEtcd(st settings) (*embed.Etcd, string, error) {
	logFile := st.etcdLog
	if logFile == "" {
		logFile = filepath.Join(st.dataDir, "etcd.log")
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return nil, "", err
		}
		clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
		peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}

		cfg := embed.NewConfig()
		cfg.Name = "cronsource-test"
		cfg.Dir = filepath.Join(st.dataDir, "etcd")
		cfg.ListenClientUrls = []url.URL{clientURL}
		cfg.AdvertiseClientUrls = []url.URL{clientURL}
		cfg.ListenPeerUrls = []url.URL{peerURL}
		cfg.AdvertisePeerUrls = []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		cfg.ListenMetricsUrls = nil
		cfg.LogLevel = "warn"
		cfg.LogOutputs = []string{logFile}
		cfg.UnsafeNoFsync = true // throwaway data
		cfg.WatchProgressNotifyInterval = 5 * time.Second

		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			continue // most likely a port taken between freePorts and now
		}
		select {
		case <-e.Server.ReadyNotify():
			return e, clientURL.String(), nil
		case err := <-e.Err():
			e.Close()
			lastErr = err
		case <-time.After(60 * time.Second):
			e.Close()
			return nil, "", errors.New("embedded etcd did not become ready in 60s")
		}
	}
	return nil, "", fmt.Errorf("starting embedded etcd: %w", lastErr)
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func listen(port int) (net.Listener, int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, 0, err
	}
	return ln, ln.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(ctx context.Context, cfg *rest.Config, serverDone <-chan error, timeout time.Duration) error {
	c, err := rest.UnversionedRESTClientFor(withSerializer(cfg))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case err := <-serverDone:
			return fmt.Errorf("server stopped before it was ready: %v", err)
		case <-ctx.Done():
			return errors.New("stopped before the server was ready")
		default:
		}
		// Ready, and the "default" Namespace made by the bootstrap controller is there (as
		// StartTestServer waits for it): objects can be created in it from the first request.
		ok := true
		for _, path := range []string{"/readyz", "/api/v1/namespaces/default"} {
			status := 0
			res := c.Get().AbsPath(path).Do(ctx).StatusCode(&status)
			if status != http.StatusOK {
				body, _ := res.Raw()
				last = fmt.Sprintf("%s: status %d: %.300s %v", path, status, body, res.Error())
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("/readyz not ok after %v (last: %s)", timeout, last)
}

func withSerializer(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}

func writeKubeconfig(path, host string, caData []byte, token string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cronsource-test"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: caData}
	kc.AuthInfos["cronsource-test-admin"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["cronsource-test"] = &clientcmdapi.Context{Cluster: "cronsource-test", AuthInfo: "cronsource-test-admin", Namespace: "default"}
	kc.CurrentContext = "cronsource-test"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := clientcmd.WriteToFile(*kc, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func serveAdmin(ctx context.Context, port int, e *embed.Etcd) (string, error) {
	ln, _, err := listen(port)
	if err != nil {
		return "", fmt.Errorf("admin port: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /revision", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d\n", e.Server.KV().Rev())
	})
	mux.HandleFunc("POST /compact", func(w http.ResponseWriter, r *http.Request) {
		// First one write outside the API server's prefix, then compact to that revision: every
		// resourceVersion older than the newest object's is then expired (a watch from it needs
		// a compacted revision: 410 Gone), while a watch from the newest one still works. (A
		// compaction to the newest object's own revision would instead leave watches from the
		// one before failing with 500 "PrevKv=nil", because its previous value is gone.)
		put, err := e.Server.Put(r.Context(), &pb.PutRequest{Key: []byte("/cronsource-test/compact"), Value: []byte(time.Now().UTC().Format(time.RFC3339Nano))})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		rev := put.Header.Revision
		if _, err := e.Server.Compact(r.Context(), &pb.CompactionRequest{Revision: rev, Physical: true}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%d\n", rev)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return "http://" + ln.Addr().String(), nil
}

func stopOnSignals(cancel context.CancelFunc, onStdinEOF bool) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		cancel()
		<-sigs
		os.Exit(1) // a second signal: stop now
	}()
	if onStdinEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
