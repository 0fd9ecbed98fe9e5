package mcp

import (
	"context"
	"net/http"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-hub/switchboard/internal/auth"
)

// Path is where the hub serves MCP over Streamable HTTP.
const Path = "/mcp"

// StatelessVersion is the first protocol revision without sessions; a
// request announcing it (or a later one) in its MCP-Protocol-Version header
// is served by the stateless handler.
const StatelessVersion = "2026-07-28"

// Mount serves the Streamable HTTP endpoint at /mcp on mux.
func (s *Server) Mount(mux *http.ServeMux) {
	mux.Handle(Path, s.Handler())
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
// Identity comes from the principal the hub's auth middleware put in the
// request context: in dev mode the host acts as HostAgentID; otherwise a
// request needs a bearer token (401 without one), an agent token makes the
// host that agent, the admin token makes it HostAgentID with operator
// rights, and a session stays bound to the identity that opened it.
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
	bounded := newSessionBound(s.srv, s.opt.MaxSessions, s.opt.MaxSessionsPerCaller).wrap(stateful)
	byEra := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= StatelessVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		bounded.ServeHTTP(w, r)
	})
	return http.NewCrossOriginProtection().Handler(s.authenticate(byEra))
}

// authenticate turns the hub's principal into the SDK's token info, which
// the SDK hands to every request (RequestExtra.TokenInfo) and uses to bind
// sessions to their user.
func (s *Server) authenticate(next http.Handler) http.Handler {
	bearer := sdkauth.RequireBearerToken(func(ctx context.Context, _ string, r *http.Request) (*sdkauth.TokenInfo, error) {
		p := auth.From(r.Context())
		switch {
		case p.Admin:
			return &sdkauth.TokenInfo{UserID: p.Key(), Extra: map[string]any{tokenAdminKey: true}}, nil
		case p.AgentID != "":
			return &sdkauth.TokenInfo{UserID: p.Key(), Extra: map[string]any{tokenAgentKey: p.AgentID}}, nil
		}
		return nil, sdkauth.ErrInvalidToken
	}, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := auth.From(r.Context())
		if p.Dev {
			next.ServeHTTP(w, r)
			return
		}
		if !p.Authenticated() {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
			http.Error(w, "MCP on this hub needs a bearer token: an agent's token or the admin token", http.StatusUnauthorized)
			return
		}
		bearer.ServeHTTP(w, r)
	})
}
