package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// Path is where the hub serves MCP over Streamable HTTP.
const Path = "/mcp"

// StatelessVersion is the first protocol revision without sessions; a
// request announcing it (or a later one) in its MCP-Protocol-Version header
// is served by the stateless handler.
const StatelessVersion = "2026-07-28"

// AgentHeader names the agent a privileged caller (the operator, or any
// caller of a hub with auth off) acts as over HTTP; an agent's credential
// may only name its own agent. The stdio bridge sends it for --agent.
const AgentHeader = "Switchboard-Agent"

// Protected-resource metadata (RFC 9728): the document describing the hub
// as an OAuth 2.1 resource server, at the well-known path and at its form
// with the MCP endpoint's path appended.
const (
	ResourceMetadataPath    = "/.well-known/oauth-protected-resource"
	MCPResourceMetadataPath = ResourceMetadataPath + Path
)

// Mount serves the Streamable HTTP endpoint at /mcp and the
// protected-resource metadata on mux (the hub's adapter contract).
func (s *Server) Mount(mux *http.ServeMux) {
	mux.Handle(Path, s.Handler())
	mux.Handle("GET "+ResourceMetadataPath, s.resourceMetadata(""))
	mux.Handle("GET "+MCPResourceMetadataPath, s.resourceMetadata(Path))
}

// Handler returns the Streamable HTTP handler. It serves revisions up to
// 2025-11-25 with sessions (Mcp-Session-Id, standalone SSE stream) and the
// sessionless 2026-07-28 revision, chosen per request by the
// MCP-Protocol-Version header (2026-era clients send it on every request,
// server/discover included). Sessions are bounded in number, per caller
// and in all (Options.MaxSessions, MaxSessionsPerCaller). Cross-origin
// browser requests are refused with 403, and requests to a loopback
// listener naming another host are refused (DNS rebinding).
//
// Identity comes from the principal the hub's authentication put in the
// request context (core.PrincipalFrom): with auth off every host acts as
// HostAgentID; otherwise a request needs a bearer token (401 with a
// WWW-Authenticate challenge naming the protected-resource metadata
// without one), an agent's token makes the host that agent, the admin
// token makes it the operator (an internal id, OperatorID), and a session
// stays bound to the identity that opened it.
func (s *Server) Handler() http.Handler {
	get := func(*http.Request) *sdk.Server { return s.srv }
	maxBody := s.opt.MaxBody
	if maxBody <= 0 {
		maxBody = 1 << 20
	}
	stateful := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
		SessionTimeout:      s.opt.SessionTimeout,
		Logger:              s.opt.Logger,
		MaxRequestBodyBytes: maxBody,
	})
	stateless := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		Logger:                       s.opt.Logger,
		MaxRequestBodyBytes:          maxBody,
	})
	bounded := newSessionBound(s.srv, &s.calls, s.opt.MaxSessions, s.opt.MaxSessionsPerCaller).wrap(stateful)
	byEra := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= StatelessVersion {
			if s.tasks != nil && r.Method == http.MethodPost {
				var lr *listenRequest
				if r, lr = taskListen(r, maxBody); lr != nil {
					s.tasks.serveListen(w, r, lr)
					return
				}
			}
			stateless.ServeHTTP(w, r)
			return
		}
		switch {
		case s.tasks != nil && r.Method == http.MethodPost:
			r = liftTaskBody(r, maxBody)
		case s.tasks != nil && r.Method == http.MethodGet && r.Header.Get("Mcp-Session-Id") != "":
			s.tasks.serveStandalone(w, r, bounded)
			return
		}
		bounded.ServeHTTP(w, r)
	})
	return http.NewCrossOriginProtection().Handler(s.authenticate(byEra))
}

