// Command apiserver runs a real Kubernetes API server for cronsource's tests: the standalone
// k8s.io/apiextensions-apiserver (the generic API server with CustomResourceDefinitions:
// resourceVersion preconditions, 409 conflicts, the watch cache, bookmarks, 410 Gone) backed by
// an embedded etcd, everything on 127.0.0.1.
//
// It is the same server Kubernetes' own integration tests start through
// k8s.io/apiextensions-apiserver/pkg/cmd/server/testing.StartTestServer; this program does the
// same steps but without a core kube-apiserver behind it: no admission plugins (there are no
// Namespace objects, so any namespace name is accepted), no API priority and fairness, and a
// static bearer token (written into the kubeconfig) for a user in system:masters, with every
// request allowed.
//
// Usage:
//
//	apiserver --write-kubeconfig PATH [--data-dir DIR] [--port N] [--token T] [apiserver flags...]
//
// Any flag of the apiextensions-apiserver is accepted too, e.g. --watch-cache=false,
// --etcd-compaction-interval=10s, -v=2.
//
// Once the server answers /readyz it writes the kubeconfig and prints one line on stdout:
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
	"crypto/rand"
	"encoding/hex"
	"errors"
	goflag "flag"
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

	extensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"
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
	fs.StringVar(&st.dataDir, "data-dir", "", "etcd data and serving certificates; a temporary directory (removed on exit) when empty; kept and reused when given")
	fs.IntVar(&st.port, "port", 0, "secure port on 127.0.0.1 (0: a free one)")
	fs.IntVar(&st.adminPort, "admin-port", 0, "admin HTTP port on 127.0.0.1 (0: a free one)")
	fs.StringVar(&st.token, "token", "", "bearer token of the admin user (random when empty)")
	fs.BoolVar(&st.exitOnStdinEOF, "exit-on-stdin-eof", false, "stop when standard input is closed")
	fs.StringVar(&st.etcdLog, "etcd-log", "", "etcd log file (default: DATA-DIR/etcd.log)")
	fs.DurationVar(&st.readyTimeout, "ready-timeout", 2*time.Minute, "give up when /readyz is not ok by then")

	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)

	o := options.NewCustomResourceDefinitionsServerOptions(os.Stdout, os.Stderr)
	o.AddFlags(fs)
	// Defaults of ours, still overridable on the command line.
	o.RecommendedOptions.Etcd.EnableWatchCache = true
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
	if err := o.ServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}

	removeDataDir := false
	if st.dataDir == "" {
		d, err := os.MkdirTemp("", "cronsource-apiserver-")
		if err != nil {
			return err
		}
		st.dataDir, removeDataDir = d, true
	}
	if err := os.MkdirAll(st.dataDir, 0o700); err != nil {
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

	etcd, etcdURL, err := startEtcd(st)
	if err != nil {
		return err
	}
	defer etcd.Close()

	o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList = []string{etcdURL}
	if o.RecommendedOptions.Etcd.StorageConfig.Prefix == "" {
		o.RecommendedOptions.Etcd.StorageConfig.Prefix = "/registry"
	}

	ln, port, err := listen(st.port)
	if err != nil {
		return fmt.Errorf("secure port: %w", err)
	}
	ss := o.RecommendedOptions.SecureServing
	ss.Listener, ss.BindPort = ln, port
	ss.BindAddress = netutils.ParseIPSloppy("127.0.0.1")
	ss.ExternalAddress = ss.BindAddress
	ss.ServerCert.CertDirectory = filepath.Join(st.dataDir, "certs")

	if err := o.Complete(); err != nil {
		return err
	}
	// There is no core kube-apiserver behind this server: it has no informers for
	// admission or priority and fairness, and no TokenReview/SubjectAccessReview to delegate
	// to. Authentication and authorization are set up below instead.
	o.RecommendedOptions.CoreAPI = nil
	o.RecommendedOptions.Admission = nil
	o.RecommendedOptions.Authentication = nil
	o.RecommendedOptions.Authorization = nil
	o.RecommendedOptions.Features.EnablePriorityAndFairness = false
	var errs []error
	errs = append(errs, o.ServerRunOptions.Validate()...)
	errs = append(errs, o.RecommendedOptions.Etcd.Validate()...)
	errs = append(errs, o.RecommendedOptions.SecureServing.Validate()...)
	errs = append(errs, o.APIEnablement.Validate(extensionsapiserver.Scheme)...)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	config, err := serverConfig(o, st.token)
	if err != nil {
		return err
	}
	server, err := config.Complete().New(genericapiserver.NewEmptyDelegate())
	if err != nil {
		return fmt.Errorf("creating the server: %w", err)
	}

	serverDone := make(chan error, 1)
	go func() {
		serverDone <- server.GenericAPIServer.PrepareRun().RunWithContext(ctx)
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

// serverConfig is options.CustomResourceDefinitionsServerOptions.Config without the parts that
// need a core kube-apiserver (see run), plus a static token authenticator and an authorizer
// that allows everything.
func serverConfig(o *options.CustomResourceDefinitionsServerOptions, token string) (*extensionsapiserver.Config, error) {
	ro := o.RecommendedOptions
	if err := ro.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}

	cfg := genericapiserver.NewRecommendedConfig(extensionsapiserver.Codecs)
	if err := o.ServerRunOptions.ApplyTo(&cfg.Config); err != nil {
		return nil, err
	}
	if err := ro.Etcd.ApplyTo(&cfg.Config); err != nil {
		return nil, err
	}
	if err := ro.EgressSelector.ApplyTo(&cfg.Config); err != nil {
		return nil, err
	}
	if err := ro.SecureServing.ApplyToConfig(&cfg.Config); err != nil {
		return nil, err
	}
	if err := ro.Features.ApplyTo(&cfg.Config, nil, nil); err != nil {
		return nil, err
	}
	if err := o.APIEnablement.ApplyTo(&cfg.Config, extensionsapiserver.DefaultAPIResourceConfigSource(), extensionsapiserver.Scheme); err != nil {
		return nil, err
	}

	// Two users: the loopback client the server uses to talk to itself, and ours.
	tokens := map[string]*user.DefaultInfo{
		cfg.LoopbackClientConfig.BearerToken: {
			Name:   user.APIServerUser,
			UID:    "loopback",
			Groups: []string{user.AllAuthenticated, user.SystemPrivilegedGroup},
		},
		token: {
			Name:   "cronsource-test-admin",
			UID:    "cronsource-test-admin",
			Groups: []string{user.AllAuthenticated, user.SystemPrivilegedGroup},
		},
	}
	cfg.Authentication.Authenticator = authenticatorfactory.NewFromTokens(tokens, cfg.Authentication.APIAudiences)
	allow := authorizerfactory.NewAlwaysAllowAuthorizer()
	cfg.Authorization.Authorizer = allow
	cfg.RuleResolver = allow

	getDefs := openapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(getDefs, openapinamer.NewDefinitionNamer(extensionsapiserver.Scheme))
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(getDefs, openapinamer.NewDefinitionNamer(extensionsapiserver.Scheme, scheme.Scheme))

	return &extensionsapiserver.Config{
		GenericConfig: cfg,
		ExtraConfig: extensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: options.NewCRDRESTOptionsGetter(*ro.Etcd, cfg.ResourceTransformers, cfg.StorageObjectCountTracker),
			ServiceResolver:      noServices{},
			AuthResolverWrapper:  webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, cfg.LoopbackClientConfig, nil),
		},
	}, nil
}

// noServices resolves no Service: there is no core API, so conversion webhooks cannot be used.
type noServices struct{}

func (noServices) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return nil, fmt.Errorf("no Services in this test API server (%s/%s:%d)", namespace, name, port)
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
		status := 0
		res := c.Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
		if status == http.StatusOK {
			return nil
		}
		body, _ := res.Raw()
		last = fmt.Sprintf("status %d: %s %v", status, body, res.Error())
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
