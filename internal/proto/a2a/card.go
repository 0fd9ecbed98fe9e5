package a2a

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
)

// baseURL is the hub's external base URL as seen by this request.
func (s *Server) baseURL(r *http.Request) string {
	if s.opt.PublicURL != "" {
		return strings.TrimRight(s.opt.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return scheme + "://" + r.Host
}

// EndpointURL is agent id's JSON-RPC and HTTP+JSON endpoint under base.
func EndpointURL(base, id string) string { return base + "/a2a/" + url.PathEscape(id) }

// grpcTarget is the gRPC target (host:port) of the hub at base.
func grpcTarget(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return base
	}
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return u.Host + ":443"
	}
	return u.Host + ":80"
}

// interfaces lists every interface an agent is served at: JSON-RPC and
// HTTP+JSON at its endpoint URL, each in 1.0 and 0.3, and gRPC (1.0) at
// the hub's port with the agent as tenant.
func interfaces(base, id string) []*sdk.AgentInterface {
	ep := EndpointURL(base, id)
	return []*sdk.AgentInterface{
		{URL: ep, ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: "1.0"},
		{URL: ep, ProtocolBinding: sdk.TransportProtocolHTTPJSON, ProtocolVersion: "1.0"},
		{URL: grpcTarget(base), ProtocolBinding: sdk.TransportProtocolGRPC, ProtocolVersion: "1.0", Tenant: id},
		{URL: ep, ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: "0.3"},
		{URL: ep, ProtocolBinding: sdk.TransportProtocolHTTPJSON, ProtocolVersion: "0.3"},
	}
}

// modes maps card content types to media types.
func modes(a *core.Agent) []string {
	if len(a.Card.ContentTypes) == 0 {
		return []string{"text/plain", "application/json", "application/octet-stream"}
	}
	seen := map[string]bool{}
	var out []string
	add := func(m string) {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	for _, k := range a.Card.ContentTypes {
		switch core.PartKind(k) {
		case core.PartText, core.PartCode:
			add("text/plain")
		case core.PartData:
			add("application/json")
		case core.PartImage:
			add("image/*")
		case core.PartFile:
			add("application/octet-stream")
		default:
			add("*/*")
		}
	}
	return out
}

func skills(a *core.Agent) []sdk.AgentSkill {
	seen := map[string]bool{}
	var names []string
	for _, c := range append(append([]string{}, a.Capabilities...), a.Card.Tools...) {
		if c != "" && !seen[c] {
			seen[c] = true
			names = append(names, c)
		}
	}
	sort.Strings(names)
	out := make([]sdk.AgentSkill, 0, len(names)+1)
	for _, n := range names {
		out = append(out, sdk.AgentSkill{ID: n, Name: n, Description: "Capability " + n + " of " + a.ID, Tags: []string{n}})
	}
	if len(out) == 0 {
		out = append(out, sdk.AgentSkill{ID: "message", Name: "message", Description: "Send a message to " + a.ID + " through Switchboard", Tags: []string{"relay"}})
	}
	return out
}

func describe(a *core.Agent) (name, desc, version string) {
	name, desc, version = a.Card.Name, a.Card.Description, a.Card.Version
	if name == "" {
		name = a.ID
	}
	if desc == "" {
		desc = "Agent " + a.ID + " on a Switchboard hub"
	}
	if version == "" {
		version = "1.0.0"
	}
	return
}

// card builds the 1.0 card of agent a.
func (s *Server) card(base string, a *core.Agent) *sdk.AgentCard {
	name, desc, version := describe(a)
	c := &sdk.AgentCard{
		Name: name, Description: desc, Version: version,
		SupportedInterfaces: interfaces(base, a.ID),
		Capabilities:        sdk.AgentCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:   modes(a),
		DefaultOutputModes:  modes(a),
		Skills:              skills(a),
		Provider:            &sdk.AgentProvider{Org: "Switchboard", URL: base},
	}
	if a.Card.Owner != nil && a.Card.Owner.Organization != "" {
		c.Provider.Org = a.Card.Owner.Organization
	}
	if s.opt.Secured {
		c.SecuritySchemes = sdk.NamedSecuritySchemes{"bearer": sdk.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: "a Switchboard agent's key (sbk_…) or the operator's"}}
		c.SecurityRequirements = sdk.SecurityRequirementsOptions{{"bearer": {}}}
	}
	return c
}