// authenticate hands the hub's principal to the SDK as token info, which
// the SDK gives every request (RequestExtra.TokenInfo) and binds sessions
// to (by UserID, the principal's key and the agent asked for). A request
// without a credential on a hub with auth on is answered 401 with the
// challenge.
func (s *Server) authenticate(next http.Handler) http.Handler {
	// The SDK takes token info only from its bearer middleware; the
	// verifier hands it the principal the hub found (the hub checked the
	// token itself).
	bearer := sdkauth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*sdkauth.TokenInfo, error) {
		p := core.PrincipalFrom(r.Context())
		agent := strings.TrimSpace(r.Header.Get(AgentHeader))
		key := p.Key()
		if p.Dev {
			key = "dev"
		}
		if agent != "" {
			key += "/" + agent // a session stays bound to the agent it acts as
		}
		return &sdkauth.TokenInfo{UserID: key, Extra: map[string]any{tokenPrincipalKey: p, tokenAgentKey: agent}}, nil
	}, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := core.PrincipalFrom(r.Context())
		if !p.Dev && !p.Authenticated() {
			w.Header().Set("WWW-Authenticate", s.challenge(r))
			httperr.Write(w, http.StatusUnauthorized, httperr.CodeUnauthorized,
				"MCP on this hub needs a bearer token: an agent's token or the admin token")
			return
		}
		if agent := strings.TrimSpace(r.Header.Get(AgentHeader)); agent != "" {
			if !core.ValidAgentID(agent) {
				httperr.Write(w, http.StatusBadRequest, httperr.CodeInvalidField, AgentHeader+" must be a valid agent id")
				return
			}
			if p.AgentID != "" && agent != p.AgentID {
				httperr.Write(w, http.StatusForbidden, httperr.CodeForbidden, "an agent's token acts as that agent only")
				return
			}
		}
		if p.Dev && r.Header.Get("Authorization") == "" {
			// Auth is off: any bearer token stands for the dev principal.
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer dev")
		}
		bearer.ServeHTTP(w, r)
	})
}

// Challenge is the WWW-Authenticate value of a 401 from /mcp (RFC 6750
// with RFC 9728's resource_metadata), for the requests to /mcp (ok false
// for other paths): the hub asks for it when it refuses a credential
// before the request reaches the MCP handler (hub.Challenger).
func (s *Server) Challenge(r *http.Request) (string, bool) {
	if r.URL.Path != Path {
		return "", false
	}
	return s.challenge(r, `error="invalid_token"`), true
}

// challenge is the WWW-Authenticate value naming the MCP endpoint's
// protected-resource metadata, with extra parameters.
func (s *Server) challenge(r *http.Request, extra ...string) string {
	v := `Bearer realm="switchboard", resource_metadata="` + baseURL(r) + MCPResourceMetadataPath + `"`
	for _, e := range extra {
		v += ", " + e
	}
	return v
}

// resourceMetadata serves the protected-resource metadata of the resource
// at path (the hub itself for "", the MCP endpoint for /mcp). The hub is
// its own authorization server only in the plain sense that it issues the
// tokens it accepts (agent tokens at registration, the admin token): it
// runs no OAuth authorization endpoints, so none is named, and a host
// sends one of those tokens as a bearer token.
func (s *Server) resourceMetadata(path string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		md := &oauthex.ProtectedResourceMetadata{
			Resource:               baseURL(r) + path,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "Switchboard hub",
			ResourceDocumentation:  "https://github.com/switchboard-hub/switchboard/blob/main/docs/mcp.md#authentication",
		}
		sdkauth.ProtectedResourceMetadataHandler(md).ServeHTTP(w, r)
	})
}

// baseURL is the scheme and host the request was made to.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// liftTaskBody applies liftTaskParam to the body of a 2025-era request
// (a single JSON-RPC tools/call asking for a task). A body past maxBody is
// left for the SDK to refuse.
func liftTaskBody(r *http.Request, maxBody int64) *http.Request {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || int64(len(body)) > maxBody {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		return r
	}
	r.Body.Close()
	var req struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &req) == nil && req.Method == "tools/call" {
		if p, ok := liftTaskParam(req.Params); ok {
			var all map[string]json.RawMessage
			if json.Unmarshal(body, &all) == nil {
				all["params"] = p
				if b, err := json.Marshal(all); err == nil {
					body = b
				}
			}
		}
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return r
}
