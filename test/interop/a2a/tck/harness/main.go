// Command harness puts one agent of a Switchboard hub at the root of a
// port, for the A2A TCK (which reads the card at the root of the URL it is
// given): it starts the Go SDK test agent (package testagent), registers
// it on the hub as a remote agent, and serves a reverse proxy whose card
// is the hub agent's card with every interface pointed at the proxy.
// Requests go on to the hub's bindings for that agent: JSON-RPC at /,
// HTTP+JSON under /, gRPC with the agent set as the request's tenant (the
// TCK's gRPC client sends none).
//
//	harness -hub http://127.0.0.1:8080 [-token ADMIN] [-listen 127.0.0.1:0] [-tls-cert C -tls-key K]
//
// It prints "SUT_URL=<url>" once it serves, and runs until killed. Not a
// test: test/interop/a2a/tck/run.sh drives it.
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/switchboard-hub/switchboard/test/interop/a2a/testagent"
)

func main() {
	hubURL := flag.String("hub", "http://127.0.0.1:8080", "the hub's base URL")
	token := flag.String("token", "", "the hub's admin token (auth on)")
	listen := flag.String("listen", "127.0.0.1:0", "the proxy's address")
	agent := flag.String("agent", "tck-agent", "the agent's id on the hub")
	cert := flag.String("tls-cert", "", "serve HTTPS with this certificate (and -tls-key)")
	key := flag.String("tls-key", "", "the certificate's key")
	flag.Parse()
	hub, err := url.Parse(*hubURL)
	if err != nil {
		log.Fatal(err)
	}
	var agentSrv *httptest.Server
	agentSrv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		testagent.Handler(agentSrv.URL).ServeHTTP(w, r)
	}))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the hub's test certificate
	body, _ := json.Marshal(map[string]string{"card_url": agentSrv.URL, "agent_id": *agent})
	req, _ := http.NewRequest(http.MethodPost, *hubURL+"/a2a/agents", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if *token != "" {
		req.Header.Set("Authorization", "Bearer "+*token)
	}
	resp, err := client.Do(req)
	if err != nil {
		log.Fatalf("register the test agent: %v", err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		log.Fatalf("register the test agent: %d %s", resp.StatusCode, b)
	}
	resp.Body.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	// localhost, not 127.0.0.1: the TCK takes an IP address in a card for
	// an internal URL it must not show.
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	scheme := "http"
	if *cert != "" {
		scheme = "https"
	}
	self := scheme + "://localhost:" + port
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	protos.SetUnencryptedHTTP2(true)
	tr.Protocols = &protos
	if hub.Scheme == "http" {
		// gRPC needs HTTP/2: prior knowledge (h2c) to a hub without TLS.
		var h2c http.Protocols
		h2c.SetUnencryptedHTTP2(true)
		tr.Protocols = &h2c
	}
	proxy := &httputil.ReverseProxy{Transport: tr, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(hub)
		p := pr.In.URL.Path
		switch {
		case strings.HasPrefix(p, "/lf.a2a.v1.A2AService/"):
			pr.Out.URL.Path = p
			withTenant(pr.Out, *agent)
		case p == "/.well-known/agent-card.json" || p == "/.well-known/agent.json":
			pr.Out.URL.Path = "/a2a/" + *agent + p
		default:
			pr.Out.URL.Path = strings.TrimSuffix("/a2a/"+*agent+p, "/")
		}
		pr.Out.URL.RawPath = ""
		pr.Out.Host = hub.Host
	}, ModifyResponse: func(r *http.Response) error {
		if !strings.HasSuffix(r.Request.URL.Path, "/.well-known/agent-card.json") || r.StatusCode != 200 {
			return nil
		}
		// The card's interfaces point at the proxy.
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return err
		}
		out := bytes.ReplaceAll(b, []byte(*hubURL+"/a2a/"+*agent), []byte(self))
		// The gRPC interface names host:port, as a2a-go's client dials it;
		// the TCK's gRPC client wants a URL.
		out = bytes.ReplaceAll(out, []byte(`"`+hub.Host+`"`), []byte(`"`+scheme+`://localhost:`+port+`"`))
		r.Body = io.NopCloser(bytes.NewReader(out))
		r.ContentLength = int64(len(out))
		r.Header.Del("Content-Length")
		r.Header.Del("ETag")
		return nil
	}}
	srv := &http.Server{Handler: proxy, Protocols: &protos}
	fmt.Printf("SUT_URL=%s\n", self)
	if *cert != "" {
		log.Fatal(srv.ServeTLS(ln, *cert, *key))
	}
	log.Fatal(srv.Serve(ln))
}

// tenantField is the field number of "tenant" in each request message of
// lf.a2a.v1.A2AService (1, but 4 in ListTaskPushNotificationConfigsRequest).
func tenantField(method string) uint64 {
	if strings.HasSuffix(method, "/ListTaskPushNotificationConfigs") {
		return 4
	}
	return 1
}

// withTenant appends the tenant field to a gRPC request's one message: a
// protobuf field appended to a message is merged into it (the last value
// of a scalar field wins), so the request names the agent.
func withTenant(r *http.Request, tenant string) {
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil || len(b) < 5 || b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5 {
		r.Body = io.NopCloser(bytes.NewReader(b)) // compressed or several messages: as it is
		return
	}
	msg := b[5:]
	msg = binary.AppendUvarint(msg, tenantField(r.URL.Path)<<3|2)
	msg = binary.AppendUvarint(msg, uint64(len(tenant)))
	msg = append(msg, tenant...)
	out := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(out[1:5], uint32(len(msg)))
	out = append(out, msg...)
	r.Body = io.NopCloser(bytes.NewReader(out))
	r.ContentLength = int64(len(out))
}