// legacyCard builds the 0.3 card of agent a.
func (s *Server) legacyCard(base string, a *core.Agent) map[string]any {
	name, desc, version := describe(a)
	ep := EndpointURL(base, a.ID)
	var sk []map[string]any
	for _, x := range skills(a) {
		sk = append(sk, map[string]any{"id": x.ID, "name": x.Name, "description": x.Description, "tags": x.Tags})
	}
	org := "Switchboard"
	if a.Card.Owner != nil && a.Card.Owner.Organization != "" {
		org = a.Card.Owner.Organization
	}
	c := map[string]any{
		"protocolVersion":    "0.3.0",
		"name":               name,
		"description":        desc,
		"version":            version,
		"url":                ep,
		"preferredTransport": "JSONRPC",
		"additionalInterfaces": []map[string]string{
			{"url": ep, "transport": "JSONRPC"},
			{"url": ep, "transport": "HTTP+JSON"},
		},
		"capabilities":       map[string]any{"streaming": true, "pushNotifications": true, "stateTransitionHistory": true},
		"defaultInputModes":  modes(a),
		"defaultOutputModes": modes(a),
		"skills":             sk,
		"provider":           map[string]any{"organization": org, "url": base},
	}
	if s.opt.Secured {
		c["securitySchemes"] = map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}}
		c["security"] = []map[string][]string{{"bearer": {}}}
	}
	return c
}

// hybridCard is the card served at agent-card.json: the 1.0 card, plus
// the 0.3 fields (url, preferredTransport, protocolVersion,
// stateTransitionHistory) for 0.3 clients that read the same path. 1.0
// clients see supportedInterfaces and ignore the rest.
func (s *Server) hybridCard(base string, a *core.Agent) (map[string]any, error) {
	b, err := json.Marshal(s.card(base, a))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	legacy := s.legacyCard(base, a)
	for _, k := range []string{"url", "preferredTransport", "protocolVersion"} {
		m[k] = legacy[k]
	}
	if caps, ok := m["capabilities"].(map[string]any); ok {
		caps["stateTransitionHistory"] = true
	}
	if sec, ok := legacy["security"]; ok {
		m["security"] = sec
	}
	return m, nil
}

// cardAgent returns the agent whose card r asks for: any registered agent
// but the hidden ones (cards are public).
func (s *Server) cardAgent(r *http.Request) (*core.Agent, error) {
	id := r.PathValue("agent")
	if core.Hidden(id) {
		return nil, fmt.Errorf("agent %q: %w", id, core.ErrNotFound)
	}
	return s.relay.LookupAgent(r.Context(), s.hub, id)
}

func (s *Server) agentCard(w http.ResponseWriter, r *http.Request) error {
	a, err := s.cardAgent(r)
	if err != nil {
		return err
	}
	c, err := s.hybridCard(s.baseURL(r), a)
	if err != nil {
		return err
	}
	return writeCard(w, r, c, "public, max-age=300")
}

func (s *Server) legacyAgentCard(w http.ResponseWriter, r *http.Request) error {
	a, err := s.cardAgent(r)
	if err != nil {
		return err
	}
	return writeCard(w, r, s.legacyCard(s.baseURL(r), a), "public, max-age=300")
}

// writeCard answers a card with caching headers: Cache-Control as given
// and an ETag of its bytes; a request whose If-None-Match names the ETag
// gets 304 and no body. Only a card that cannot be encoded is an error,
// returned before anything is written.
func writeCard(w http.ResponseWriter, r *http.Request, card any, cacheControl string) error {
	b, err := json.Marshal(card)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	h := w.Header()
	h.Set("Cache-Control", cacheControl)
	h.Set("ETag", etag)
	if strings.HasPrefix(cacheControl, "private") {
		h.Set("Vary", "Authorization")
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		for _, t := range strings.Split(inm, ",") {
			if t = strings.TrimSpace(t); t == etag || t == "*" || t == "W/"+etag {
				w.WriteHeader(http.StatusNotModified)
				return nil
			}
		}
	}
	h.Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
	return nil
}

// DirectoryEntry is one agent in the hub card's directory.
type DirectoryEntry struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	URL         string `json:"url"`
	CardURL     string `json:"cardUrl"`
	Protocol    string `json:"protocol,omitempty"`
	Alive       bool   `json:"alive"`
}

