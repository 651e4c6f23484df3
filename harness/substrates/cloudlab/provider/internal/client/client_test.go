package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/harness-testbed/terraform-provider-cloudlab/internal/client"
	"github.com/harness-testbed/terraform-provider-cloudlab/internal/fakeportal"
)

const token = "tok-SECRET-1234567890"

func setup(t *testing.T) (*fakeportal.Portal, *client.Client) {
	t.Helper()
	p := fakeportal.New(token)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, newClient(t, srv.URL, token)
}

func newClient(t *testing.T, url, tok string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: url, Token: tok, RetryBase: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var create = client.ExperimentCreate{Name: "exp1", Project: "proj", ProfileName: "small",
	ProfileProject: "proj", Duration: 4, Bindings: map[string]string{"n": "2", "hwtype": "xl170"}}

func TestExperimentLifecycle(t *testing.T) {
	p, c := setup(t)
	ctx := ctxT(t, 10*time.Second)
	exp, err := c.CreateExperiment(ctx, create) // POST /experiments is 307-redirected to /experiments/
	if err != nil {
		t.Fatal(err)
	}
	if exp.Status != "created" || p.Count("POST /experiments/") != 1 {
		t.Fatalf("status %q, requests %v", exp.Status, p.Requests)
	}
	if !strings.Contains(p.Bodies[len(p.Bodies)-1], `"n":"2"`) {
		t.Errorf("bindings not sent as strings: %s", p.Bodies[len(p.Bodies)-1])
	}
	ready, err := c.WaitExperimentReady(ctx, exp.ID, time.Millisecond)
	if err != nil || ready.Status != "ready" {
		t.Fatalf("wait: %v %+v", err, ready)
	}
	if p.Count("GET /experiments/"+exp.ID) < 3 {
		t.Errorf("expected several polls: %v", p.Requests)
	}
	byName, err := c.GetExperiment(ctx, "proj,exp1")
	if err != nil || byName.ID != exp.ID {
		t.Fatalf("get by project,name: %v %+v", err, byName)
	}
	if l, err := c.ListExperiments(ctx, "proj"); err != nil || len(l) != 1 || l[0].ID != exp.ID {
		t.Fatalf("list: %v %+v", err, l)
	}
	m, err := c.GetManifests(ctx, exp.ID)
	if err != nil {
		t.Fatal(err)
	}
	nodes, errs := client.BuildNodes(ready, m)
	if len(errs) > 0 || len(nodes) != 2 {
		t.Fatalf("nodes %+v errs %v", nodes, errs)
	}
	n1, n2 := nodes[0], nodes[1]
	if n1.ClientID != "node1" || n1.SSHPort != 2222 || n1.SSHUser != "alice" || n1.SSHHost != "pc101.emulab.net" || n1.IPv4 != "10.1.0.1" {
		t.Errorf("node1 %+v", n1)
	}
	if n2.ClientID != "node2" || n2.SSHPort != 22 || n2.SSHUser != "" || n2.SSHHost != "pc102.emulab.net" {
		t.Errorf("node2 (no <login>: hostname:22 expected) %+v", n2)
	}
	ext, err := c.ExtendExperiment(ctx, exp.ID, 2, "test")
	if err != nil || ext.ExpiresAt == ready.ExpiresAt {
		t.Fatalf("extend: %v %s", err, ext.ExpiresAt)
	}
	if err := c.DeleteExperiment(ctx, exp.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetExperiment(ctx, exp.ID); err != nil {
		t.Fatalf("delete is asynchronous, GET should still answer: %v", err)
	}
	if err := c.WaitExperimentGone(ctx, exp.ID, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetExperiment(ctx, exp.ID)
	var apiErr *client.APIError
	if !client.IsNotFound(err) || !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("want typed 404, got %v", err)
	}
	if err := c.DeleteExperiment(ctx, exp.ID); err != nil {
		t.Fatalf("DELETE of a gone experiment is a success: %v", err)
	}
}

func TestFailedExperimentNamesURL(t *testing.T) {
	_, c := setup(t)
	ctx := ctxT(t, 10*time.Second)
	in := create
	in.Name = "will-fail"
	exp, err := c.CreateExperiment(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WaitExperimentReady(ctx, exp.ID, time.Millisecond)
	var fe *client.FailedError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "https://portal.example/status.php?uuid="+exp.ID) {
		t.Fatalf("want FailedError with url, got %v", err)
	}
}

func TestWaitTimeoutReportsLastStatus(t *testing.T) {
	p, c := setup(t)
	p.ReadyAfter = 1 << 30
	exp, err := c.CreateExperiment(ctxT(t, 5*time.Second), create)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WaitExperimentReady(ctxT(t, 100*time.Millisecond), exp.ID, 10*time.Millisecond)
	if !client.IsTimeout(err) || !strings.Contains(err.Error(), "provisioning") {
		t.Fatalf("want timeout with last status provisioning, got %v", err)
	}
}

func TestRetries(t *testing.T) {
	p, c := setup(t)
	ctx := ctxT(t, 10*time.Second)
	p.Busy429, p.RetryAfter = 1, "1"
	start := time.Now()
	exp, err := c.CreateExperiment(ctx, create)
	if err != nil {
		t.Fatalf("429 once should be retried: %v", err)
	}
	if time.Since(start) < 900*time.Millisecond {
		t.Errorf("Retry-After: 1 not respected (%v)", time.Since(start))
	}
	p.Fail500 = 2
	if _, err := c.GetExperiment(ctx, exp.ID); err != nil {
		t.Fatalf("5xx on GET should be retried: %v", err)
	}
	// 429 forever: gives up at the context deadline with the portal's message.
	p.Busy429, p.RetryAfter = 1000, ""
	_, err = c.CreateProfile(ctxT(t, 200*time.Millisecond), client.ProfileCreate{Name: "x", Project: "p", Script: "s"})
	if err == nil || !strings.Contains(err.Error(), "HTTP 429") || !strings.Contains(err.Error(), "Load too high") {
		t.Fatalf("want 429 error, got %v", err)
	}
	if !strings.Contains(err.Error(), "POST /profiles") {
		t.Errorf("error should name method and path: %v", err)
	}
}

func TestBadTokenIsRedactedAndClear(t *testing.T) {
	p := fakeportal.New(token)
	p.EchoToken = true // the portal puts the received token in its message
	srv := httptest.NewServer(p)
	defer srv.Close()
	bad := "tok-WRONG-0987654321"
	c := newClient(t, srv.URL, bad)
	_, err := c.GetExperiment(ctxT(t, 5*time.Second), "proj,exp1")
	if !errors.Is(err, client.ErrUnauthorized) || !strings.Contains(err.Error(), "refused the API token") {
		t.Fatalf("want token refused, got %v", err)
	}
	if strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), token) {
		t.Fatalf("token leaked into error: %v", err)
	}
}

