package mamp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/ssrf"

	"github.com/switchboard-hub/switchboard/internal/auth"
	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// remoteKind is the RecordStore kind of remote domains added at run time.
const remoteKind = "mamp.remote"

// RemotesEnv is the environment variable RemotesFromEnv reads:
// "domain=baseURL" pairs separated by commas.
const RemotesEnv = "SWITCHBOARD_MAMP_REMOTES"

// RemotesFromEnv returns the remotes configured in SWITCHBOARD_MAMP_REMOTES
// (for example "other.example=https://mamp.other.example,lab=http://10.0.0.5:8080").
// Malformed entries are skipped.
func RemotesFromEnv() map[string]string { return ParseRemotes(os.Getenv(RemotesEnv)) }

// ParseRemotes parses "domain=baseURL,…"; entries without a domain or with
// a base URL that is not absolute http(s) are skipped.
func ParseRemotes(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		d, u, ok := strings.Cut(strings.TrimSpace(kv), "=")
		d = strings.ToLower(strings.TrimSpace(d))
		u = strings.TrimSpace(u)
		if !ok || d == "" || ssrf.CheckForm("base_url", u) != nil {
			continue
		}
		out[d] = u
	}
	return out
}

type remoteRecord struct {
	Domain  string `json:"domain"`
	BaseURL string `json:"base_url"`
}

// remoteBase returns a remote domain's base URL, or "" when none is known.
func (s *Server) remoteBase(ctx context.Context, domain string) (string, error) {
	domain = strings.ToLower(domain)
	if u, ok := s.opt.Remotes[domain]; ok {
		return u, nil
	}
	rec, err := s.relay.Store().GetRecord(ctx, remoteKind, domain)
	if errors.Is(err, core.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var rr remoteRecord
	if err := json.Unmarshal(rec.Data, &rr); err != nil {
		return "", err
	}
	return rr.BaseURL, nil
}

func (s *Server) listRemotes(w http.ResponseWriter, r *http.Request) {
	if err := auth.Admin(r.Context()); err != nil {
		writeErr(w, err)
		return
	}
	out := []remoteRecord{}
	for d, u := range s.opt.Remotes {
		out = append(out, remoteRecord{Domain: d, BaseURL: u})
	}
	recs, err := s.relay.Store().ListRecords(r.Context(), remoteKind, "", 1000)
	if err != nil {
		writeErr(w, err)
		return
	}
	for _, rec := range recs {
		var rr remoteRecord
		if json.Unmarshal(rec.Data, &rr) == nil {
			if _, static := s.opt.Remotes[rr.Domain]; !static {
				out = append(out, rr)
			}
		}
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"remotes": out})
}

func (s *Server) putRemote(w http.ResponseWriter, r *http.Request) {
	if err := auth.Admin(r.Context()); err != nil {
		writeErr(w, err)
		return
	}
	domain := strings.ToLower(r.PathValue("domain"))
	if _, err := ParseURI("agent://" + domain + "/x"); err != nil || strings.EqualFold(domain, s.ad.Host) {
		httperr.Errorf(w, http.StatusBadRequest, httperr.CodeInvalidField, "%q is not a remote domain", trunc(domain))
		return
	}
	var req struct {
		BaseURL string `json:"base_url"`
	}
	if !httperr.DecodeJSON(w, r, s.opt.MaxBody, &req) {
		return
	}
	if err := ssrf.CheckForm("base_url", req.BaseURL); err != nil {
		httperr.Write(w, http.StatusBadRequest, httperr.CodeInvalidField, strings.Replace(err.Error(), "callback_url", "base_url", 1))
		return
	}
	data, _ := json.Marshal(remoteRecord{Domain: domain, BaseURL: req.BaseURL})
	st := s.relay.Store()
	rec := core.Record{Kind: remoteKind, ID: domain, Data: data, UpdatedAt: s.relay.Clock().Now()}
	if old, err := st.GetRecord(r.Context(), remoteKind, domain); err == nil {
		rec.Version = old.Version
	}
	if _, err := st.PutRecord(r.Context(), rec); err != nil {
		writeErr(w, err)
		return
	}
	httperr.JSON(w, http.StatusOK, remoteRecord{Domain: domain, BaseURL: req.BaseURL})
}

func (s *Server) deleteRemote(w http.ResponseWriter, r *http.Request) {
	if err := auth.Admin(r.Context()); err != nil {
		writeErr(w, err)
		return
	}
	if err := s.relay.Store().DeleteRecord(r.Context(), remoteKind, strings.ToLower(r.PathValue("domain"))); err != nil {
		writeErr(w, err)
		return
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"ok": true})
}
