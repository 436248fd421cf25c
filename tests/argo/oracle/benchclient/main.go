// Command benchclient is the Go side of bench.argo's `limit`: a plain client-go client that
// creates pre-encoded objects as fast as the test kube-apiserver takes them, so that the
// benchmark's "limit" is not bounded by a Python client's CPU. It lives in the oracle's module
// (tests/argo/oracle) so that it needs no module the Argo build has not already downloaded, and
// scripts/build-argo.sh builds it beside the oracle and the controller.
//
//	benchclient -kubeconfig FILE -path /apis/G/V/namespaces/NS/PLURAL -bodies FILE \
//	    [-connections C] [-in-flight F] [-http1] [-at UNIX_SECONDS]
//
// -bodies holds one JSON object a line, sent as they are (never re-encoded). -connections
// separate client-go transports (each its own TCP connection under HTTP/2; under HTTP/1.1 each
// transport opens as many connections as it has requests in flight) share -in-flight goroutines.
// The client's rate limiter is off (QPS -1). With -at, the connections are opened first (one
// GET each, not timed) and the creations start at that wall-clock instant. The last line of
// stdout is one JSON object: seconds, created, failures, protocol, late_start_ms.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

type result struct {
	Seconds     float64  `json:"seconds"`
	Created     int64    `json:"created"`
	Failures    int64    `json:"failures"`
	FirstErrors []string `json:"first_errors"`
	Protocol    string   `json:"protocol"`
	Connections int      `json:"connections"`
	InFlight    int      `json:"in_flight"`
	LateStartMs float64  `json:"late_start_ms"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the server")
	path := flag.String("path", "", "collection path, e.g. /apis/argoproj.io/v1alpha1/namespaces/bench/workflows")
	bodies := flag.String("bodies", "", "file of JSON objects, one a line")
	connections := flag.Int("connections", 1, "separate transports (connections under HTTP/2)")
	inFlight := flag.Int("in-flight", 64, "requests at once (goroutines)")
	http1 := flag.Bool("http1", false, "HTTP/1.1 only (no h2 in ALPN)")
	at := flag.Float64("at", 0, "wall-clock instant (Unix seconds) to start at; 0: at once")
	flag.Parse()
	if err := run(*kubeconfig, *path, *bodies, *connections, *inFlight, *http1, *at); err != nil {
		fmt.Fprintln(os.Stderr, "benchclient:", err)
		os.Exit(2)
	}
}

func readBodies(name string) ([][]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		if line := sc.Bytes(); len(line) > 0 {
			out = append(out, append([]byte(nil), line...))
		}
	}
	return out, sc.Err()
}

// client is one transport (its own Dial, so client-go's transport cache gives it its own
// connections) and the REST client over it.
func client(kubeconfig string, inFlight int, http1 bool) (*rest.RESTClient, *http.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	cfg.QPS = -1 // no client-side rate limiter
	cfg.Burst = 0
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	cfg.GroupVersion = &schema.GroupVersion{}
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	cfg.Timeout = 60 * time.Second
	if http1 {
		cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = dialer.DialContext
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if t, ok := rt.(*http.Transport); ok {
			// client-go keeps 25 idle connections a host: keep every warmed one
			t.MaxIdleConnsPerHost = inFlight
		}
		return rt
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	rc, err := rest.RESTClientForConfigAndClient(cfg, hc)
	return rc, hc, err
}

func run(kubeconfig, path, bodiesFile string, connections, inFlight int, http1 bool, at float64) error {
	if kubeconfig == "" || path == "" || bodiesFile == "" {
		return fmt.Errorf("-kubeconfig, -path and -bodies are required")
	}
	if connections < 1 || inFlight < 1 {
		return fmt.Errorf("-connections and -in-flight must be at least 1")
	}
	bodies, err := readBodies(bodiesFile)
	if err != nil {
		return err
	}
	ctx := context.Background()
	type conn struct {
		rc *rest.RESTClient
		hc *http.Client
	}
	conns := make([]conn, connections)
	for i := range conns {
		rc, hc, err := client(kubeconfig, inFlight, http1)
		if err != nil {
			return err
		}
		conns[i] = conn{rc, hc}
	}
	// Warm: each worker's first GET opens what it will use (a TLS handshake per connection).
	protocol := ""
	var mu sync.Mutex
	var warmErr error
	var wg sync.WaitGroup
	for w := 0; w < inFlight; w++ {
		wg.Add(1)
		go func(c conn) {
			defer wg.Done()
			resp, err := c.hc.Get(c.rc.Get().AbsPath(path).Param("limit", "1").URL().String())
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				warmErr = err
				return
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				warmErr = fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
			}
			protocol = resp.Proto
		}(conns[w%connections])
	}
	wg.Wait()
	if warmErr != nil {
		return warmErr
	}
	fmt.Fprintln(os.Stderr, "benchclient: ready,", protocol)
	if at > 0 {
		time.Sleep(time.Until(time.UnixMicro(int64(at * 1e6))))
	}
	res := result{Protocol: protocol, Connections: connections, InFlight: inFlight}
	began := time.Now()
	if at > 0 {
		res.LateStartMs = float64(began.UnixMicro())/1e3 - at*1e3
	}
	var next, created, failures atomic.Int64
	for w := 0; w < inFlight; w++ {
		wg.Add(1)
		go func(c conn) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(bodies)) {
					return
				}
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					var code int
					err = c.rc.Post().AbsPath(path).Body(bodies[i]).Do(ctx).StatusCode(&code).Error()
					if err == nil && code == http.StatusCreated {
						break
					}
					if err == nil {
						err = fmt.Errorf("HTTP %d", code)
					}
					if code == http.StatusTooManyRequests || code >= 500 {
						time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
						continue
					}
					break
				}
				if err != nil {
					failures.Add(1)
					mu.Lock()
					if len(res.FirstErrors) < 3 {
						res.FirstErrors = append(res.FirstErrors, err.Error())
					}
					mu.Unlock()
				} else {
					created.Add(1)
				}
			}
		}(conns[w%connections])
	}
	wg.Wait()
	res.Seconds = time.Since(began).Seconds()
	res.Created, res.Failures = created.Load(), failures.Load()
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}