func TestRedirectToOtherHostRefused(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("request reached the other host with token %q", r.Header.Get("X-Api-Token"))
	}))
	defer other.Close()
	srv := httptest.NewServer(http.RedirectHandler(other.URL+"/experiments/", http.StatusTemporaryRedirect))
	defer srv.Close()
	_, err := newClient(t, srv.URL, token).GetExperiment(ctxT(t, 5*time.Second), "x")
	if err == nil || !strings.Contains(err.Error(), "refusing redirect") {
		t.Fatalf("want refused redirect, got %v", err)
	}
}

func TestProfiles(t *testing.T) {
	p, c := setup(t)
	ctx := ctxT(t, 5*time.Second)
	p.Busy429 = 1
	pr, err := c.CreateProfile(ctx, client.ProfileCreate{Name: "small", Project: "proj", Script: "v1"})
	if err != nil || pr.Version != 1 || pr.CurrentScript() != "v1" {
		t.Fatalf("create: %v %+v", err, pr)
	}
	s := "v2"
	pr, err = c.UpdateProfile(ctx, "proj,small", client.ProfileUpdate{Script: &s})
	if err != nil || pr.Version != 2 || pr.CurrentScript() != "v2" {
		t.Fatalf("patch: %v %+v", err, pr)
	}
	if err := c.DeleteProfile(ctx, pr.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetProfile(ctx, pr.ID); !client.IsNotFound(err) {
		t.Fatalf("want 404, got %v", err)
	}
}

func TestNodeAction(t *testing.T) {
	_, c := setup(t)
	ctx := ctxT(t, 10*time.Second)
	exp, _ := c.CreateExperiment(ctx, create)
	if _, err := c.WaitExperimentReady(ctx, exp.ID, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	first, err := c.NodeAction(ctx, exp.ID, "node1", "powercycle")
	if err != nil || first.Status != "rebooting" {
		t.Fatalf("action: %v %+v", err, first)
	}
	n, err := c.WaitNodeSettled(ctx, exp.ID, "node1", "powercycle", first, time.Millisecond)
	if err != nil || n.Status != "ready" {
		t.Fatalf("settle: %v %+v", err, n)
	}
	if _, err := c.NodeAction(ctx, exp.ID, "node1", "explode"); err == nil {
		t.Fatal("unknown action accepted")
	}
	if _, err := c.NodeAction(ctx, exp.ID, "node9", "reboot"); !client.IsNotFound(err) {
		t.Fatalf("want 404 for unknown node, got %v", err)
	}
}