func (s *Server) entry(base string, a *core.Agent) DirectoryEntry {
	name, desc, _ := describe(a)
	ep := EndpointURL(base, a.ID)
	return DirectoryEntry{ID: a.ID, Name: name, Description: desc, URL: ep, CardURL: ep + "/.well-known/agent-card.json",
		Protocol: a.Protocol, Alive: a.Alive(s.relay.Clock().Now())}
}

// listed lists the agents the caller may see, without the hidden ones
// (which stay out of every directory, the operator's too).
func (s *Server) listed(r *http.Request) ([]*core.Agent, error) {
	list, err := s.relay.ListAgents(r.Context(), core.PrincipalFrom(r.Context()), core.AgentFilter{})
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, a := range list {
		if !core.Hidden(a.ID) {
			out = append(out, a)
		}
	}
	return out, nil
}

// directory lists the hub's agents with their A2A endpoints and cards. As
// every agent listing, it needs a credential when auth is on.
func (s *Server) directory(w http.ResponseWriter, r *http.Request) error {
	list, err := s.listed(r)
	if err != nil {
		return err
	}
	base := s.baseURL(r)
	out := make([]DirectoryEntry, 0, len(list))
	for _, a := range list {
		out = append(out, s.entry(base, a))
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"agents": out})
	return nil
}

// hubCard is the hub's own card: a directory of its agents. Each agent is
// a skill (id = agent id) and the "agents" array gives each one's endpoint
// and card. The hub itself takes no messages (supportedInterfaces is
// empty): point an A2A client at an agent's card instead. The card itself
// is public, but, as every agent listing, its skills and agents are given
// only to a caller with a credential when auth is on; an anonymous caller
// gets the card with both empty, and the description says why.
func (s *Server) hubCard(w http.ResponseWriter, r *http.Request) error {
	list, err := s.listed(r)
	listed := err == nil
	if err != nil && core.KindOf(err) != core.KindUnauthenticated {
		return err
	}
	base := s.baseURL(r)
	dir := make([]DirectoryEntry, 0, len(list))
	sk := make([]sdk.AgentSkill, 0, len(list))
	for _, a := range list {
		e := s.entry(base, a)
		dir = append(dir, e)
		sk = append(sk, sdk.AgentSkill{ID: a.ID, Name: e.Name, Description: e.Description + " — " + e.CardURL,
			Tags: append([]string{"agent"}, a.Capabilities...)})
	}
	desc := "A Switchboard hub. Every registered agent is an A2A agent at /a2a/{agent}; see \"agents\"."
	if !listed {
		desc = "A Switchboard hub. Every registered agent is an A2A agent at /a2a/{agent}; the list of agents (\"skills\", \"agents\") is given to callers with a bearer credential."
	}
	card := map[string]any{
		"name":                "Switchboard hub (" + s.relay.Config().Host + ")",
		"description":         desc,
		"version":             "1.0.0",
		"supportedInterfaces": []any{},
		"capabilities":        map[string]any{"streaming": true, "pushNotifications": true, "stateTransitionHistory": true},
		"defaultInputModes":   []string{"text/plain", "application/json"},
		"defaultOutputModes":  []string{"text/plain", "application/json"},
		"skills":              sk,
		"provider":            map[string]any{"organization": "Switchboard", "url": base},
		"agents":              dir,
	}
	return writeCard(w, r, card, "private, max-age=60")
}

// neverAllowed is the part of the SSRF policy no configuration relaxes:
// link-local (cloud metadata), unspecified, multicast and broadcast
// addresses.
var neverAllowed = ssrf.Policy{AllowLoopback: true, AllowPrivate: true}

// checkPushURL checks a push notification URL's form, and refuses a host
// that is an address no SSRF policy allows (the operator's policy, when
// Options.CheckURL is set, is applied by the callers; every push is checked
// again when the hub connects).
func checkPushURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return errors.New("url is required")
	case err != nil:
		return errors.New("url is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("url must be http or https")
	case u.Host == "":
		return errors.New("url must name a host")
	}
	if err := neverAllowed.CheckURL(raw); err != nil {
		return fmt.Errorf("url: %w", err)
	}
	return nil
}
