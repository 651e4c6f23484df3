// Package fakeportal is an in-process imitation of the CloudLab Portal API for tests:
// same JSON shapes, status strings and errors, and asynchronous behaviour counted in
// GETs (not wall time) so tests are fast and deterministic:
//
//   - an experiment is `created`, then `provisioning` for ReadyAfter-1 GETs, then `ready`
//     (or `failed` when its name contains "fail");
//   - DELETE answers 204 but GET still shows the experiment (`terminating`) for
//     GoneAfter GETs, then 404;
//   - a wrong X-Api-Token gives 401; Busy429 POSTs answer 429 (Retry-After) first;
//     Fail500 GETs answer 500 first; collection paths 307-redirect to a trailing slash;
//   - manifests are RSpec v3 XML; node1 has <login port="2222">, other nodes no login.
package fakeportal

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Portal is the fake. Set the exported knobs before serving.
type Portal struct {
	Token      string
	ReadyAfter int    // GETs until ready (default 3)
	GoneAfter  int    // GETs still answering after DELETE (default 2)
	Busy429    int    // next POSTs answered 429
	RetryAfter string // Retry-After header for 429 ("" = none)
	Fail500    int    // next GETs answered 500
	NodeSettle int    // GETs of a node until it settles after an action (default 2)
	EchoToken  bool   // put the received token in error messages (to test redaction)
	SSHUser    string // username in <login> (default "alice")

	mu       sync.Mutex
	exps     map[string]*experiment // by uuid
	profiles map[string]*profile
	seq      int
	Requests []string // "METHOD /path" of every request, in order
	Bodies   []string // raw bodies of POST/PUT/PATCH requests
}

type experiment struct {
	data     map[string]any
	nodes    []map[string]any
	gets     int
	deleting int // GETs left after DELETE, -1 when not deleting
	fail     bool
}

type profile struct{ data map[string]any }

// New returns a fake portal accepting token.
func New(token string) *Portal {
	return &Portal{Token: token, ReadyAfter: 3, GoneAfter: 2, NodeSettle: 2, SSHUser: "alice",
		exps: map[string]*experiment{}, profiles: map[string]*profile{}}
}

// ServeHTTP implements http.Handler.
func (p *Portal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Requests = append(p.Requests, r.Method+" "+r.URL.Path)
	var body map[string]any
	if r.Body != nil && (r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch) {
		raw, _ := io.ReadAll(r.Body)
		p.Bodies = append(p.Bodies, string(raw))
		if len(raw) > 0 && json.Unmarshal(raw, &body) != nil {
			p.fail(w, r, 400, "request body is not a JSON object")
			return
		}
	}
	if r.Header.Get("X-Api-Token") != p.Token {
		msg := "Invalid token"
		if p.EchoToken {
			msg = "Invalid token " + r.Header.Get("X-Api-Token")
		}
		p.fail(w, r, 401, msg)
		return
	}
	path := r.URL.Path
	if path == "/experiments" || path == "/profiles" {
		w.Header().Set("Location", path+"/")
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	if r.Method == http.MethodPost && p.Busy429 > 0 {
		p.Busy429--
		if p.RetryAfter != "" {
			w.Header().Set("Retry-After", p.RetryAfter)
		}
		p.fail(w, r, 429, "Load too high, try again later")
		return
	}
	if r.Method == http.MethodGet && p.Fail500 > 0 {
		p.Fail500--
		p.fail(w, r, 500, "Internal server error")
		return
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch parts[0] {
	case "experiments":
		p.experiments(w, r, parts[1:], body)
	case "profiles":
		p.profilesRoute(w, r, parts[1:], body)
	case "version":
		writeJSON(w, 200, map[string]any{"major": 1, "minor": 0, "patch": 0, "version": "1.0.0"})
	default:
		p.fail(w, r, 404, "No such path")
	}
}

func (p *Portal) fail(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	var code any = status
	if status == 401 {
		code = nil // the API allows a null code
	}
	writeJSON(w, status, map[string]any{"error": msg, "code": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v != nil {
		_ = json.NewEncoder(w).Encode(v)
	}
}

func (p *Portal) uuid() string {
	p.seq++
	return fmt.Sprintf("5f0c%04x-0000-4000-8000-%012x", p.seq, p.seq)
}

// Experiments returns how many experiments exist (deleting ones included).
func (p *Portal) Experiments() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.exps)
}

// Count returns how many recorded requests start with prefix (e.g. "POST /experiments").
func (p *Portal) Count(prefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.Requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}
