package mamp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
	"github.com/switchboard-hub/switchboard/internal/ssrf"
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
	if s.opt.Records == nil {
		return "", nil
	}
	rec, err := s.opt.Records.GetRecord(ctx, remoteKind, domain)
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

// operator decides whether r's caller may manage remote domains: the
// operator's business (core.OpOperator).
func operator(r *http.Request) error {
	if err := core.Authorize(caller(r), core.OpOperator, core.RelNone); err != nil {
		return fmt.Errorf("remote MAMP domains: %w", err)
	}
	return nil
}

// records is Options.Records, or errNoRecords.
func (s *Server) records() (core.RecordStore, error) {
	if s.opt.Records == nil {
		return nil, errNoRecords
	}
	return s.opt.Records, nil
}

// listRemotes is GET /mamp/v1/remotes (operator).
func (s *Server) listRemotes(w http.ResponseWriter, r *http.Request) error {
	if err := operator(r); err != nil {
		return err
	}
	out := []remoteRecord{}
	for d, u := range s.opt.Remotes {
		out = append(out, remoteRecord{Domain: d, BaseURL: u})
	}
	if s.opt.Records != nil {
		recs, err := s.opt.Records.ListRecords(r.Context(), remoteKind, "", 1000)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			var rr remoteRecord
			if json.Unmarshal(rec.Data, &rr) == nil {
				if _, static := s.opt.Remotes[rr.Domain]; !static {
					out = append(out, rr)
				}
			}
		}
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"remotes": out})
	return nil
}

// putRemote is PUT /mamp/v1/remotes/{domain} (operator).
func (s *Server) putRemote(w http.ResponseWriter, r *http.Request) error {
	if err := operator(r); err != nil {
		return err
	}
	st, err := s.records()
	if err != nil {
		return err
	}
	domain := strings.ToLower(r.PathValue("domain"))
	if _, err := ParseURI("agent://" + domain + "/x"); err != nil || strings.EqualFold(domain, s.ad.Host) {
		return bad(httperr.CodeInvalidField, "%q is not a remote domain", trunc(domain))
	}
	var req struct {
		BaseURL string `json:"base_url"`
	}
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if err := ssrf.CheckForm("base_url", req.BaseURL); err != nil {
		return bad(httperr.CodeInvalidField, "%s", strings.Replace(err.Error(), "callback_url", "base_url", 1))
	}
	data, _ := json.Marshal(remoteRecord{Domain: domain, BaseURL: req.BaseURL})
	rec := core.Record{Kind: remoteKind, ID: domain, Data: data, UpdatedAt: s.relay.Clock().Now()}
	if old, err := st.GetRecord(r.Context(), remoteKind, domain); err == nil {
		rec.Version = old.Version
	}
	if _, err := st.PutRecord(r.Context(), rec); err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, remoteRecord{Domain: domain, BaseURL: req.BaseURL})
	return nil
}

// deleteRemote is DELETE /mamp/v1/remotes/{domain} (operator).
func (s *Server) deleteRemote(w http.ResponseWriter, r *http.Request) error {
	if err := operator(r); err != nil {
		return err
	}
	st, err := s.records()
	if err != nil {
		return err
	}
	if err := st.DeleteRecord(r.Context(), remoteKind, strings.ToLower(r.PathValue("domain"))); err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"ok": true})
	return nil
}
